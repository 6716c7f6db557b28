"""Lesson 8's graded predictions about the capstone's plan: checked against the plan and the
grid the stored H200 run raced; a wrong one gets a hint and the name of a slip, never the
answer."""

from __future__ import annotations

import numpy as np
import pytest

from tmm_course.check import check_predictions
from tmm_course.exercises.predictions import LESSON_8, planned
from tmm_course.perf import results

RIGHT = {name: q.answer() for name, q in LESSON_8.items()}


def test_the_answers_come_from_the_stored_plan_and_grid():
    grid = results.grid("grid_h200.json")
    row = next(r for r in grid.rows if r.label == "1536^3 float16")
    path, (bm, bn, _) = planned("1536^3 float16")
    assert row.plan.startswith(f"{path} kernel, {bm}x{bn}x")
    assert RIGHT["waves"] == pytest.approx(-(-1536 // bm) * -(-1536 // bn) / 132)
    families = grid.families()
    assert all(families[RIGHT["loses_most"]][1] <= v[1] for v in families.values())


def test_numpy_scalars_and_other_spellings_are_taken():
    assert check_predictions({**RIGHT, "waves": np.float64(round(RIGHT["waves"], 2))}).passed
    assert check_predictions({**RIGHT, "path": f" {RIGHT['path'].upper()} "}).passed


def test_slips_are_named_and_the_answer_is_never_given():
    result = check_predictions({**RIGHT, "waves": RIGHT["waves"] * 2})
    assert not result.passed and "half the size" in result.primary.message
    assert f"{RIGHT['waves']:.2f}" not in str(result)
    other = "persistent_tma" if RIGHT["path"] == "grouped" else "grouped"
    wrong_path = check_predictions({**RIGHT, "path": other})
    assert not wrong_path.passed and repr(RIGHT["path"]) not in wrong_path.primary.message


def test_the_wrong_type_or_a_name_outside_the_choices_says_what_was_wanted():
    result = check_predictions({**RIGHT, "waves": "2", "loses_most": "big ones"})
    problems = {c.label.split(":")[0]: c.problem for c in result.cases}
    assert "expected a number" in problems["waves"] and "str" in problems["waves"]
    assert "none of" in problems["loses_most"]
    assert check_predictions(dict.fromkeys(LESSON_8)).codes == ["not_implemented"]


def test_a_tuple_is_a_clear_error():
    with pytest.raises(TypeError, match=r"must be a dict.*list or tuple"):
        check_predictions(("path", "grouped"))
