"""What the checks say about the GPU compiler, about who did the work, about kernels that never
finish, and about the causes that used to be misnamed (issue 25)."""

from __future__ import annotations

import _thread
import os
import threading

import bug_bank
import pytest
import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course.check import check_matmul, check_scaled_matmul, check_transpose, time_limit
from tmm_course.check import gpu_rules as rules

INTERPRETER = tmm_course.BACKEND == "interpreter"


# --- the compiler's verdict ------------------------------------------------------------------
# (8, 8, 16) is the bank's "correct, 8x8x16": tests/test_bug_bank.py reads that run
@pytest.mark.parametrize("block", [(8, 64, 16), (64, 8, 16)])
def test_small_m_and_n_tiles_pass(block):
    result = check_matmul(bug_bank.mm(block=block))
    assert result.passed, str(result)
    units = {row["gpu"]: row["matrix_unit"] for row in result.compiled}
    assert units["A100 (sm_80)"] == "mma" and units["T4 (sm_75)"] == "fma"


def test_each_specialization_compiles_once_and_the_html_shows_it(monkeypatch):
    calls = []
    original = rules.compile_everywhere

    def counting(kernel, spec, **options):
        calls.append(spec)
        return original(kernel, spec, **options)

    monkeypatch.setattr(rules, "compile_everywhere", counting)
    result = check_matmul(bug_bank.mm())
    assert result.passed
    assert len(calls) == 2  # float16 (every shape, 1x1x1 too) and float32
    page = result._repr_html_()
    assert "What your kernel compiles to on each GPU" in page
    assert "mma.sync" in page and "H100/H200 (sm_90)" in page
    assert result.as_dict()["compiled"] == result.compiled


def test_shared_memory_past_the_gpus_limit_is_a_refusal():
    from tmm_course.compile_ahead import Compiled

    fits = rules.fits(Compiled("sm_75", True, shared_bytes=80 * 1024, registers=64))
    assert not fits.ok and "Hardware limit: 65536" in fits.error


def test_a_refusal_by_several_gpus_quotes_each_gpu_s_own_limit():
    from tmm_course.compile_ahead import Compiled

    compiled = {gpu: rules.fits(Compiled(gpu, True, shared_bytes=200 * 1024, registers=64))
                for gpu in ("sm_75", "sm_80", "sm_90")}  # fmt: skip
    said = rules.KernelReport("k", "float16", compiled).refusal()
    assert said is not None and "sm_90" not in said  # the H100/H200 holds 200 KB
    for gpu, limit in (("sm_75", 65536), ("sm_80", 166912)):
        name = compiled[gpu].gpu_name
        assert (
            f"for {name}: out of resource: shared memory, Required: 204800, Hardware limit: {limit}"
            in said
        )


# --- who did the work, and the causes once misnamed: the bank's entries, asserted in
# tests/test_bug_bank.py on the bank's own run of each (the compiler's refusals too)


# --- every check finishes ---------------------------------------------------------------------
@pytest.mark.skipif(not time_limit.can_limit(), reason="no timer signal here")
def test_a_loop_that_never_ends_times_out_within_the_limit(monkeypatch):
    import time

    monkeypatch.setattr(time_limit, "PROGRAM_SECONDS", 2.0)
    start = time.monotonic()
    result = check_matmul(bug_bank.looped("while"))
    took = time.monotonic() - start
    assert result.primary.code == "timed_out", str(result)
    assert "loop" in result.primary.message
    assert all(c.problem.startswith("not run") for c in result.cases[1:])
    assert took < 30  # one case stopped after 2 s, the rest not run, plus compiling


@pytest.mark.skipif(not INTERPRETER, reason="an interpreted kernel is Python to interrupt")
def test_an_interrupt_leaves_no_traceback_from_inside_triton():
    import signal

    # Ctrl-C raises KeyboardInterrupt, as in a notebook (a library that ran before in this
    # process may have left SIGINT ignored, and then interrupt_main does nothing)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    looping, timer = bug_bank.looped("while"), threading.Timer(0.5, _thread.interrupt_main)

    def launch(a, b, c):  # pressed once the kernel runs, however long the check took to get there
        if timer.ident is None:
            timer.start()
        looping(a, b, c)

    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            check_matmul(launch)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    package = os.path.dirname(triton.__file__)
    assert caught.value.__suppress_context__
    assert not any(str(entry.path).startswith(package) for entry in caught.traceback)


@triton.jit
def _block_pointer_copy(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    block = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    tile = tl.load(block, boundary_check=(0, 1))
    offs_m, offs_n = tl.arange(0, BM), tl.arange(0, BN)
    tl.store(out_ptr + offs_n[None, :] * M + offs_m[:, None], tile)


@pytest.mark.skipif(
    tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 9),
    reason="block pointers are removed in Triton 3.9",
)
def test_tritons_own_not_implemented_error_is_not_the_learners():
    def launch(x, out):
        _block_pointer_copy[(1,)](x, out, *x.shape, BM=64, BN=64)

    result = check_transpose(launch, strided=False, ragged=False)
    assert result.primary.code != "not_implemented", str(result)
    assert "Block pointers have been removed" in str(result)


