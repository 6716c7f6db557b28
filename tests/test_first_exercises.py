"""Lessons 1 and 3's exercises, written from a picture and from the address formula:
untouched, the check says so; a slip gets the sentence that names its cause."""

from __future__ import annotations

import pytest
from test_promises import edited, load, solution

from tmm_course import check
from tmm_course.exercises import column_order_fill, flip_rows
from tmm_course.kernels import strides, tile_fill
from tmm_course.source import source_of

SLIPS = [
    ("01_tile_fill.ipynb", "fill_owners", check.check_column_order_fill,
     ("pid_m, pid_n = pid % grid_m, pid // grid_m",
      "pid_m, pid_n = pid // tl.cdiv(N, BLOCK_N), pid % tl.cdiv(N, BLOCK_N)"),
     "wrong_values", column_order_fill.ROW_ORDER),
    ("01_tile_fill.ipynb", "fill_owners", check.check_column_order_fill,  # 2-D thinking
     ("pid_m, pid_n = pid % grid_m, pid // grid_m", "pid_m, pid_n = pid, tl.program_id(axis=1)"),
     "unwritten", column_order_fill.UNSTORED),
    ("03_strides.ipynb", "flip_rows", check.check_flip_rows,
     ("from_row = M - 1 - offs_m", "from_row = offs_m"), "wrong_values", flip_rows.NOT_FLIPPED),
    ("03_strides.ipynb", "flip_rows", check.check_flip_rows,  # one past the last row
     ("from_row = M - 1 - offs_m", "from_row = M - offs_m"), "out_of_bounds_read",
     "an index runs past the edge"),
]  # fmt: skip


SLIP_IDS = ["row order", "program_id(1)", "not flipped", "M - offs_m"]


@pytest.mark.parametrize(("notebook", "name", "check_fn", "edit", "code", "cause"), SLIPS,
                         ids=SLIP_IDS)  # fmt: skip
def test_a_slip_in_the_solution_is_named_by_its_cause(notebook, name, check_fn, edit, code, cause,
                                                       tmp_path):  # fmt: skip
    source = edited(solution(notebook, name), *edit)
    module = load(source, tmp_path, f"slip_{name}_{abs(hash(edit)) % 10**8}")
    result = check_fn(getattr(module, name))
    assert result.primary.code == code and cause in result.primary.message, str(result)


@pytest.mark.parametrize("check_fn", [check.check_column_order_fill, check.check_flip_rows])
def test_an_untouched_exercise_is_not_implemented(check_fn):
    def untouched(*_):
        raise NotImplementedError

    assert check_fn(untouched).primary.code == "not_implemented"


# (the check, the kernel the page prints, the launcher a learner wraps a copy of it in, cause)
COPIES = [
    (check.check_column_order_fill, tile_fill.fill_owner_kernel,
     "def launch(out):\n    M, N = out.shape\n"
     "    my_kernel[(triton.cdiv(M, 8), triton.cdiv(N, 4))](out, M, N, BLOCK_M=8, BLOCK_N=4)\n",
     column_order_fill.ROW_ORDER),
    (check.check_flip_rows, strides.strided_copy_kernel,
     "def launch(x, out):\n    M, N = x.shape\n"
     "    grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))\n"
     "    my_kernel[grid](x, out, M, N, *x.stride(), *out.stride(), BLOCK_M=16, BLOCK_N=16)\n",
     flip_rows.NOT_FLIPPED),
]  # fmt: skip


@pytest.mark.parametrize(("check_fn", "kernel", "launcher", "cause"), COPIES,
                         ids=["owners", "flip"])  # fmt: skip
def test_the_pages_kernel_copied_unchanged_is_told_what_to_change(check_fn, kernel, launcher,
                                                                   cause, tmp_path):  # fmt: skip
    """The kernel the page prints is the exercise's starting point: a copy of it is judged by
    what it stores (the sentence naming what to change), not called the course's kernel."""
    copied = source_of(kernel).replace(f"def {kernel.fn.__name__}(", "def my_kernel(")
    module = load(copied + "\n\n" + launcher, tmp_path, f"copy_{kernel.fn.__name__}")
    result = check_fn(module.launch)
    assert result.primary.code == "wrong_values" and cause in result.primary.message, str(result)
