"""The learner's attempt is what gets checked: with each solution typed into its exercise cell,
every check passes (with the exercises untouched none does: tests/test_batch_execution.py)."""

from __future__ import annotations

import json

import nbformat
import pytest
from conftest import NOTEBOOKS, check_results
from nbclient import NotebookClient

from tmm_course.teach.release import is_solution, solved_notebook

WITH_EXERCISES = [
    p for p in NOTEBOOKS if any(is_solution(c) for c in json.loads(p.read_text())["cells"])
]


def execute(notebook: nbformat.NotebookNode, folder) -> nbformat.NotebookNode:
    NotebookClient(notebook, timeout=300, resources={"metadata": {"path": str(folder)}}).execute()
    return notebook


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_solutions_typed_into_the_exercises_pass(path, tmp_path):
    course = json.loads(path.read_text(encoding="utf-8"))
    solved = nbformat.reads(json.dumps(solved_notebook(course)), as_version=4)
    results = check_results(execute(solved, tmp_path))
    assert results
    for name, result in results.items():
        assert result["passed"], f"{name}: {result['codes']}"
