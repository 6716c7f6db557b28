"""What each make target installs into .venv: a learner's `make course` the course and
JupyterLab only, `make test` everything the tests and the grader need."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from conftest import ROOT

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11+")

MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "optional-dependencies"
]
INSTRUCTORS_TOOLS = {"pytest", "nbval", "ruff", "playwright", "nbgrader", "nbclient"}


def names(extra: str) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group().lower() for r in EXTRAS[extra]}


def installed_by(stamp: str) -> list[str]:
    """The extras the Makefile rule for ``stamp`` (COURSE_ENV, ...) passes to setup-venv.sh."""
    rule = re.search(rf"^\$\({stamp}\):.*\n\tEXTRAS=(\S+) \$\(SETUP\)", MAKEFILE, re.MULTILINE)
    assert rule, f"no setup rule for {stamp} in the Makefile"
    return rule.group(1).split(",")


def test_make_course_installs_jupyterlab_and_none_of_the_instructors_tools():
    assert installed_by("COURSE_ENV") == ["course"]
    assert names("course") == {"jupyterlab"}
    assert re.search(r"^course: \$\(COURSE_ENV\)$", MAKEFILE, re.MULTILINE)


def test_make_test_installs_the_test_grading_and_site_tools_too():
    assert installed_by("TEST_ENV") == [
        "course",
        "test",
        "grade",
        "site",
    ]  # its tests build the site
    assert re.search(r"^test: \$\(TEST_ENV\)$", MAKEFILE, re.MULTILINE)
    tools = names("test") | names("grade")
    assert tools >= INSTRUCTORS_TOOLS
    assert not INSTRUCTORS_TOOLS & names("course")


def test_make_grade_installs_what_the_grader_imports():
    assert installed_by("GRADE_ENV") == ["grade"]
    assert {"nbclient", "nbformat", "ipykernel"} <= names("grade")


def test_setup_installs_the_extras_it_is_given():
    script = (ROOT / "tools" / "setup-venv.sh").read_text(encoding="utf-8")
    assert 'install -e ".[$EXTRAS]"' in script


def test_setup_shows_pips_progress_through_the_torch_download():
    script = (ROOT / "tools" / "setup-venv.sh").read_text(encoding="utf-8")
    loud = next(line for line in script.splitlines() if line.startswith("loud_pip()"))
    words = loud.split()
    assert "--progress-bar" in words and words[words.index("--progress-bar") + 1] == "on"
    assert "-q" not in words and '"${pip[@]}"' not in words  # the quiet pip of the other steps
    assert 'loud_pip "torch==$TORCH_VERSION"' in script and 'loud_pip "$TORCH_WHEEL"' in script


# a .venv whose python answers as one without torch would, and logs every pip command it gets
FAKE_PYTHON = """#!/bin/sh
if [ "$1" = -c ]; then exit 1; fi
echo "$*" >> "$PIP_LOG"
case "$*" in *--no-index*) exit "$LOCAL_WHEEL_MISSING" ;; esac
exit 0
"""


def run_setup(tmp_path, local_wheel: bool = False, **env: str):
    """tools/setup-venv.sh on a fake .venv: what it printed, the pip commands, its seconds."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(FAKE_PYTHON)
    (venv / "bin" / "python").chmod(0o755)
    log = tmp_path / "pip.log"
    start = time.monotonic()
    done = subprocess.run(
        ["bash", str(ROOT / "tools" / "setup-venv.sh")], capture_output=True, text=True,
        timeout=60, env={**os.environ, "PYTHON": sys.executable, "VENV": str(venv),
                         "PIP_LOG": str(log), "LOCAL_WHEEL_MISSING": "0" if local_wheel else "1",
                         **env},
    )  # fmt: skip
    pips = log.read_text().splitlines() if log.exists() else []
    return done, pips, time.monotonic() - start


# nothing listens on port 1 of the loopback: refused at once; 10.255.255.1: never answers
UNREACHABLE = ["http://127.0.0.1:1/whl/cpu", "http://10.255.255.1/whl/cpu"]


@pytest.mark.parametrize("index", UNREACHABLE)
def test_an_unreachable_cpu_index_stops_in_one_line_with_the_commands_that_work(tmp_path, index):
    done, pips, seconds = run_setup(tmp_path, TORCH_INDEX_URL=index, TORCH_INDEX_TIMEOUT="3")
    assert done.returncode == 1
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith(f"Cannot reach {index} ("), done.stderr
    assert "without TORCH_INDEX_URL" in said[0] and "TORCH_WHEEL=/path/to/it" in said[0]
    assert "torch-2.13.0+cpu-cp" in said[0]
    assert not any("--index-url" in p for p in pips), "pip was sent to the unreachable index"
    assert seconds < 15, f"{seconds:.0f} s"  # one try, a short timeout: no retries


def test_an_unreachable_cpu_index_falls_back_to_pips_local_cpu_wheel(tmp_path):
    done, pips, _ = run_setup(tmp_path, local_wheel=True, TORCH_INDEX_URL=UNREACHABLE[0])
    assert done.returncode == 0, done.stderr
    assert "from pip's local wheels instead" in done.stdout.splitlines()[0]
    local = next(p for p in pips if "--no-index" in p)
    assert "--no-deps torch==2.13.0+cpu" in local  # the CPU build only, never a CUDA one
    assert any(p.endswith("install -e .[course]") for p in pips)


def test_a_torch_wheel_given_is_installed_without_asking_an_index(tmp_path):
    done, pips, _ = run_setup(tmp_path, TORCH_WHEEL="/wheels/torch-2.13.0+cpu.whl",
                              TORCH_INDEX_URL=UNREACHABLE[0])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert any(p.endswith("--progress-bar on /wheels/torch-2.13.0+cpu.whl") for p in pips)
    assert not any("torch==" in p for p in pips)
