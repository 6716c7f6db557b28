"""Lessons 1 and 3's second exercises, written from a picture and from the address formula:
untouched, the check says so; a slip gets the sentence that names its cause."""

from __future__ import annotations

import pytest
from test_promises import edited, load, solution

from tmm_course import check
from tmm_course.exercises import column_order_fill, flip_rows

SLIPS = [
    ("01_tile_fill.ipynb", "fill_owners", check.check_column_order_fill,
     ("pid_m, pid_n = pid % grid_m, pid // grid_m",
      "pid_m, pid_n = pid // tl.cdiv(N, BLOCK_N), pid % tl.cdiv(N, BLOCK_N)"),
     column_order_fill.ROW_ORDER),
    ("03_strides.ipynb", "flip_rows", check.check_flip_rows,
     ("from_row = M - 1 - offs_m", "from_row = offs_m"), flip_rows.NOT_FLIPPED),
]  # fmt: skip


@pytest.mark.parametrize(("notebook", "name", "check_fn", "edit", "cause"), SLIPS,
                         ids=[s[1] for s in SLIPS])  # fmt: skip
def test_a_slip_in_the_solution_is_named_by_its_cause(notebook, name, check_fn, edit, cause,
                                                       tmp_path):  # fmt: skip
    source = edited(solution(notebook, name), *edit)
    module = load(source, tmp_path, f"slip_{name}")
    result = check_fn(getattr(module, name))
    assert result.primary.code == "wrong_values" and cause in result.primary.message, str(result)


@pytest.mark.parametrize("check_fn", [check.check_column_order_fill, check.check_flip_rows])
def test_an_untouched_exercise_is_not_implemented(check_fn):
    def untouched(*_):
        raise NotImplementedError

    assert check_fn(untouched).primary.code == "not_implemented"
