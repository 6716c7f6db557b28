"""The learner's attempt is what gets checked: run top to bottom with the exercises untouched,
no check passes; with each solution typed into its exercise cell, every check passes."""

from __future__ import annotations

import json

import nbformat
import pytest
from conftest import NOTEBOOKS
from nbclient import NotebookClient

from tmm_course.check.result import RESULT_MIMETYPE
from tmm_course.teach.release import is_solution, solved_notebook

WITH_EXERCISES = [
    p for p in NOTEBOOKS if any(is_solution(c) for c in json.loads(p.read_text())["cells"])
]


def check_results(notebook: nbformat.NotebookNode) -> dict[str, dict]:
    """Exercise name -> the check result its check cell displayed."""
    found = {}
    for cell in notebook.cells:
        for tag in cell.metadata.get("tags", []):
            if tag.startswith("check:"):
                data = [o.get("data", {}).get(RESULT_MIMETYPE) for o in cell.get("outputs", [])]
                found[tag.removeprefix("check:")] = next(d for d in data if d)
    return found


def execute(notebook: nbformat.NotebookNode, folder) -> nbformat.NotebookNode:
    NotebookClient(notebook, timeout=300, resources={"metadata": {"path": str(folder)}}).execute()
    return notebook


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_untouched_exercises_are_not_implemented(path, tmp_path):
    notebook = execute(nbformat.read(path, as_version=4), tmp_path)
    results = check_results(notebook)
    assert results, "no check cell"
    for name, result in results.items():
        assert not result["passed"], f"{name} passed with the exercise untouched"
        assert result["codes"] == ["not_implemented"], (name, result["codes"])


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_solutions_typed_into_the_exercises_pass(path, tmp_path):
    course = json.loads(path.read_text(encoding="utf-8"))
    solved = nbformat.reads(json.dumps(solved_notebook(course)), as_version=4)
    results = check_results(execute(solved, tmp_path))
    assert results
    for name, result in results.items():
        assert result["passed"], f"{name}: {result['codes']}"
