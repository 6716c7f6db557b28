"""Diagnoses by cause (tmm_course.check.causes): each bank entry below has one fault, and the
check names its cause (the grid, a load's or a store's mask, the K stride, the term alpha
scales) before its symptoms. Each runs one bank entry, on small shapes; the pure functions are
also tried on plain data."""

from __future__ import annotations

import bug_bank
import pytest

from tmm_course.check import causes, verdict
from tmm_course.check.result import Case as Result


def checked(check: str, name: str):
    (entry,) = [e for e in bug_bank.BANK if e.check == check and e.name == name]
    (outcome,) = bug_bank.run([entry])
    return outcome.result


@pytest.mark.parametrize(
    ("check", "name", "code", "says"),
    [
        ("flip_rows", "grid rounded down", "unwritten", "triton.cdiv(M, BLOCK_M)"),
        ("vector_add", "grid n // BLOCK", "unwritten", "triton.cdiv(n, BLOCK)"),
        # a program per tile, not per block of cells: no cdiv to name, the exercise's sentence
        ("grouped_tile", "one program short", "unwritten", "(grid_m * grid_n,)"),
        ("outer_product", "grid axes swapped", "unwritten", "axes are swapped"),
        ("outer_product", "loads without masks", "out_of_bounds_read", "every store stayed"),
        ("flip_rows", "store masked, load not", "out_of_bounds_read", "the tl.load of x"),
        ("outer_product", "store without mask", "out_of_bounds_write", "the tl.store into out"),
        ("vector_add", "grid given as an int", "crashed", "(the comma makes it a tuple)"),
        ("vector_add", "grid of n programs", "too_many_programs", "touched no memory"),
        ("vector_add", "adds into leftover zeros", "uninitialised_buffer", "torch.zeros"),
        ("flip_rows", "x's strides paired the wrong way", "transposed", "x's strides are paired"),
        # sizes mixed up (every failure has M != N) before where a lane strayed
        ("transpose", "store mask with M and N swapped", "out_of_bounds_write", "only when M != N"),
        # a known mistake matched on the cells stored before a stray's mask sentence; the
        # cells it left unwritten are not the grid's (the stores did not land tile by tile)
        (
            "transpose",
            "out's pointers built from x's strides",
            "out_of_bounds_write",
            "out's row stride is wrong",
        ),
    ],
)
def test_the_cause_is_named_first(check, name, code, says):
    result = checked(check, name)
    assert not result.passed
    assert result.primary.code == code, str(result)
    assert says in result.primary.message, str(result)


def test_stores_through_another_tensors_strides_blame_neither_grid_nor_mask():
    result = checked("transpose", "out's pointers built from x's strides")
    assert result.codes == ["out_of_bounds_write"], str(result)
    assert "grid" not in str(result).split("\n  ok")[0], str(result)


def test_a_grid_too_small_explains_its_ragged_edge():
    result = checked("flip_rows", "grid rounded down")
    assert result.codes == ["unwritten"], str(result)


@pytest.mark.parametrize(
    ("check", "name", "code", "says"),
    [
        ("matmul", "pointers advanced without the stride", "wrong_values", "BLOCK_K * stride_bk"),
        ("matmul", "K mask drops the last partial slab", "ragged_edge", "switches off every lane"),
        ("matmul", "K loop of K // BLOCK_K trips", "ragged_edge", "K // BLOCK_K"),
        ("scaled_matmul", "alpha applied to beta * C", "wrong_values", "alpha scales the C term"),
        ("scaled_matmul", "alpha applied to both terms", "wrong_values", "alpha scales beta * C"),
        ("scaled_matmul", "beta applied to both terms", "wrong_values", "beta scales the product"),
        ("scaled_matmul", "C added without beta", "wrong_values", "C was added without beta"),
    ],
)
def test_a_k_loop_or_a_scale_names_its_line(check, name, code, says):
    result = checked(check, name)
    assert result.primary.code == code, str(result)
    assert says in result.primary.message, str(result)


def test_a_correct_kernel_with_a_grid_of_one_program_per_block_passes():
    assert checked("vector_add", "correct, one program of 4096").passed


# --- the pure functions, on plain data ----------------------------------------------------------
def ran(label: str, programs: int, idle: int) -> Result:
    """A case that passed, its grid of ``programs`` with ``idle`` of them touching nothing."""
    return Result(label, (), passed=True, programs=programs, idle=idle)


def test_a_fixed_grid_idle_on_small_problems_is_not_too_many_programs():
    """A persistent kernel: as many programs on every case, most idle on the small ones."""
    cases = [ran("n = 1", 132, 131), ran("n = 9", 132, 120)]
    verdict.too_many_programs(cases, "out")
    assert all(c.passed for c in cases)


def test_a_grid_that_grows_with_idle_programs_is_too_many():
    cases = [ran("n = 7", 7, 6), ran("n = 1000", 1000, 996)]
    verdict.too_many_programs(cases, "out")
    assert [c.code for c in cases] == [None, "too_many_programs"]
    assert "996 of the 1000 programs" in cases[1].problem


def test_a_stray_between_cells_names_no_mask():
    """A lane that fell between a view's cells is a stride's doing, not a mask's."""
    stray = causes.Stray("load", "x", (4, 4), None, 3)
    facts = causes.Seen("out", (4, 4), [], None, 0, (stray,))
    assert causes.stray(facts) is None


@pytest.mark.parametrize("secret", [False, True])
def test_a_map_packed_into_scalars_cannot_carry_the_biggest_case(secret):
    """The grouped order and lesson 1's owners depend on the shape alone: one case's answer
    needs more bits than sixty-four int64 arguments hold, so an answer computed on the host
    and handed over as scalars cannot pass (the replay runs the same shape); also on the
    sizes a grader draws."""
    from tmm_course.exercises import column_order_fill, grouped_tile, spec

    for seed in range(5):
        grids = grouped_tile.EXERCISE.draw(spec.generator(seed), "interpreter", secret)
        assert any(grouped_tile.beyond_scalars(*c.shape) for c in grids)
        fills = column_order_fill.EXERCISE.draw(spec.generator(seed), "interpreter", secret)
        assert any(column_order_fill.beyond_scalars(*c.shape) for c in fills)
    assert not spec.beyond_scalars(64, 2**63 - 1)  # sixty-four int64 arguments carry that


def test_loads_past_m_or_n_are_not_told_k():
    result = checked("matmul", "no M/N masks on the loads")
    assert result.primary.code == "out_of_bounds_read", str(result)
    assert "past K" not in result.primary.message, str(result)
