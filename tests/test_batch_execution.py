"""Notebooks execute in batch, as instructors run them, each in a fresh process from a folder
holding nothing but the notebook, within a minute of the kernel's CPU time (what the notebook
costs, however busy the machine is; the wall clock only has to show it did not hang), for the
first lesson and the homework (:data:`BY_BATCH`): ``papermill`` runs their student copies
(``make student``: the solutions left out), ``jupyter nbconvert --execute`` their course
notebooks, and with the exercises untouched no check passes (each says ``not_implemented``).
Every lesson's student copy runs in the site build, whose test asks the same of each check
(tests/test_site.py); every course notebook runs under nbval in both jobs of the version
matrix, and solved in tests/test_exercises.py: running each under both tools too would only
repeat them in CI's 30 minutes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from conftest import NOTEBOOKS, check_results

from tmm_course.teach.release import is_solution, student_notebook

LIMIT_S = 60  # CPU seconds per notebook and run, the course's promise
HUNG_S = 4 * LIMIT_S  # wall seconds: a machine busy with other tests, or a hang
CPU_CELL = (  # appended to the notebook run: the kernel's own CPU seconds, its children's too
    "import resource\n"
    "used = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]\n"
    "print('cpu seconds', sum(r.ru_utime + r.ru_stime for r in used))"
)
KERNEL_DIED = "Kernel died before replying to kernel_info"
# the notebooks both tools run: the first lesson, and the homework instructors hand out
BY_BATCH = [path for path in NOTEBOOKS if path.stem in ("00_start_here", "05_homework_transpose")]


def _command(tool: str, notebook: Path, executed: Path) -> list[str]:
    if tool == "nbconvert":
        return [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
                f"--ExecutePreprocessor.timeout={HUNG_S}", "--output", executed.name,
                str(notebook)]  # fmt: skip
    return [sys.executable, "-m", "papermill", "--no-progress-bar", "--execution-timeout",
            str(HUNG_S), "-k", "python3", "--cwd", str(notebook.parent), str(notebook),
            str(executed)]  # fmt: skip


def _execute(tool: str, path: Path, tmp_path: Path) -> nbformat.NotebookNode:
    notebook = tmp_path / path.name
    course = json.loads(path.read_text(encoding="utf-8"))
    run = student_notebook(course) if tool == "papermill" else course
    cpu_cell = {"cell_type": "code", "execution_count": None, "id": "cpu-seconds",
                "metadata": {}, "outputs": [], "source": CPU_CELL}  # fmt: skip
    text = json.dumps({**run, "cells": [*run["cells"], cpu_cell]})
    notebook.write_text(text, encoding="utf-8")
    executed = tmp_path / f"executed_{path.name}"
    for _attempt in range(2):  # a kernel that dies before it starts is started once more
        start = time.monotonic()
        try:
            done = subprocess.run(_command(tool, notebook, executed), cwd=tmp_path,
                                  capture_output=True, text=True, timeout=HUNG_S)  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.fail(f"{tool} did not finish {path.name} within {HUNG_S} s: it hangs")
        seconds = time.monotonic() - start
        # jupyter_client's known start-up race (two kernels picking one port at once), before
        # any cell of the notebook ran: not the notebook's doing
        if KERNEL_DIED not in done.stderr:
            break
    assert done.returncode == 0, f"{tool} failed on {path.name}:\n{done.stderr[-3000:]}"
    result = nbformat.read(executed, as_version=4)
    code = [c for c in result.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), "a code cell did not run"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name} raised: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    said = "".join(o.get("text", "") for o in code[-1].get("outputs", []))
    cpu = float(said.split("cpu seconds")[1])
    print(f"{tool} {path.name}: {cpu:.1f} s of CPU, {seconds:.1f} s on the clock")
    assert cpu < LIMIT_S, f"{path.name} took {cpu:.0f} s of CPU under {tool} (limit {LIMIT_S} s)"
    result.cells = result.cells[:-1]
    return result


@pytest.mark.parametrize("path", BY_BATCH, ids=lambda p: p.stem)
def test_nbconvert_runs_the_notebook_and_no_untouched_exercise_passes(path, tmp_path):
    executed = _execute("nbconvert", path, tmp_path)
    results = check_results(executed)
    assert results or not any(is_solution(c) for c in executed.cells), "no check cell"
    for name, result in results.items():
        assert not result["passed"], f"{name} passed with the exercise untouched"
        assert result["codes"] == ["not_implemented"], (name, result["codes"])


@pytest.mark.parametrize("path", BY_BATCH, ids=lambda p: p.stem)
def test_papermill_runs_the_student_copy_and_no_untouched_exercise_passes(path, tmp_path):
    pytest.importorskip("papermill")
    executed = _execute("papermill", path, tmp_path)
    assert not any(is_solution(c) for c in executed.cells)
    results = check_results(executed)
    graded = any(is_solution(c) for c in nbformat.read(path, as_version=4).cells)
    assert results or not graded, "no check cell ran"
    for name, result in results.items():
        assert not result["passed"], f"{name} passed with the exercise untouched"
        assert result["codes"] == ["not_implemented"], (name, result["codes"])