def test_unwritten_is_judged_from_stored_cells_not_from_equal_values():
    # seed 0 is the bank's "correct" scaled_matmul entry (tests/test_bug_bank.py)
    for seed in range(1, 2):
        torch.manual_seed(seed)
        assert check_scaled_matmul(bug_bank.scaled()).passed


# --- causes read off the stores (fresh bugs of a learner review) -----------------------------
def test_offsets_from_one_program_id_for_rows_and_columns_are_named():
    """``offs_n`` built from ``program_id(0)``: the programs (i, j) all store tile (i, i)."""
    from tmm_course.check.causes import Seen, first

    boxes = {(i, j, 0): (32 * i, 32 * i + 31, 32 * i, 32 * i + 31) for i in (0, 1) for j in (0, 1)}
    seen = Seen("c", (64, 64), [((2, 2, 1), boxes)], None, 2048)
    cause = first(seen, "unwritten")
    assert cause is not None and cause.code == "unwritten"
    assert "program_id(0) places both the rows and the columns" in cause.sentence
    assert "Build the column offsets from program_id(1)" in cause.sentence
    tiled = {(i, j, 0): (32 * i, 32 * i + 31, 32 * j, 32 * j + 31) for i in (0, 1) for j in (0, 1)}
    assert first(Seen("c", (64, 64), [((2, 2, 1), tiled)], None, 1), "unwritten") is None


def test_a_grid_whose_programs_stored_nothing_is_not_called_too_small():
    """A transpose whose store mask tests offs_n < M: on a 3 x 70 input only the first of the
    grid's three programs stores (3 rows of out's 70). The grid is whole; "too small" would
    send the learner to a cdiv that is already there."""
    from tmm_course.check.causes import Seen, first

    stored_rows = Seen("out", (70, 3), [((1, 3, 1), {(0, 0, 0): (0, 2, 0, 2)})], (3, 3), 201)
    assert first(stored_rows, "unwritten") is None
    floor = {(0, 0, 0): (0, 31, 0, 2)}  # a grid of 70 // 32 programs: each stores a whole tile
    floor |= {(0, 1, 0): (32, 63, 0, 2)}
    cause = first(Seen("out", (70, 3), [((1, 2, 1), floor)], (64, 3), 18), "unwritten")
    assert cause is not None and "the grid is too small" in cause.sentence


def test_a_stored_cell_that_kept_its_old_value_by_chance_is_not_unwritten():
    """C = alpha * A @ B + beta * C: a wrong cell may equal C's old value by chance. Where the
    memory guard saw every cell stored, that is a wrong value, never a cell left unwritten."""
    from tmm_course.check.verdict import Stored, judge_stored
    from tmm_course.exercises import BY_NAME
    from tmm_course.exercises.spec import Case, Output

    before = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    got = before + 100.0
    got[0, 0] = before[0, 0]  # wrong, and equal to what it held
    case = Case("4x4x4", (4, 4, 4), (), Output((4, 4), torch.float32),
                expected=(before + 1.0).double(), atol=1e-3, initial=before)  # fmt: skip
    exercise = BY_NAME["scaled_matmul"]
    found = judge_stored(exercise, case, Stored(got, before, unstored=0))
    assert found.code is None and found.problem.startswith("16 of 16 cells wrong"), found
    assert judge_stored(exercise, case, Stored(got, before)).code == "unwritten"  # no trace


@triton.jit
def _flip_in_tiles(x_ptr, out_ptr, M, N, sxm, sxn, som, son,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    from_row = tl.program_id(0) * BLOCK_M + (BLOCK_M - 1 - tl.arange(0, BLOCK_M))  # the slip
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N) & (from_row[:, None] < M)
    x = tl.load(x_ptr + from_row[:, None] * sxm + offs_n[None, :] * sxn, mask=mask, other=0.0)
    tl.store(out_ptr + offs_m[:, None] * som + offs_n[None, :] * son, x,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))  # fmt: skip


def test_rows_flipped_inside_each_tile_are_named_with_the_tile_height():
    from tmm_course.check import check_flip_rows

    def flip_rows(x, out):
        (m, n), block = x.shape, 16
        _flip_in_tiles[(triton.cdiv(m, block), triton.cdiv(n, block))](
            x, out, m, n, *x.stride(), *out.stride(), BLOCK_M=block, BLOCK_N=block)  # fmt: skip

    result = check_flip_rows(flip_rows)
    assert result.primary.code == "wrong_values", str(result)
    assert "upside down inside each tile of 16 rows" in result.primary.message


def test_alpha_applied_at_every_k_step_is_named():
    result = check_scaled_matmul(bug_bank.scaled(alpha_every_step=True))
    assert result.primary.code == "wrong_values", str(result)
    assert "multiplied by alpha at every step of the K loop" in result.primary.message


def test_an_output_addressed_with_an_inputs_strides_is_named_once():
    """C's pointers built from A's strides: right exactly where A and C share their strides
    (square, contiguous), lanes outside C elsewhere. One cause, not four symptoms."""
    result = check_scaled_matmul(bug_bank.scaled(c_like_a=True))
    assert result.codes == ["ignores_strides"], str(result)
    assert "c's addresses are built from a's strides" in result.primary.message
