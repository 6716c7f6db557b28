"""check_matmul: a correct launcher passes; each classic matmul bug gets its diagnosis."""

from __future__ import annotations

import triton
import triton.language as tl

from tmm_course.check import check_matmul


@triton.jit
def buggy_matmul(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    FP16_ACC: tl.constexpr,
    K_MASK: tl.constexpr,
    SWAP_A: tl.constexpr,
    STORE_MASK: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    om = tl.program_id(0) * BM + tl.arange(0, BM)
    on = tl.program_id(1) * BN + tl.arange(0, BN)
    ok = tl.arange(0, BK)
    if SWAP_A:
        a_ptrs = a_ptr + om[:, None] * sak + ok[None, :] * sam
    else:
        a_ptrs = a_ptr + om[:, None] * sam + ok[None, :] * sak
    b_ptrs = b_ptr + ok[:, None] * sbk + on[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float16 if FP16_ACC else tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_ok = ok < K - k * BK if K_MASK else ok < BK
        a = tl.load(a_ptrs, mask=(om[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & (on[None, :] < N), other=0.0)
        if FP16_ACC:
            acc += tl.dot(a, b, out_dtype=tl.float16)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BK * (sam if SWAP_A else sak)
        b_ptrs += BK * sbk
    c_ptrs = c_ptr + om[:, None] * scm + on[None, :] * scn
    if STORE_MASK:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(om[:, None] < M) & (on[None, :] < N))
    else:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(om[:, None] < M + BM))


def launcher(
    fp16_acc=False, k_mask=True, swap_a=False, store_mask=True, contiguous=False, floor_grid=False
):
    def launch(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        grid = (
            (max(1, m // 32), max(1, n // 32))
            if floor_grid
            else (triton.cdiv(m, 32), triton.cdiv(n, 32))
        )
        strides = (k, 1, n, 1, n, 1) if contiguous else (*a.stride(), *b.stride(), *c.stride())
        buggy_matmul[grid](
            a,
            b,
            c,
            m,
            n,
            k,
            *strides,
            FP16_ACC=fp16_acc,
            K_MASK=k_mask,
            SWAP_A=swap_a,
            STORE_MASK=store_mask,
            BM=32,
            BN=32,
            BK=32,
        )

    return launch


def test_correct_launcher_passes():
    result = check_matmul(launcher())
    assert result.passed, str(result)


def test_untouched_exercise_is_not_implemented():
    def todo(a, b, c):
        raise NotImplementedError

    assert check_matmul(todo).codes == ["not_implemented"]


def test_float16_accumulator_is_precision():
    result = check_matmul(launcher(fp16_acc=True))
    assert "precision" in result.codes
    # a GPU refuses a float16-output dot of float32 inputs; the interpreter runs it
    crashed = [c.label for c in result.cases if c.code == "crashed"]
    assert all(label.endswith("float32") for label in crashed)
    assert set(result.codes) <= {"precision", "crashed"}


def test_swapped_a_strides_compute_a_transposed():
    assert "transposed" in check_matmul(launcher(swap_a=True)).codes


def test_missing_k_mask_breaks_only_ragged_k():
    result = check_matmul(launcher(k_mask=False))
    assert result.codes == ["ragged_edge"]
    assert {c.label.split(",")[0] for c in result.cases if not c.passed} >= {"64x64x65 ragged K"}


def test_contiguous_only_launcher_ignores_strides():
    result = check_matmul(launcher(contiguous=True))
    assert "ignores_strides" in result.codes or "out_of_bounds_write" in result.codes
    assert all(c.passed for c in result.cases if not c.strided and c.code != "skipped")


def test_missing_store_mask_writes_out_of_bounds():
    assert "out_of_bounds_write" in check_matmul(launcher(store_mask=False)).codes


def test_floor_grid_leaves_cells_unwritten():
    assert "unwritten" in check_matmul(launcher(floor_grid=True)).codes
