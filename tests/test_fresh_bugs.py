"""The checks judged on learner-style kernels written apart from the bug bank, after the checks
were built (nothing here was tuned against): every bug fails, every correct alternative passes,
and most get the diagnosis a teacher would give first.

    python tests/test_fresh_bugs.py     # the table, on this machine's backend
"""

from __future__ import annotations

import tmm_course  # first: it chooses the backend before any kernel below is decorated

# isort: split
import torch
import triton
import triton.language as tl

from tmm_course.check import (
    check_column_order_fill,
    check_flip_rows,
    check_matmul,
    check_outer_product,
    check_scaled_matmul,
    check_transpose,
    check_vector_add,
)

BLOCK = 32


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SLIP: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        here = k * BK + ks
        in_k = here <= K if SLIP == "le" else here < K  # "le": <= where < belongs
        # "rows_vs_n": A's rows masked with N
        a_rows = rows[:, None] < N if SLIP == "rows_vs_n" else rows[:, None] < M
        a = tl.load(a_ptr + rows[:, None] * sam + here[None, :] * sak,
                    mask=a_rows & in_k[None, :], other=0.0)  # fmt: skip
        b = tl.load(b_ptr + here[:, None] * sbk + cols[None, :] * sbn,
                    mask=in_k[:, None] & (cols[None, :] < N), other=0.0)  # fmt: skip
        if SLIP == "reset":  # the accumulator re-made inside the loop
            acc = tl.zeros((BM, BN), dtype=tl.float32)
        if SLIP == "plus_equals":  # a correct alternative
            acc += tl.dot(a, b)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * scm + cols[None, :] * scn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))  # fmt: skip


def matmul(slip: str = "", swap_grid: bool = False, via_clone: bool = False, block: int = BLOCK):
    def launch(a, b, c):
        (m, k), n = a.shape, b.shape[1]
        grid = (triton.cdiv(m, block), triton.cdiv(n, block))
        target = c.clone() if via_clone else c
        _matmul[grid[::-1] if swap_grid else grid](
            a, b, target, m, n, k, *a.stride(), *b.stride(), *target.stride(),
            BM=block, BN=block, BK=block, SLIP=slip,
        )  # fmt: skip
        if via_clone:
            c.copy_(target)

    return launch


