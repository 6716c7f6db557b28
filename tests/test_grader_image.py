"""The grader beyond one machine: the image (tools/grader.Dockerfile) installs the grader the way
`make grade` does and runs the environment's Python; the Kubernetes Job passes the baseline Pod
Security standard; the Slurm script runs the environment's Python. The image is built where a
docker daemon answers (TMM_REQUIRE_DOCKER=1 makes that mandatory); elsewhere the file is read."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pytest
from conftest import ROOT, skip_for_missing

yaml = pytest.importorskip("yaml")

DOCKERFILE = ROOT / "tools" / "grader.Dockerfile"
JOB = ROOT / "tools" / "kubernetes" / "grade-indexed-job.yaml"
SLURM = ROOT / "tools" / "slurm" / "grade-array.sbatch"
# what the baseline Pod Security standard lets a container add (kubernetes.io/docs/concepts/
# security/pod-security-standards, "Capabilities")
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}  # fmt: skip


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuation lines joined), comments left out."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [tuple(line.split(None, 1)) for line in lines]  # type: ignore[misc]


def test_the_image_installs_the_grader_as_make_grade_does():
    steps = instructions()
    assert steps[0][0] == "FROM" and re.match(r"python:3\.1[0-9]", steps[0][1])
    runs = " ".join(arg for op, arg in steps if op == "RUN")
    assert "EXTRAS=grade" in runs and "bash tools/setup-venv.sh" in runs  # one pin, one install
    packages = re.search(r"apt-get install -y --no-install-recommends ([\w\s-]+)", runs).group(1)
    assert {"bubblewrap", "util-linux"} <= set(packages.split())  # bwrap, and setpriv
    env = dict(re.findall(r"(\w+)=(\S+)", next(arg for op, arg in steps if op == "ENV")))
    venv = re.search(r"VENV=(\S+)", runs).group(1)
    assert env["PATH"].startswith(f"{venv}/bin:"), "python in the image is not its venv's"
    assert next(arg for op, arg in steps if op == "USER") != "0"
    assert next(arg for op, arg in steps if op == "ENTRYPOINT") == (
        '["python", "-m", "tmm_course.teach.grade"]'
    )


def test_the_build_context_leaves_local_state_out():
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    for path in (".git", ".venv", "build", "inbox", "submissions", "grades*"):
        assert path in ignored, path


def _docker_daemon() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def test_the_image_builds_and_its_grader_answers():
    if not _docker_daemon():
        if os.environ.get("TMM_REQUIRE_DOCKER"):
            pytest.fail("TMM_REQUIRE_DOCKER is set but no docker daemon answers")
        skip_for_missing("a docker daemon (the image's build command: tools/grader.Dockerfile)")
    documented = re.search(r"^#\s+(docker build -f \S+ -t \S+ \.)\s", DOCKERFILE.read_text(), re.M)
    command = documented.group(1)  # the documented command itself
    subprocess.run(shlex.split(command), cwd=ROOT, check=True, timeout=3600)
    tag = shlex.split(command)[shlex.split(command).index("-t") + 1]
    helped = subprocess.run(["docker", "run", "--rm", tag, "--help"], capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert helped.returncode == 0 and "--no-isolation" in helped.stdout


def _pod() -> dict:
    return yaml.safe_load(JOB.read_text())["spec"]["template"]["spec"]


def test_the_job_passes_the_baseline_pod_security_standard():
    pod = _pod()
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(host), host
    assert not [v for v in pod.get("volumes", []) if "hostPath" in v]
    seccomp = pod.get("securityContext", {}).get("seccompProfile", {}).get("type")
    assert seccomp in (None, "RuntimeDefault", "Localhost")
    for container in pod["containers"] + pod.get("initContainers", []):
        context = container.get("securityContext", {})
        assert not context.get("privileged"), "a privileged container"
        assert context.get("procMount", "Default") == "Default"
        added = set(context.get("capabilities", {}).get("add", []))
        assert added <= BASELINE_CAPABILITIES, added - BASELINE_CAPABILITIES
        assert context.get("seccompProfile", {}).get("type") != "Unconfined"
        assert not [p for p in container.get("ports", []) if p.get("hostPort")]
    # and the narrower choices it states: no root, nothing to escalate to, no token
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    assert pod["containers"][0]["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_the_job_grades_unisolated_in_the_images_python():
    container = _pod()["containers"][0]
    command = " ".join(container["args"])
    assert command.startswith("python -m tmm_course.teach.grade ")  # PATH: the image's venv
    assert "--no-isolation" in command  # the sandbox needs what baseline forbids
    assert "tmm-course-grader" in container["image"]
    network = yaml.safe_load((JOB.parent / "no-network.yaml").read_text())
    assert network["spec"]["podSelector"]["matchLabels"] == _pod_labels()
    assert network["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in network["spec"] and "egress" not in network["spec"]


def _pod_labels() -> dict:
    return yaml.safe_load(JOB.read_text())["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("venv", [True, False], ids=["submit-dir .venv", "python3"])
def test_the_slurm_script_runs_the_environments_python(tmp_path, venv):
    """As a task of the array: the submitting checkout's .venv, else python3 (never PATH's
    `python`)."""
    called = tmp_path / "called"
    fake = f'#!/bin/sh\necho "$0 $*" > {called}\n'
    submit = tmp_path / "checkout"
    bin_dir = tmp_path / "bin"
    for path in ([submit / ".venv" / "bin" / "python"] if venv else []) + [
        bin_dir / "python3",
        bin_dir / "python",
    ]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fake)
        path.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TMM_PYTHON"}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", SLURM_SUBMIT_DIR=str(submit))
    env.update(SLURM_ARRAY_TASK_ID="1", SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_COUNT="2")
    done = subprocess.run(["bash", str(SLURM), "inbox/", str(tmp_path / "graded")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    program, *args = called.read_text().split()
    expected = submit / ".venv" / "bin" / "python" if venv else bin_dir / "python3"
    assert program == str(expected)
    assert args[:4] == ["-m", "tmm_course.teach.grade", "inbox/", "--shard"] and args[4] == "1/2"
