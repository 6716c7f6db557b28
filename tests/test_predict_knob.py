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


def test_the_solutions_reasons_are_the_compilers():
    """What the solution cell's comment says, read off the two compiles: 256 accumulator values
    per thread cap the registers at 255 and spill; three stages of 32 KB slabs become three of
    48 KB; shared memory fitted two programs on an SM, then one; 64 FLOP per byte become 85."""
    from tmm_course.check.prediction import compiled
    from tmm_course.perf.intensity import tile_intensity

    start, changed = predict_knob.START, predict_knob.CHANGED
    before = compiled(start, predict_knob.SIZE, predict_knob.TARGET)
    after = compiled(changed, predict_knob.SIZE, predict_knob.TARGET)
    assert changed.block_m * changed.block_n // (32 * changed.num_warps) == 256
    assert before.spilled_bytes == 0 and after.registers == 255 and after.spilled_bytes > 0
    assert (before.shared_bytes, after.shared_bytes) == (3 * 32 * 1024, 3 * 48 * 1024)
    assert before.occupancy.by_shared == 2 and after.occupancy.by_shared == 1
    assert (round(tile_intensity(128, 128, element_bytes=2)),
            round(tile_intensity(128, 256, element_bytes=2))) == (64, 85)  # fmt: skip
    text = cell(predict_knob.EXERCISE.cells.solution)
    for said in ("128*256 / (32*4) = 256 accumulator values", "255 registers",
                 "= 32 KB to 48 KB", "= 85 FLOP per byte", "up from 64",
                 "two programs' shared memory fitted on an SM, one now does"):  # fmt: skip
        assert said in " ".join(text.replace("# ", "").split()), said
