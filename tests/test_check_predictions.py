"""Lesson 6's graded predictions: any real number is taken, numpy's too; a wrong one gets a
hint and the name of a unit slip, never the answer or the whole calculation."""

from __future__ import annotations

import numpy as np
import pytest

from tmm_course.check import check_predictions
from tmm_course.check.predictions import LESSON_8

RIGHT = {name: q.answer() for name, q in LESSON_8.items()}


def test_numpy_scalars_and_plain_numbers_are_taken():
    as_numpy = {
        "shared_kb": np.float64(RIGHT["shared_kb"]),
        "intensity": np.int64(round(RIGHT["intensity"])),
        "fits_with_4_stages": np.bool_(RIGHT["fits_with_4_stages"]),
    }
    assert check_predictions(as_numpy).passed
    assert check_predictions({**RIGHT, "shared_kb": int(RIGHT["shared_kb"])}).passed


@pytest.mark.parametrize(("factor", "slip"), [(1024, "in bytes"), (1.024, "divided by 1000")])
def test_unit_slips_are_named_and_the_answer_is_never_given(factor, slip):
    result = check_predictions({**RIGHT, "shared_kb": RIGHT["shared_kb"] * factor})
    assert not result.passed
    text = str(result) + result._repr_html_()
    assert slip in result.primary.message
    assert f"{RIGHT['shared_kb']:g}" not in text.replace(f"{RIGHT['shared_kb'] * factor:g}", "")
    assert "128*64" not in text and "128 * 64" not in text  # no worked calculation


def test_a_wrong_number_gets_a_hint_not_the_formula_filled_in():
    result = check_predictions({**RIGHT, "intensity": 3.0})
    assert "too low" in result.primary.message
    assert str(round(RIGHT["intensity"])) not in result.primary.message


def test_the_wrong_type_says_what_was_wanted():
    result = check_predictions({**RIGHT, "intensity": "64", "fits_with_4_stages": 1})
    problems = {c.label.split(":")[0]: c.problem for c in result.cases}
    assert "expected a number" in problems["intensity"] and "str" in problems["intensity"]
    assert "expected True or False" in problems["fits_with_4_stages"]


def test_a_tuple_is_a_clear_error():
    with pytest.raises(TypeError, match="takes a dict"):
        check_predictions(("shared_kb", 144))
