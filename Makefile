# The two commands of the course (each sets up .venv first, once):
#   make course   open the course in JupyterLab (installs the course and JupyterLab, nothing else)
#   make test     lint, unit tests, and every notebook executed (the site build, solved; adds
#                 the test and grading tools to .venv)
#   make site     the course as web pages in build/site (every lesson run, then Sphinx, myst-nb)
# Whichever command creates .venv installs torch; on a machine without an NVIDIA GPU, give it the
# CPU build (far smaller): TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu make course
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# one stamp per role: which extras of pyproject.toml it installs into .venv
COURSE_ENV := $(VENV)/.installed-course
TEST_ENV   := $(VENV)/.installed-test
GRADE_ENV  := $(VENV)/.installed-grade
SITE_ENV   := $(VENV)/.installed-site
# extra JupyterLab options, e.g. on a remote machine: make course LAB_ARGS="--no-browser --port 8888"
LAB_ARGS ?=
AS_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
SETUP = PYTHON=$(PYTHON) VENV=$(VENV) bash tools/setup-venv.sh

.PHONY: course test setup setup-test site colab-links wheel student grade clean

# kernels talk to JupyterLab over local sockets (ipc), not TCP: nothing listens on the network
# but JupyterLab itself, and ipykernel has no reason to warn about eavesdropping
course: $(COURSE_ENV)
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --KernelManager.transport=ipc \
	  --LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb $(AS_ROOT) $(LAB_ARGS)

test: $(TEST_ENV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n auto --dist loadfile

# set up .venv without starting anything: the learner's tools (setup) or everything (setup-test)
setup: $(COURSE_ENV)
setup-test: $(TEST_ENV)

$(COURSE_ENV): pyproject.toml tools/setup-venv.sh tools/jupyterlab-overrides.json
	EXTRAS=course $(SETUP)
	touch $@

# make test's tools include the course's, the grader's and the site's (its test builds it)
$(TEST_ENV): pyproject.toml tools/setup-venv.sh tools/jupyterlab-overrides.json
	EXTRAS=course,test,grade,site $(SETUP)
	touch $@ $(COURSE_ENV) $(GRADE_ENV) $(SITE_ENV)

$(SITE_ENV): pyproject.toml tools/setup-venv.sh tools/jupyterlab-overrides.json
	EXTRAS=course,site $(SETUP)
	touch $@ $(COURSE_ENV)

# the course as static web pages: build/site/index.html and one page per lesson
site: $(SITE_ENV)
	$(BIN)/python docs/build.py

$(GRADE_ENV): pyproject.toml tools/setup-venv.sh
	EXTRAS=grade $(SETUP)
	touch $@

# regenerate colab_links.md and the notebooks' Colab install cells and runtime (a T4)
colab-links: $(COURSE_ENV)
	$(BIN)/python -m tmm_course.teach.colab

# the release wheel, dist/tmm_course-<version>-py3-none-any.whl (CONTRIBUTING.md: releases)
wheel: $(COURSE_ENV)
	$(BIN)/python -m pip wheel --no-deps -w dist .

# the student copy: every notebook without its solutions (make student STUDENT=handout/);
# make student FORCE=1 replaces the notebooks of an existing copy
STUDENT ?= student
FORCE ?=
student: $(COURSE_ENV)
	$(BIN)/python -m tmm_course.teach.release notebooks $(STUDENT) $(if $(FORCE),--force,)

# grade a folder of submitted homework notebooks into grades.csv
# (make grade SUBMISSIONS=inbox/ TIMEOUT=300 JOBS=2; no JOBS: one per GPU, else per core)
SUBMISSIONS ?= submissions
TIMEOUT ?= 300
JOBS ?=
grade: $(GRADE_ENV)
	$(BIN)/python -m tmm_course.teach.grade $(SUBMISSIONS) --out grades.csv --timeout $(TIMEOUT) $(if $(JOBS),--jobs $(JOBS))

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
