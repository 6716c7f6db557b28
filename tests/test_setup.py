"""What each make target installs into .venv: a learner's `make course` the course and
JupyterLab only, `make test` everything the tests and the grader need."""

from __future__ import annotations

import re

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
    command = script.split('"torch==$TORCH_VERSION"')[0].rsplit("\n", 2)[-2:]  # its two lines
    words = " ".join(command).split()
    assert "--progress-bar" in words and words[words.index("--progress-bar") + 1] == "on"
    assert "-q" not in words and '"${pip[@]}"' not in words  # the quiet pip of the other steps
