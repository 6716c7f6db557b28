"""Shared fixtures. ``import tmm_course`` first, as every notebook does."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import NoReturn

import pytest
import torch

import tmm_course
from tmm_course.check.result import RESULT_MIMETYPE

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def check_results(notebook) -> dict[str, dict]:
    """Exercise name -> the check result its check cell displayed."""
    found = {}
    for cell in notebook.cells:
        for tag in cell.metadata.get("tags", []):
            if tag.startswith("check:"):
                data = [o.get("data", {}).get(RESULT_MIMETYPE) for o in cell.get("outputs", [])]
                found[tag.removeprefix("check:")] = next(d for d in data if d)
    return found


on_gpu = pytest.mark.skipif(tmm_course.BACKEND != "gpu", reason="needs compiled Triton on a GPU")
on_interpreter = pytest.mark.skipif(
    tmm_course.BACKEND != "interpreter", reason="needs Triton's interpreter"
)


# the start of the reason of every skip for something this machine lacks (a program, a package)
MISSING = "missing on this machine: "


def skip_for_missing(what: str) -> NoReturn:
    """Skip a test because this machine lacks ``what`` (say how to install it); a plain
    `make test` names every such skip at the end of its report. Works in a test, a fixture or
    at the top of a module."""
    pytest.skip(MISSING + what, allow_module_level=True)


def pytest_terminal_summary(terminalreporter) -> None:
    """Name each skip that hides a missing program or package, however quiet the report."""
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        if isinstance(report.longrepr, tuple):
            reason = report.longrepr[2].removeprefix("Skipped: ")
            if reason.startswith(MISSING):
                reasons[reason.removeprefix(MISSING)] += 1
    if reasons:
        terminalreporter.section("skipped: missing on this machine", yellow=True)
        for what, count in sorted(reasons.items()):
            tests = "test" if count == 1 else "tests"
            terminalreporter.line(f"{count} {tests} skipped, missing {what}")


# The graders' tests look host-wide for sandboxed processes a run left behind, and each grader
# spreads its submissions over the cores: under `--dist loadfile` their two files form one scope,
# so one worker runs them one after the other and two graders never overlap.
GRADING = ("test_grade.py", "test_grade_attacks.py")


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GradersTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return GRADING[0] if scope.rsplit("/", 1)[-1] in GRADING else scope

    return GradersTogether(config, log)


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` from a file (``@triton.jit`` needs one) in a fresh interpreter, so that
    imports happen anew, with extra ``env``."""
    environ = {k: v for k, v in os.environ.items() if k not in ("TMM_BACKEND", "TRITON_INTERPRET")}
    environ.update(env)
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "script.py"
        script.write_text(code)
        return subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=environ, timeout=300
        )


@pytest.fixture
def use_fit():
    """``capstone.use_fit``: plans from the fit a test gives it, the shipped one again after."""
    from tmm_course import capstone

    yield capstone.use_fit
    capstone.use_fit(None)


@pytest.fixture
def device() -> torch.device:
    return tmm_course.DEVICE


if os.environ.get("TMM_EXPECT_INSTALLED"):  # the version matrix tests the installed package
    assert ROOT / "tmm_course" not in Path(tmm_course.__file__).resolve().parents, (
        f"tmm_course was imported from the checkout ({tmm_course.__file__}), not the install"
    )
