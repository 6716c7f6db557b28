"""Lesson 6's predict_knob (exercises/predict_knob.py): judged against what the compiler makes of
both launches, for the check and the grader alike. Two compiles for sm_90, cached: a few
seconds in all."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from tmm_course.check import check_predict_knob
from tmm_course.exercises import BY_NAME, predict_knob
from tmm_course.teach.release import typed_in

NOTEBOOK = ROOT / "notebooks" / "06_making_it_fast.ipynb"


def cell(cell_id: str) -> str:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return next("".join(c["source"]) for c in cells if c.get("id") == cell_id)


def bound(source: str) -> object:
    scope: dict = {}
    exec(source, scope)  # the cell is a literal dict and comments
    return scope[predict_knob.NAME]


@pytest.fixture(scope="module")
def solution() -> dict:
    cells = predict_knob.EXERCISE.cells
    assert cells is not None and BY_NAME["predict_knob"] is predict_knob.EXERCISE
    return bound(typed_in(cell(cells.solution)))


def test_the_solution_is_what_the_compiler_shows(solution):
    result = check_predict_knob(solution)
    assert result.passed, result.diagnoses
    assert len(result.cases) == len(predict_knob.ANSWERS)
    spills = next(c for c in result.cases if c.label.startswith("spills"))
    assert "bytes spilled per thread after (before: 0)" in spills.problem


@pytest.mark.parametrize("key", list(predict_knob.ANSWERS))
def test_a_wrong_prediction_is_named_with_its_figure(solution, key):
    right = solution[key]
    wrong = (not right) if key == "spills" else ("same" if right != "same" else "up")
    result = check_predict_knob({**solution, key: wrong})
    assert result.codes == ["wrong_prediction"]
    message = result.primary.message
    assert message.startswith("1 of 5 predictions is not what the compiler shows")
    figure = next(c.problem for c in result.cases if c.label.startswith(f"{key}:"))
    assert f"{key} (you said {wrong!r}): {figure.removeprefix('the compiler: ')}." in message


def test_the_cell_as_handed_out_is_not_implemented():
    result = check_predict_knob(bound(cell(predict_knob.EXERCISE.cells.exercise)))
    assert result.codes == ["not_implemented"]


@pytest.mark.parametrize(
    ("answer", "said"),
    [("up", "must be a dict, not a str"),
     ({"registers": "up"}, "missing 'registers per thread'"),
     ({**dict.fromkeys(predict_knob.ANSWERS), "spills": "yes"}, "expected one of True, False")],
)  # fmt: skip
def test_a_prediction_that_cannot_be_read_says_what_was_expected(answer, said):
    result = check_predict_knob(answer)
    assert result.codes == ["crashed"] and said in result.primary.message
