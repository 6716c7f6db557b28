"""Every notebook executes in batch, as instructors run it: ``jupyter nbconvert --execute`` and
``papermill``, each in a fresh process from a folder holding nothing but the notebook, within a
minute. Lesson 1 (whose explorer once left nbconvert idle for the whole cell timeout, one run in
a few) runs five times in a row with each tool; the other lessons once, to keep CI short."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from conftest import NOTEBOOKS

LIMIT_S = 60  # per notebook and run, the course's promise
STRESSED = "01_tile_fill.ipynb"
REPEATS = 5


def _runs() -> list:
    runs = []
    for path in NOTEBOOKS:
        for tool in ("nbconvert", "papermill"):
            for attempt in range(REPEATS if path.name == STRESSED else 1):
                runs.append(pytest.param(path, tool, id=f"{path.stem}-{tool}-{attempt + 1}"))
    return runs


def _command(tool: str, notebook: Path, executed: Path) -> list[str]:
    if tool == "nbconvert":
        return [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
                f"--ExecutePreprocessor.timeout={LIMIT_S}", "--output", executed.name,
                str(notebook)]  # fmt: skip
    return [sys.executable, "-m", "papermill", "--no-progress-bar", "--execution-timeout",
            str(LIMIT_S), "-k", "python3", "--cwd", str(notebook.parent), str(notebook),
            str(executed)]  # fmt: skip


@pytest.mark.parametrize(("path", "tool"), _runs())
def test_notebook_executes_in_batch_within_a_minute(path, tool, tmp_path):
    if tool == "papermill":
        pytest.importorskip("papermill")
    notebook = tmp_path / path.name
    shutil.copy(path, notebook)
    executed = tmp_path / f"executed_{path.name}"
    start = time.monotonic()
    try:
        done = subprocess.run(_command(tool, notebook, executed), cwd=tmp_path, capture_output=True,
                              text=True, timeout=LIMIT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"{tool} did not finish {path.name} within {LIMIT_S} s")
    seconds = time.monotonic() - start
    assert done.returncode == 0, f"{tool} failed on {path.name}:\n{done.stderr[-3000:]}"
    result = nbformat.read(executed, as_version=4)
    code = [c for c in result.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), "a code cell did not run"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name} raised: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    print(f"{tool} {path.name}: {seconds:.1f} s")
