# The grader's image: the course with its grading extra, bubblewrap and setpriv, for the
# Kubernetes indexed Job (tools/kubernetes/grade-indexed-job.yaml) and Slurm sites that run
# containers. Build it from the checkout's root (.dockerignore keeps local state out):
#   docker build -f tools/grader.Dockerfile -t tmm-course-grader .              # CPU torch
#   docker build -f tools/grader.Dockerfile --build-arg TORCH_INDEX_URL= \
#     -t tmm-course-grader:cuda .                                                # CUDA torch
#   docker run --rm tmm-course-grader --help                                     # smoke test
# .venv is made by tools/setup-venv.sh, as `make grade` makes it: one torch pin, one install.
# It runs as an unprivileged user; the sandbox (bubblewrap) needs root and a privileged
# container (docker run --user 0 --privileged), else the grader is given --no-isolation and the
# cluster's pod is the boundary (the Kubernetes Job does that).
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap util-linux \
 && rm -rf /var/lib/apt/lists/*
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
WORKDIR /course
COPY . .
RUN EXTRAS=grade VENV=/opt/venv PYTHON=python3 TORCH_INDEX_URL="$TORCH_INDEX_URL" \
    bash tools/setup-venv.sh \
 && useradd --uid 10001 --no-create-home --home-dir /tmp grader
# the environment's Python first on PATH: `python` is the venv's in every command
ENV PATH=/opt/venv/bin:$PATH VIRTUAL_ENV=/opt/venv HOME=/tmp
USER 10001
ENTRYPOINT ["python", "-m", "tmm_course.teach.grade"]
CMD ["--help"]
