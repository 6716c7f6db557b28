"""The exercise checks: correct launchers pass, each planted bug gets its diagnosis code."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from bug_bank import owners

import tmm_course
from tmm_course.check import (
    check_column_order_fill,
    check_flip_rows,
    check_outer_product,
    check_vector_add,
)
from tmm_course.check.buffers import CANARY, guarded_output, padded_input
from tmm_course.check.result import MESSAGES
from tmm_course.exercises import column_order_fill
from tmm_course.kernels.strides import strided_copy_kernel


def off_by_one(out):
    owners()(out)
    out += 1.0


def todo(*args):
    raise NotImplementedError


def test_correct_fill_passes():
    result = check_column_order_fill(owners())
    assert result.passed and result.codes == []
    assert len(result.cases) == 8


def test_untouched_exercise_is_not_implemented():
    result = check_column_order_fill(todo)
    assert not result.passed and result.codes == ["not_implemented"]


def test_missing_mask_is_an_out_of_bounds_write_on_the_ragged_edge():
    result = check_column_order_fill(owners(mask=0))
    assert result.codes == ["out_of_bounds_write", "ragged_edge"]
    if tmm_course.BACKEND == "interpreter":  # where the strays went, from the record of stores
        assert "below the last row" in str(result) or "right of the last column" in str(result)


def test_a_lane_past_a_vectors_end_is_named_by_its_element():
    from tmm_course.check.engine import where

    assert where((0, 7), (7,)) == "element 7 (past the end)"
    assert where((0, -1), (7,)) == "element -1 (before the first)"
    assert where((33, 0), (33, 17)) == "row 33, column 0 (below the last row)"


def test_floor_grid_leaves_cells_unwritten_on_the_ragged_edge():
    result = check_column_order_fill(owners(floor=True))
    assert result.codes == ["unwritten"]  # the grid explains the ragged edge
    assert "triton.cdiv" in result.primary.message


def test_tiles_numbered_along_the_rows_get_the_pictures_order():
    result = check_column_order_fill(owners(row_order=True))
    assert result.primary.message == column_order_fill.ROW_ORDER


def test_off_by_one_values_are_wrong_values():
    assert check_column_order_fill(off_by_one).codes == ["wrong_values"]


def test_a_crash_is_reported_not_raised():
    def crash(out):
        raise ValueError("boom")

    result = check_column_order_fill(crash)
    assert result.codes == ["crashed"]
    assert "ValueError: boom" in result.cases[0].problem


@triton.jit
def outer(x_ptr, y_ptr, out_ptr, M, N, som, SWAP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    om = tl.program_id(0) * BM + tl.arange(0, BM)
    on = tl.program_id(1) * BN + tl.arange(0, BN)
    x = tl.load(x_ptr + om, mask=om < M, other=0.0)
    y = tl.load(y_ptr + on, mask=on < N, other=0.0)
    if SWAP:  # x along the columns, y along the rows: only square shapes line up
        x = tl.load(x_ptr + on, mask=on < N, other=0.0)
        y = tl.load(y_ptr + om, mask=om < M, other=0.0)
        tile = y[:, None] * x[None, :]
    else:
        tile = x[:, None] * y[None, :]
    mask = (om[:, None] < M) & (on[None, :] < N)
    ptrs = out_ptr + om[:, None] * som + on[None, :]  # out += the tile
    tl.store(ptrs, tile + tl.load(ptrs, mask=mask, other=0.0), mask=mask)


def outer_launcher(swap):
    def launch(x, y, out):
        m, n = out.shape
        outer[(triton.cdiv(m, 16), triton.cdiv(n, 16))](x, y, out, m, n, out.stride(0), SWAP=swap,
                                                          BM=16, BN=16)  # fmt: skip

    return launch


def test_correct_outer_product_passes():
    assert check_outer_product(outer_launcher(False)).passed


def test_a_float32_outer_product_is_within_the_bound_where_a_cells_terms_cancel():
    from tmm_course.exercises import outer_product
    from tmm_course.exercises.spec import generator

    for seed in range(2000):  # about 1 in 200 draws of the 1x1 case cancels to under 1%
        case = outer_product.case(1, 1, tmm_course.BACKEND, generator(seed))
        (x, y), before = case.inputs, case.initial
        got = (before + x[:, None] * y[None, :]).double()  # in float32, as a kernel adds
        assert float((got - case.expected).abs().max()) <= case.atol, seed


def test_swapped_broadcast_axes_are_transposed():
    result = check_outer_product(outer_launcher(True))
    assert not result.passed and "transposed" in result.codes


def flip_launcher(assume_contiguous_input=False):
    """Lesson 3's copy kernel reading x from its last row up: a view starting there, walked
    with the row stride negated (a correct flip written without a kernel of its own)."""

    def launch(x, out):
        m, n = x.shape
        sx = (n, 1) if assume_contiguous_input else x.stride()
        strided_copy_kernel[(triton.cdiv(m, 16), triton.cdiv(n, 16))](
            x[m - 1 :], out, m, n, -sx[0], sx[1], *out.stride(), BLOCK_M=16, BLOCK_N=16
        )

    return launch


def test_the_copy_walking_x_upwards_flips_it():
    result = check_flip_rows(flip_launcher(), allow_course_kernels=True)
    assert result.passed, str(result)


def test_a_flip_that_assumes_contiguous_input_ignores_strides():
    result = check_flip_rows(flip_launcher(assume_contiguous_input=True), allow_course_kernels=True)
    assert result.primary.code == "ignores_strides"
    assert "wrong when x is not contiguous" in result.primary.message


def test_every_code_has_a_sentence():
    for code, sentence in MESSAGES.items():
        assert sentence.endswith(".") and len(sentence) > 40, code


def test_result_renders_for_jupyter_and_text():
    result = check_column_order_fill(todo)
    assert "FAIL" in result._repr_html_() and "not_implemented" in result._repr_html_()
    assert str(result).startswith("column_order_fill: FAIL (0 of 8 cases passed)")


def test_guarded_output_is_poisoned_and_surrounded_by_canaries():
    guard = guarded_output((3, 4), torch.float32, row_gap=2)
    assert guard.out.isnan().all() and guard.out.stride() == (6, 1)
    assert guard.canaries_intact()
    guard.buffer[~guard.region][0] = 0.0  # indexing copies: canaries stay
    assert guard.canaries_intact()
    flat = guard.buffer
    flat[int(guard.region.nonzero()[0]) - 1] = 0.0  # one element before the output
    assert not guard.canaries_intact()
    assert (flat[guard.region].isnan()).all() and (flat == CANARY).sum() > 0


def test_padded_input_keeps_values_and_strides(device):
    x = torch.randn(6, 8, device=device)[::2, 1::3]
    padded = padded_input(x)
    assert torch.equal(padded, x) and padded.stride() == x.stride()
    assert padded.storage_offset() > 0


def test_a_wild_read_on_the_interpreter_is_stopped_not_crashed():
    import tmm_course

    if tmm_course.BACKEND != "interpreter":
        import pytest

        pytest.skip("the memory guard is for the interpreter")

    def wild(x, out):
        m, n = x.shape
        # row stride a million elements: every row past the first reads far outside x
        strided_copy_kernel[(triton.cdiv(m, 16), triton.cdiv(n, 16))](
            x, out, m, n, 1_000_000, 1, *out.stride(), BLOCK_M=16, BLOCK_N=16
        )

    result = check_flip_rows(wild, allow_course_kernels=True)
    assert "out_of_bounds_read" in result.codes
    assert any("outside every tensor" in c.problem for c in result.cases)


def test_a_lost_gpu_context_stops_the_check_and_says_how_to_recover():
    def faulting(out):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    result = check_column_order_fill(faulting)
    assert result.codes == ["crashed"]
    assert "restart the kernel" in result.cases[0].problem
    assert all(c.problem == "not run: the GPU context was lost" for c in result.cases[1:])


@triton.jit
def add_with_runtime_block(x_ptr, y_ptr, out_ptr, n, BLOCK):  # BLOCK is not tl.constexpr
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


def test_a_runtime_block_size_is_what_a_gpu_refuses():
    def launch(x, y, out):
        add_with_runtime_block[(triton.cdiv(x.numel(), 16),)](x, y, out, x.numel(), 16)

    result = check_vector_add(launch)
    assert result.primary.code == "gpu_would_reject", str(result)
    assert "tl.constexpr" in result.cases[0].problem