@triton.jit
def _scaled(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, alpha, beta,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            MASK_C: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        here = k * BK + ks
        a = tl.load(a_ptr + rows[:, None] * sam + here[None, :] * sak,
                    mask=(rows[:, None] < M) & (here[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(b_ptr + here[:, None] * sbk + cols[None, :] * sbn,
                    mask=(here[:, None] < K) & (cols[None, :] < N), other=0.0)  # fmt: skip
        acc = tl.dot(a, b, acc)
    c_ptrs = c_ptr + rows[:, None] * scm + cols[None, :] * scn
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    out = alpha * acc
    if beta != 0:
        if MASK_C:
            out += beta * tl.load(c_ptrs, mask=inside, other=0.0).to(tl.float32)
        else:
            out += beta * tl.load(c_ptrs).to(tl.float32)
    tl.store(c_ptrs, out, mask=inside)


def scaled(mask_c: bool = True):
    def launch(a, b, c, alpha, beta):
        (m, k), n = a.shape, b.shape[1]
        _scaled[(triton.cdiv(m, BLOCK), triton.cdiv(n, BLOCK))](
            a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), alpha, beta,
            BM=BLOCK, BN=BLOCK, BK=BLOCK, MASK_C=mask_c,
        )  # fmt: skip

    return launch


@triton.jit
def _outer(x_ptr, y_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, Y_BY_ROW: tl.constexpr):
    i = tl.program_id(0) * BM + tl.arange(0, BM)
    j = tl.program_id(1) * BN + tl.arange(0, BN)
    x = tl.load(x_ptr + i, mask=i < M, other=0.0)
    if Y_BY_ROW:  # y read at the row index
        y = tl.load(y_ptr + i, mask=i < N, other=0.0)
        tile = x[:, None] * y[:, None] + tl.zeros((BM, BN), dtype=tl.float32)
    else:
        y = tl.load(y_ptr + j, mask=j < N, other=0.0)
        tile = x[:, None] * y[None, :]
    tl.store(out_ptr + i[:, None] * N + j[None, :], tile, mask=(i[:, None] < M) & (j[None, :] < N))


def outer(y_by_row: bool = False):
    def launch(x, y, out):
        m, n = out.shape
        _outer[(triton.cdiv(m, 16), triton.cdiv(n, 16))](x, y, out, m, n, BM=16, BN=16,
                                                        Y_BY_ROW=y_by_row)  # fmt: skip

    return launch


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, SUBTRACT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x - y if SUBTRACT else x + y, mask=offs < n)


def add(subtract: bool = False):
    def launch(x, y, out):
        _add[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128, SUBTRACT=subtract)

    return launch


@triton.jit
def _owners(out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, DOWN: tl.constexpr):
    i = tl.program_id(0) * BM + tl.arange(0, BM)
    j = tl.program_id(1) * BN + tl.arange(0, BN)
    if DOWN:  # a 2-D grid numbered down the columns: a correct alternative to the 1-D grid
        number = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    else:
        number = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    tl.store(out_ptr + i[:, None] * N + j[None, :], tl.zeros((BM, BN), tl.float32) + number,
             mask=(i[:, None] < M) & (j[None, :] < N))  # fmt: skip


def owners(down: bool):
    def launch(out):
        m, n = out.shape
        _owners[(triton.cdiv(m, 8), triton.cdiv(n, 4))](out, m, n, BM=8, BN=4, DOWN=down)

    return launch


@triton.jit
def _copy(x_ptr, out_ptr, M, N, sxm, sxn, som, son, BM: tl.constexpr, BN: tl.constexpr,
          TRANS: tl.constexpr):  # fmt: skip
    i = tl.program_id(0) * BM + tl.arange(0, BM)
    j = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (i[:, None] < M) & (j[None, :] < N)
    tile = tl.load(x_ptr + i[:, None] * sxm + j[None, :] * sxn, mask=mask)
    if TRANS:  # transposed in registers, stored as out's own rows: a correct alternative
        tl.store(out_ptr + j[:, None] * som + i[None, :] * son, tl.trans(tile), mask=tl.trans(mask))
    else:
        tl.store(out_ptr + i[:, None] * som + j[None, :] * son, tile, mask=mask)


def flip(out_strides_from_x: bool = False):
    """x read from its last row up (a view starting there, the row stride negated)."""

    def launch(x, out):
        m, n = x.shape
        so = x.stride() if out_strides_from_x else out.stride()
        _copy[(triton.cdiv(m, 16), triton.cdiv(n, 16))](x[m - 1 :], out, m, n, -x.stride(0),
                                                       x.stride(1), *so, BM=16, BN=16,
                                                       TRANS=False)  # fmt: skip

    return launch


def transpose_with_trans(x, out):
    m, n = x.shape
    _copy[(triton.cdiv(m, 16), triton.cdiv(n, 16))](x, out, m, n, *x.stride(), *out.stride(),
                                                   BM=16, BN=16, TRANS=True)  # fmt: skip


PASS = "pass"
FRESH = [
    # (check, name, launcher, what a teacher would say first)
    (check_matmul, "mask uses <= on K", matmul("le"), "out_of_bounds_read"),
    (check_matmul, "A's rows masked with N", matmul("rows_vs_n"), "out_of_bounds_read"),
    (check_matmul, "accumulator re-made inside the loop", matmul("reset"), "wrong_values"),
    (check_matmul, "grid axes swapped", matmul(swap_grid=True), "unwritten"),
    (check_matmul, "kernel into a clone, copied back", matmul(via_clone=True), "no_triton_kernel"),
    (check_scaled_matmul, "C loaded without a mask", scaled(mask_c=False), "out_of_bounds_read"),
    (check_outer_product, "y read at the row index", outer(y_by_row=True), "wrong_values"),
    (check_vector_add, "x - y", add(subtract=True), "wrong_values"),
    (check_column_order_fill, "2-D grid numbered along the rows", owners(False), "wrong_values"),
    (check_flip_rows, "out's strides taken from x", flip(True), "ignores_strides"),
    (check_matmul, "correct, acc += tl.dot", matmul("plus_equals"), PASS),
    (check_matmul, "correct, 16x16x16 blocks", matmul(block=16), PASS),
    (check_scaled_matmul, "correct", scaled(), PASS),
    (check_transpose, "correct, tl.trans of the tile", transpose_with_trans, PASS),
    (check_vector_add, "correct", add(), PASS),
    (check_column_order_fill, "correct, a 2-D grid numbered down", owners(True), PASS),
    (check_flip_rows, "correct, x walked upwards", flip(), PASS),
]


def run() -> list[tuple[str, str, str, bool]]:
    """(name, intended, primary, passed) for each fresh launcher."""
    rows = []
    for check, name, launcher, intended in FRESH:
        torch.manual_seed(1)
        result = check(launcher)
        primary = PASS if result.passed else (result.codes[0] if result.codes else "?")
        rows.append((name, intended, primary, result.passed))
    return rows


def test_fresh_bugs_fail_and_fresh_alternatives_pass():
    rows = run()
    for name, intended, primary, _ in rows:
        print(f"{name:40} intended {intended:18} primary {primary}")
    bugs = [r for r in rows if r[1] != PASS]
    assert len(bugs) >= 10
    assert [r[0] for r in rows if r[1] == PASS and not r[3]] == []  # no false alarm
    assert [r[0] for r in bugs if r[3]] == []  # no bug passes
    right = sum(r[1] == r[2] for r in bugs)
    assert right >= 0.8 * len(bugs), rows


if __name__ == "__main__":
    for name, intended, primary, _ in run():
        mark = "" if intended == primary else "  <- miss"
        print(f"{name:40} intended {intended:18} primary {primary}{mark}")
    print("backend", tmm_course.BACKEND)
