"""A bank of realistic learner mistakes, one per entry, each with the diagnosis a good teacher
would give first, plus correct alternatives that must pass. The checks were not written
against these: the bank measures how well they generalise.

    python tests/bug_bank.py          # the table, on this machine's backend

Each kernel family below is the exercise's natural solution with switches (``tl.constexpr``
flags) for the slips learners make; a launcher picks the flags, blocks and grid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import tmm_course  # first: it chooses the backend before any kernel below is decorated

# isort: split
import torch
import triton
import triton.language as tl

from tmm_course.check import (
    check_column_order_fill,
    check_descriptor_matmul,
    check_flip_rows,
    check_grouped_tile,
    check_matmul,
    check_outer_product,
    check_scaled_matmul,
    check_transpose,
    check_vector_add,
    time_limit,
)
from tmm_course.check.linear import check_linear_relu
from tmm_course.kernels.matmul import matmul

PASS = "pass"


@dataclass(frozen=True)
class Entry:
    check: str
    name: str
    launcher: Callable
    intended: str  # the primary diagnosis code a teacher would give, or "pass"


CHECKS = {
    "column_order_fill": check_column_order_fill,
    "outer_product": check_outer_product,
    "flip_rows": check_flip_rows,
    "transpose": check_transpose,
    "transpose_part1": lambda fn: check_transpose(fn, strided=False, ragged=False),
    "linear_relu": check_linear_relu,
    "matmul": check_matmul,
    "scaled_matmul": check_scaled_matmul,
    "grouped_tile": check_grouped_tile,
    "descriptor_matmul": check_descriptor_matmul,
    "vector_add": check_vector_add,
}


# --- lesson 0: out = x + y -------------------------------------------------------------------
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside)
    tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=inside), mask=inside)


@triton.jit
def add_into_kernel(x_ptr, y_ptr, sum_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside)
    tl.atomic_add(sum_ptr + offs, x + tl.load(y_ptr + offs, mask=inside), mask=inside)


def add_into_leftover_memory(x, y, out):
    """Adds into a buffer whose memory is zero where it is read, as torch.empty's often is by
    chance (one leftover value past the end makes it no constant), then copies it out."""
    n = out.numel()
    total = torch.zeros(n + 1, device=out.device)
    total[n] = 7.0  # what torch.empty may leave: zeros here only by chance
    add_into_kernel[(triton.cdiv(n, 256),)](x, y, total, n, BLOCK=256)
    add_kernel[(triton.cdiv(n, 256),)](total, torch.zeros_like(out), out, n, BLOCK=256)


def add(grid=lambda n, block: (triton.cdiv(n, block),), block=256):
    def launch(x, y, out):
        n = out.numel()
        add_kernel[grid(n, block)](x, y, out, n, BLOCK=block)

    return launch


# --- lesson 1: out[i, j] = the number of the program owning the 8 x 4 tile, down the columns -
@triton.jit
def owners_kernel(
    out_ptr,
    M,
    N,
    BM: tl.constexpr,
    BN: tl.constexpr,
    ROW_ORDER: tl.constexpr,
    MASK: tl.constexpr,
    STORE_PID_M: tl.constexpr,
):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    if ROW_ORDER:
        pid_m, pid_n = pid // grid_n, pid % grid_n
    else:
        pid_m, pid_n = pid % grid_m, pid // grid_m
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    number = pid_m if STORE_PID_M else pid
    if MASK == 2:
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    elif MASK == 1:
        mask = offs_m[:, None] < M
    elif MASK == 3:
        mask = (offs_m[:, None] <= M) & (offs_n[None, :] <= N)
    else:
        mask = (offs_m[:, None] < grid_m * BM) & (offs_n[None, :] < grid_n * BN)
    tile = tl.zeros((BM, BN), dtype=tl.float32) + number
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], tile, mask=mask)


def owners(row_order=False, mask=2, store_pid_m=False, floor=False, block=(8, 4)):
    def launch(out):
        m, n = out.shape
        bm, bn = block
        programs = (
            max(1, (m // bm) * (n // bn)) if floor else triton.cdiv(m, bm) * triton.cdiv(n, bn)
        )
        owners_kernel[(programs,)](out, m, n, BM=bm, BN=bn, ROW_ORDER=row_order, MASK=mask,
                                   STORE_PID_M=store_pid_m)  # fmt: skip

    return launch


def owners_with_torch(out):
    m, n = out.shape
    i = torch.arange(m, device=out.device)[:, None] // 8
    j = torch.arange(n, device=out.device)[None, :] // 4
    out.copy_(i + j * triton.cdiv(m, 8))


# --- lesson 2: out[i, j] = x[i] * y[j] -----------------------------------------------------
@triton.jit
def outer_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    M,
    N,
    som,
    BM: tl.constexpr,
    BN: tl.constexpr,
    SWAP: tl.constexpr,
    LOAD_MASK: tl.constexpr,
    STORE_MASK: tl.constexpr,
    ADD: tl.constexpr,
    OVERWRITE: tl.constexpr,
):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    if LOAD_MASK:
        x = tl.load(x_ptr + offs_m, mask=offs_m < M, other=0.0)
        y = tl.load(y_ptr + offs_n, mask=offs_n < N, other=0.0)
    else:
        x = tl.load(x_ptr + offs_m)
        y = tl.load(y_ptr + offs_n)
    if SWAP:
        tile = x[None, :] * y[:, None]
    elif ADD:
        tile = x[:, None] + y[None, :]
    else:
        tile = x[:, None] * y[None, :]
    ptrs = out_ptr + offs_m[:, None] * som + offs_n[None, :]
    if not OVERWRITE:  # out += the product: out's tile loaded through its row stride
        if LOAD_MASK:
            tile += tl.load(ptrs, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N), other=0.0)
        else:
            tile += tl.load(ptrs)
    if STORE_MASK:
        tl.store(ptrs, tile, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    else:
        tl.store(ptrs, tile)


def outer(
    swap=False,
    load_mask=True,
    store_mask=True,
    add=False,
    block=16,
    swap_grid=False,
    overwrite=False,
    floor=False,
):
    def launch(x, y, out):
        m, n = out.shape
        if floor:  # the grid rounded down: no program for a ragged edge
            grid = (m // block, n // block)
        else:
            grid = (triton.cdiv(m, block), triton.cdiv(n, block))
        outer_kernel[grid[::-1] if swap_grid else grid](
            x,
            y,
            out,
            m,
            n,
            out.stride(0),
            BM=block,
            BN=block,
            SWAP=swap,
            LOAD_MASK=load_mask,
            STORE_MASK=store_mask,
            ADD=add,
            OVERWRITE=overwrite,
        )

    return launch


# --- lesson 3 and 5: x upside down and transposed, through strides ------------------------
@triton.jit
def copy_kernel(
    x_ptr,
    out_ptr,
    M,
    N,
    sxm,
    sxn,
    som,
    son,
    BM: tl.constexpr,
    BN: tl.constexpr,
    TRANSPOSE: tl.constexpr,
    LOAD_MASK: tl.constexpr,
    STORE_MASK: tl.constexpr,
    SWAP_X: tl.constexpr,
    SWAPPED_STORE_MASK: tl.constexpr,
    FLIP: tl.constexpr,
):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    rows = M - 1 - offs_m if FLIP else offs_m  # lesson 3: out's row i is x's row M - 1 - i
    if SWAP_X:
        x_ptrs = x_ptr + rows[:, None] * sxn + offs_n[None, :] * sxm
    else:
        x_ptrs = x_ptr + rows[:, None] * sxm + offs_n[None, :] * sxn
    if LOAD_MASK:
        tile = tl.load(x_ptrs, mask=mask)
    else:
        tile = tl.load(x_ptrs)
    if TRANSPOSE:
        out_ptrs = out_ptr + offs_n[None, :] * som + offs_m[:, None] * son
    else:
        out_ptrs = out_ptr + offs_m[:, None] * som + offs_n[None, :] * son
    if SWAPPED_STORE_MASK:
        tl.store(out_ptrs, tile, mask=(offs_m[:, None] < N) & (offs_n[None, :] < M))
    elif STORE_MASK:
        tl.store(out_ptrs, tile, mask=mask)
    else:
        tl.store(out_ptrs, tile)


def copy(
    transpose=False,
    load_mask=True,
    store_mask=True,
    swap_x=False,
    swapped_store_mask=False,
    x_strides=None,
    out_strides=None,
    floor=False,
    contiguous_copy=False,
    scratch=False,
    block=16,
    flip=False,
    x_strides_for_out=False,
):
    def launch(x, out):
        m, n = x.shape
        source = x.contiguous() if contiguous_copy else x
        target = torch.empty_like(out, memory_format=torch.contiguous_format) if scratch else out
        sx = x_strides(x) if x_strides else source.stride()
        so = out_strides(out) if out_strides else target.stride()
        if x_strides_for_out:  # out's pointers built from x's strides
            so = source.stride()
        grid = (
            (max(1, m // block), max(1, n // block))
            if floor
            else (triton.cdiv(m, block), triton.cdiv(n, block))
        )
        copy_kernel[grid](
            source,
            target,
            m,
            n,
            *sx,
            *so,
            BM=block,
            BN=block,
            TRANSPOSE=transpose,
            LOAD_MASK=load_mask,
            STORE_MASK=store_mask,
            SWAP_X=swap_x,
            SWAPPED_STORE_MASK=swapped_store_mask,
            FLIP=flip,
        )
        if scratch:
            out.copy_(target)

    return launch


def contiguous_strides(t):
    return (t.shape[1], 1)


# --- lesson 4 and 5: matmul and C = alpha * A @ B + beta * C -------------------------------
@triton.jit
def mm_kernel(
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
    alpha,
    beta,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    SWAP_A: tl.constexpr,
    SWAP_B: tl.constexpr,
    SWAP_C: tl.constexpr,
    K_MASK: tl.constexpr,
    MN_LOAD_MASK: tl.constexpr,
    STORE_MASK: tl.constexpr,
    ACC16: tl.constexpr,
    ADVANCE: tl.constexpr,
    KEEP_ACC: tl.constexpr,
    SCALED: tl.constexpr,
    USE_ALPHA: tl.constexpr,
    ADD_C: tl.constexpr,
    ALWAYS_READ_C: tl.constexpr,
    SHORT_LOOP: tl.constexpr,
    ACC16_CARRIED: tl.constexpr,
    NO_K_STRIDE: tl.constexpr,
    WHOLE_SLABS: tl.constexpr,
    ALPHA_ON_C: tl.constexpr,
    C_TERM_SLIP: tl.constexpr,  # 1: alpha * (acc + beta * C), 2: beta * (alpha * acc + C), 3: + C
    ALPHA_EVERY_STEP: tl.constexpr,  # the running sum scaled by alpha at every K step
):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    if SWAP_A:
        a_ptrs = a_ptr + offs_m[:, None] * sak + offs_k[None, :] * sam
    else:
        a_ptrs = a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak
    if SWAP_B:
        b_ptrs = b_ptr + offs_k[:, None] * sbn + offs_n[None, :] * sbk
    else:
        b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    if ACC16 or ACC16_CARRIED:
        acc = tl.zeros((BM, BN), dtype=tl.float16)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    if SHORT_LOOP:
        trips = K // BK
    else:
        trips = tl.cdiv(K, BK)
    for k in range(0, trips):
        k_left = K - k * BK
        if WHOLE_SLABS:  # what is left of K rounded down to whole slabs: the last one masked off
            k_left = k_left // BK * BK
        a_mask = offs_k[None, :] < k_left if K_MASK else offs_k[None, :] < BK
        b_mask = offs_k[:, None] < k_left if K_MASK else offs_k[:, None] < BK
        if MN_LOAD_MASK:
            a_mask = a_mask & (offs_m[:, None] < M)
            b_mask = b_mask & (offs_n[None, :] < N)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        if ACC16:
            acc += tl.dot(a, b, out_dtype=tl.float16)
        elif ACC16_CARRIED:
            acc += tl.dot(a, b)  # float16 + float32: acc turns float32 inside the loop
        elif KEEP_ACC:
            acc = tl.dot(a, b, acc)
        else:
            acc = tl.dot(a, b)
        if ALPHA_EVERY_STEP:
            acc = acc * alpha
        if NO_K_STRIDE:
            a_ptrs += BK
            b_ptrs += BK
        elif ADVANCE:
            a_ptrs += BK * sak
            b_ptrs += BK * sbk
    if SWAP_C:
        c_ptrs = c_ptr + offs_m[:, None] * scn + offs_n[None, :] * scm
    else:
        c_ptrs = c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    result = acc.to(tl.float32)
    if SCALED:
        if USE_ALPHA and not ALPHA_ON_C and not ALPHA_EVERY_STEP:
            result = alpha * result
        if ADD_C:
            if ALWAYS_READ_C:
                result += beta * tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
            elif beta != 0 and not ALPHA_ON_C:  # BLAS: with beta == 0, C is never read
                result += beta * tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
            elif ALPHA_ON_C and beta != 0:
                result += alpha * beta * tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
        if C_TERM_SLIP != 0 and beta != 0:
            old = tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
            if C_TERM_SLIP == 1:
                result = alpha * (acc.to(tl.float32) + beta * old)
            elif C_TERM_SLIP == 2:
                result = beta * (alpha * acc.to(tl.float32) + old)
            else:
                result = alpha * acc.to(tl.float32) + old
    if STORE_MASK:
        tl.store(c_ptrs, result.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(c_ptrs, result.to(c_ptr.dtype.element_ty))


MM_FLAGS = dict(
    SWAP_A=False,
    SWAP_B=False,
    SWAP_C=False,
    K_MASK=True,
    MN_LOAD_MASK=True,
    STORE_MASK=True,
    ACC16=False,
    ADVANCE=True,
    KEEP_ACC=True,
    SCALED=False,
    USE_ALPHA=True,
    ADD_C=True,
    ALWAYS_READ_C=False,
    SHORT_LOOP=False,
    ACC16_CARRIED=False,
    NO_K_STRIDE=False,
    WHOLE_SLABS=False,
    ALPHA_ON_C=False,
    C_TERM_SLIP=0,
    ALPHA_EVERY_STEP=False,
)


def in_place_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` in ``x``'s own layout (strides, gaps and all): still ``x``."""
    return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)


def mm(block=(32, 32, 32), floor=False, c_strides=None, scratch=False, copies=None, c_like_a=False,
       **bugs):  # fmt: skip
    flags = {**MM_FLAGS, **{k.upper(): v for k, v in bugs.items()}}
    bm, bn, bk = block

    def launch(a, b, c, alpha=1.0, beta=0.0):
        m, k = a.shape
        n = b.shape[1]
        if copies is not None:
            a, b = copies(a), copies(b)
        target = torch.empty(m, n, device=c.device, dtype=torch.float32) if scratch else c
        sc = c_strides(c) if c_strides else a.stride() if c_like_a else target.stride()
        grid = (
            (max(1, m // bm), max(1, n // bn))
            if floor
            else (triton.cdiv(m, bm), triton.cdiv(n, bn))
        )
        mm_kernel[grid](
            a,
            b,
            target,
            m,
            n,
            k,
            *a.stride(),
            *b.stride(),
            *sc,
            alpha,
            beta,
            BM=bm,
            BN=bn,
            BK=bk,
            **flags,
        )
        if scratch:
            c.copy_(target)

    return launch


# a plain lesson-4 kernel, for the loops a GPU compiler refuses or that never end
@triton.jit
def loop_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, LOOP: tl.constexpr,
):  # fmt: skip
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if LOOP == "static_range":  # unrolled: a GPU needs its bounds when compiling
        for k in tl.static_range(0, tl.cdiv(K, BK)):
            a = tl.load(
                a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BK), other=0.0
            )
            b = tl.load(
                b_ptrs, mask=(offs_k[:, None] < K - k * BK) & (offs_n[None, :] < N), other=0.0
            )
            acc = tl.dot(a, b, acc)
            a_ptrs += BK * sak
            b_ptrs += BK * sbk
    else:  # "while": the counter never advances (the slab is found from k: no pointer walks)
        k = 0
        while k < tl.cdiv(K, BK):
            k_here = k * BK + offs_k
            a = tl.load(
                a_ptr + offs_m[:, None] * sam + k_here[None, :] * sak,
                mask=(offs_m[:, None] < M) & (k_here[None, :] < K),
                other=0.0,
            )
            b = tl.load(
                b_ptr + k_here[:, None] * sbk + offs_n[None, :] * sbn,
                mask=(k_here[:, None] < K) & (offs_n[None, :] < N),
                other=0.0,
            )
            acc = tl.dot(a, b, acc)
    c_ptrs = c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn
    tl.store(
        c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N)
    )


def looped(loop: str, block=(32, 32, 32)):
    bm, bn, bk = block

    def launch(a, b, c):
        (m, k), n = a.shape, b.shape[1]
        loop_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
            a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), BM=bm, BN=bn, BK=bk, LOOP=loop
        )

    return launch


# --- cheats: the right answer, not computed by the learner's kernel ------------------------
@triton.jit
def decoy_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr))


@triton.jit
def move_kernel(src_ptr, dst_ptr, M, N, s_m, s_n, d_m, d_n, BM: tl.constexpr, BN: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(src_ptr + offs_m[:, None] * s_m + offs_n[None, :] * s_n, mask=mask)
    tl.store(dst_ptr + offs_m[:, None] * d_m + offs_n[None, :] * d_n, tile, mask=mask)


def _move(src, dst):
    m, n = dst.shape
    move_kernel[(triton.cdiv(m, 16), triton.cdiv(n, 16))](
        src, dst, m, n, *src.stride(), *dst.stride(), BM=16, BN=16
    )


def decoy_then_torch(a, b, c):
    decoy_kernel[(1,)](torch.zeros(1, device=c.device))
    c.copy_(a @ b)


def decoy_then_numpy(a, b, c):
    decoy_kernel[(1,)](torch.zeros(1, device=c.device))
    product = a.float().cpu().numpy() @ b.float().cpu().numpy()
    c.copy_(torch.from_numpy(product))


def kernel_then_torch(a, b, c):
    mm()(a, b, c)
    c.copy_(a @ b)


def torch_moved_by_a_kernel(a, b, c):
    _move((a @ b).contiguous(), c)


def torch_for_long_k(a, b, c):
    if a.shape[1] >= 4096:
        decoy_kernel[(1,)](torch.zeros(1, device=c.device))
        c.copy_(a @ b)
    else:
        mm()(a, b, c)


def course_matmul_and_decoy(a, b, c):
    matmul(a, b, out=c)
    decoy_kernel[(1,)](torch.zeros(1, device=c.device))


def course_matmul_and_epilogue(a, b, c):
    matmul(a, b, out=c)
    _move(c.clone(), c)


def transpose_through_permuted_copy(x, out):
    """x rearranged on the host so that its memory holds x.T, then copied flat by a kernel."""
    y = x.t().contiguous().t()  # x's shape and values; x.T's memory
    m, n = x.shape
    copy_kernel[(triton.cdiv(n, 16), triton.cdiv(m, 16))](
        y, out, n, m, m, 1, *out.stride(), BM=16, BN=16, TRANSPOSE=False, LOAD_MASK=True,
        STORE_MASK=True, SWAP_X=False, SWAPPED_STORE_MASK=False, FLIP=False,
    )  # fmt: skip


def transpose_through_contiguous(x, out):
    x = x.contiguous()
    m, n = x.shape
    copy_kernel[(triton.cdiv(m, 16), triton.cdiv(n, 16))](
        x, out, m, n, n, 1, *out.stride(), BM=16, BN=16, TRANSPOSE=True, LOAD_MASK=True,
        STORE_MASK=True, SWAP_X=False, SWAPPED_STORE_MASK=False, FLIP=False,
    )  # fmt: skip


def scaled(swap_alpha_beta=False, **bugs):
    inner = mm(scaled=True, **bugs)
    if swap_alpha_beta:
        return lambda a, b, c, alpha, beta: inner(a, b, c, beta, alpha)
    return lambda a, b, c, alpha, beta: inner(a, b, c, alpha, beta)


def matmul_with_torch(a, b, c):
    c.copy_(a @ b)


def course_matmul(a, b, c):
    matmul(a, b, out=c)


# --- lesson 4's variant: out = relu(x @ w^T + bias) ------------------------------------------
@triton.jit
def linear_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, M, N, K, sxm, sxk, swn, swk, som, son,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    W_AS_KN: tl.constexpr, BIAS_MASK: tl.constexpr, RELU: tl.constexpr, BIAS_FIRST: tl.constexpr,
    NO_K_STRIDE: tl.constexpr,
):  # fmt: skip
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    x_ptrs = x_ptr + offs_m[:, None] * sxm + offs_k[None, :] * sxk
    if W_AS_KN:
        w_ptrs = w_ptr + offs_k[:, None] * swn + offs_n[None, :] * swk
    else:
        w_ptrs = w_ptr + offs_k[:, None] * swk + offs_n[None, :] * swn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        left = K - k * BK
        x = tl.load(x_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < left), other=0.0)
        w = tl.load(w_ptrs, mask=(offs_k[:, None] < left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(x, w, acc)
        if NO_K_STRIDE:  # BLOCK_K elements along, right only where the K stride is 1
            x_ptrs += BK
            w_ptrs += BK
        else:
            x_ptrs += BK * sxk
            w_ptrs += BK * (swn if W_AS_KN else swk)
    if BIAS_MASK:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    else:
        bias = tl.load(bias_ptr + offs_n).to(tl.float32)
    if BIAS_FIRST:
        acc = acc + bias[None, :]
        if RELU:
            acc = tl.maximum(acc, 0.0)
    else:
        acc = tl.maximum(acc, 0.0) + bias[None, :]
    out_ptrs = out_ptr + offs_m[:, None] * som + offs_n[None, :] * son
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))  # fmt: skip


def linear(block=(32, 32, 32), contiguous_out=False, **bugs):
    flags = {"W_AS_KN": False, "BIAS_MASK": True, "RELU": True, "BIAS_FIRST": True,
             "NO_K_STRIDE": False}  # fmt: skip
    flags.update({k.upper(): v for k, v in bugs.items()})
    bm, bn, bk = block

    def launch(x, w, bias, out):
        (m, k), n = x.shape, w.shape[0]
        so = (n, 1) if contiguous_out else out.stride()
        linear_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
            x, w, bias, out, m, n, k, *x.stride(), *w.stride(), *so, BM=bm, BN=bn, BK=bk, **flags
        )

    return launch


# --- lesson 6: each program stores its tile in grouped order ---------------------------------
@triton.jit
def tiles_kernel(tiles_ptr, grid_m, grid_n, GROUP_M: tl.constexpr, SHORT_GROUP: tl.constexpr,
                 SWAP: tl.constexpr, ONE_STORE: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    in_group = GROUP_M * grid_n
    first_m = (pid // in_group) * GROUP_M
    rows = tl.minimum(grid_m - first_m, GROUP_M) if SHORT_GROUP else GROUP_M
    pid_m = first_m + (pid % in_group) % rows
    pid_n = (pid % in_group) // rows
    if SWAP:  # the column walked first, the row second
        pid_m, pid_n = first_m + (pid % in_group) // grid_n, (pid % in_group) % grid_n
    tl.store(tiles_ptr + 2 * pid, pid_m)
    if not ONE_STORE:
        tl.store(tiles_ptr + 2 * pid + 1, pid_n)


def tiles(short_group=True, swap=False, one_store=False, programs=None):
    def launch(out, grid_m, grid_n, group_m):
        count = grid_m * grid_n if programs is None else programs(grid_m, grid_n)
        tiles_kernel[(count,)](out, grid_m, grid_n, GROUP_M=group_m, SHORT_GROUP=short_group,
                               SWAP=swap, ONE_STORE=one_store)  # fmt: skip

    return launch


# --- lesson 8: split-K -------------------------------------------------------------------------
# lesson 8's solution cell (rc23) made to load all of K in the first slice of each tile and
# none in the others: right values, the same compiled figures, the work not shared
UNSHARED_SLICES = {
    "steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)":
        "steps = tl.cdiv(K, BLOCK_K) * (1 - tl.minimum(tl.program_id(2), 1))",
    "start = tl.program_id(2) * steps * BLOCK_K": "start = 0 * BLOCK_K",
}  # fmt: skip


def edited(source: str, edits: dict[str, str]) -> str:
    """``source`` with each of ``edits`` (old -> new) made, each old text present."""
    for old, new in edits.items():
        assert old in source, old
        source = source.replace(old, new)
    return source


# --- lesson 7: a @ b through tensor descriptors ------------------------------------------------
@triton.jit
def desc_kernel(a_desc, w_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, HALF_ACC: tl.constexpr, FLOOR_K: tl.constexpr,
                AS_B: tl.constexpr):  # fmt: skip
    row, col = tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16 if HALF_ACC else tl.float32)
    steps = K // BLOCK_K if FLOOR_K else tl.cdiv(K, BLOCK_K)
    for k in range(0, steps):
        if AS_B:  # lesson 7's A @ B kernel: its second operand read as K x N
            w = w_desc.load([k * BLOCK_K, col])
        else:
            w = tl.trans(w_desc.load([col, k * BLOCK_K]))
        acc = tl.dot(a_desc.load([row, k * BLOCK_K]), w, acc,
                     out_dtype=tl.float16 if HALF_ACC else tl.float32)  # fmt: skip
    c_desc.store([row, col], acc.to(c_desc.dtype))


def described(block=(32, 32, 16), half_acc=False, floor_k=False, as_b=None):
    """``as_b``: lesson 7's A @ B kernel, handed ``as_b(w)`` as its K x N operand."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    def launch(a, w, c):
        (m, k), n = a.shape, w.shape[0]
        bm, bn, bk = block
        bk = bk if a.element_size() == 2 else max(8, bk // 2)
        second = TensorDescriptor.from_tensor(w, [bn, bk]) if as_b is None else (
            TensorDescriptor.from_tensor(as_b(w), [bk, bn]))  # fmt: skip
        desc_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
            TensorDescriptor.from_tensor(a, [bm, bk]), second,
            TensorDescriptor.from_tensor(c, [bm, bn]), k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
            HALF_ACC=half_acc, FLOOR_K=floor_k, AS_B=as_b is not None,
            num_warps=8 if bm * bn >= 128 * 128 else 4)  # fmt: skip

    return launch


def pointer_matmul(a, w, c):
    """Right values through plain masked loads (w read through its transpose's strides): no
    descriptor."""
    m, k = a.shape
    n = w.shape[0]
    wt = w.t()  # a view: K x N
    mm_kernel_for_descriptors[(triton.cdiv(m, 32), triton.cdiv(n, 32))](
        a, wt, c, m, n, k, *a.stride(), *wt.stride(), *c.stride(), BLOCK=32
    )


@triton.jit
def mm_kernel_for_descriptors(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                              BLOCK: tl.constexpr):  # fmt: skip
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, 16):
        rk = k0 + tl.arange(0, 16)
        a = tl.load(
            a_ptr + rm[:, None] * sam + rk[None, :] * sak,
            mask=(rm[:, None] < M) & (rk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + rk[:, None] * sbk + rn[None, :] * sbn,
            mask=(rk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


BANK = [
    # lesson 1
    Entry("column_order_fill", "correct", owners(), PASS),
    Entry("column_order_fill", "numbered along the rows", owners(row_order=True), "wrong_values"),
    Entry("column_order_fill", "tiles 4 rows by 8 columns", owners(block=(4, 8)), "wrong_values"),
    Entry("column_order_fill", "pid_m stored, not pid", owners(store_pid_m=True), "wrong_values"),
    Entry("column_order_fill", "no store mask", owners(mask=0), "out_of_bounds_write"),
    Entry("column_order_fill", "store mask on rows only", owners(mask=1), "out_of_bounds_write"),
    Entry("column_order_fill", "mask uses <= instead of <", owners(mask=3), "out_of_bounds_write"),
    Entry("column_order_fill", "grid rounded down", owners(floor=True), "unwritten"),
    Entry("column_order_fill", "torch instead of a kernel", owners_with_torch, "no_triton_kernel"),
    # lesson 2
    Entry("outer_product", "correct", outer(), PASS),
    Entry("outer_product", "[:, None] and [None, :] swapped", outer(swap=True), "transposed"),
    Entry(
        "outer_product",
        "loads without masks",
        outer(load_mask=False),
        "out_of_bounds_read",
    ),
    Entry("outer_product", "store without mask", outer(store_mask=False), "out_of_bounds_write"),
    Entry("outer_product", "grid axes swapped", outer(swap_grid=True), "unwritten"),
    Entry("outer_product", "x + y instead of x * y", outer(add=True), "wrong_values"),
    Entry("outer_product", "product stored over out", outer(overwrite=True), "wrong_values"),
    Entry("outer_product", "grid rounded down", outer(block=32, floor=True), "unwritten"),
    Entry(
        "outer_product",
        "torch.outer",
        lambda x, y, out: out.copy_(torch.outer(x, y)),
        "no_triton_kernel",
    ),
    # lesson 3
    Entry("flip_rows", "correct", copy(flip=True), PASS),
    Entry(
        "flip_rows",
        "x.contiguous() on the host",
        copy(flip=True, contiguous_copy=True),
        "host_copy",
    ),
    Entry(
        "flip_rows",
        "a scratch output copied by torch",
        copy(flip=True, scratch=True),
        "no_triton_kernel",
    ),
    Entry(
        "flip_rows",
        "x assumed contiguous",
        copy(flip=True, x_strides=contiguous_strides),
        "ignores_strides",
    ),
    Entry(
        "flip_rows",
        "out assumed contiguous",
        copy(flip=True, out_strides=contiguous_strides),
        "ignores_strides",
    ),
    Entry(
        "flip_rows", "x's strides paired the wrong way", copy(flip=True, swap_x=True), "transposed"
    ),
    Entry(
        "flip_rows",
        "no masks",
        copy(flip=True, load_mask=False, store_mask=False),
        "out_of_bounds_write",
    ),
    Entry(
        "flip_rows",
        "store masked, load not",
        copy(flip=True, load_mask=False),
        "out_of_bounds_read",
    ),
    Entry("flip_rows", "grid rounded down", copy(flip=True, floor=True), "unwritten"),
    Entry("flip_rows", "copied, not flipped", copy(), "wrong_values"),
    # lesson 5, parts 1 to 3
    Entry("transpose", "correct", copy(transpose=True), PASS),
    Entry("transpose", "correct, 32x32 blocks", copy(transpose=True, block=32), PASS),
    Entry("transpose", "stores a copy", copy(), "transposed"),
    Entry(
        "transpose",
        "no masks",
        copy(transpose=True, load_mask=False, store_mask=False),
        "out_of_bounds_write",
    ),
    Entry(
        "transpose",
        "store masked, load not",
        copy(transpose=True, load_mask=False),
        "out_of_bounds_read",
    ),
    Entry(
        "transpose",
        "store mask with M and N swapped",
        copy(transpose=True, swapped_store_mask=True),
        "out_of_bounds_write",
    ),
    Entry(
        "transpose",
        "out's pointers built from x's strides",
        copy(transpose=True, x_strides_for_out=True),
        "out_of_bounds_write",
    ),
    Entry(
        "transpose",
        "x assumed contiguous",
        copy(transpose=True, x_strides=contiguous_strides),
        "ignores_strides",
    ),
    Entry(
        "transpose",
        "out assumed contiguous",
        copy(transpose=True, out_strides=lambda t: (t.shape[1], 1)),
        "ignores_strides",
    ),
    Entry(
        "transpose", "x.t() copied by torch", lambda x, out: out.copy_(x.t()), "no_triton_kernel"
    ),
    Entry("transpose", "x.contiguous() on the host", transpose_through_contiguous, "host_copy"),
    Entry(
        "transpose",
        "x.t().contiguous().t() copied flat",
        transpose_through_permuted_copy,
        "host_copy",
    ),
    Entry(
        "transpose", "load reads x column-major", copy(transpose=True, swap_x=True), "transposed"
    ),
    Entry(
        "transpose_part1",
        "out's row stride taken from x",
        copy(
            transpose=True, load_mask=False, store_mask=False, out_strides=lambda t: (t.shape[0], 1)
        ),
        "out_of_bounds_write",
    ),
    Entry(
        "transpose_part1",
        "correct, no masks",
        copy(transpose=True, load_mask=False, store_mask=False),
        PASS,
    ),
    # lesson 4
    Entry("matmul", "correct, 32x32x32", mm(), PASS),
    Entry("matmul", "correct, 64x64x32", mm(block=(64, 64, 32)), PASS),
    Entry("matmul", "correct, 8x8x16", mm(block=(8, 8, 16)), PASS),
    Entry("matmul", "float32 scratch copied by torch", mm(scratch=True), "no_triton_kernel"),
    Entry("matmul", "correct, copies of a and b in their layouts", mm(copies=in_place_copy), PASS),
    Entry(
        "matmul",
        "strided a and b gathered by .contiguous()",
        mm(copies=torch.Tensor.contiguous),
        "host_copy",
    ),
    Entry("matmul", "a_ptrs strides swapped", mm(swap_a=True), "transposed"),
    Entry("matmul", "b_ptrs strides swapped", mm(swap_b=True), "transposed"),
    Entry("matmul", "C stored transposed", mm(swap_c=True), "transposed"),
    Entry("matmul", "no K mask", mm(k_mask=False), "out_of_bounds_read"),
    Entry("matmul", "no M/N masks on the loads", mm(mn_load_mask=False), "out_of_bounds_read"),
    Entry("matmul", "no store mask", mm(store_mask=False), "out_of_bounds_write"),
    Entry("matmul", "float16 accumulator", mm(acc16=True), "precision"),
    Entry("matmul", "BLOCK_K = 8", mm(block=(32, 32, 8)), "gpu_would_reject"),
    Entry("matmul", "pointers never advance along K", mm(advance=False), "wrong_values"),
    Entry("matmul", "acc = tl.dot(a, b): the sum restarts", mm(keep_acc=False), "wrong_values"),
    Entry("matmul", "grid rounded down", mm(floor=True), "unwritten"),
    Entry("matmul", "pointers advanced without the stride", mm(no_k_stride=True), "wrong_values"),
    Entry("matmul", "K mask drops the last partial slab", mm(whole_slabs=True), "ragged_edge"),
    Entry(
        "matmul", "c assumed contiguous", mm(c_strides=lambda t: (t.shape[1], 1)), "ignores_strides"
    ),
    Entry("matmul", "torch a @ b", matmul_with_torch, "no_triton_kernel"),
    Entry("matmul", "the course's own matmul", course_matmul, "course_kernel"),
    Entry("matmul", "K loop of K // BLOCK_K trips", mm(short_loop=True), "ragged_edge"),
    Entry("matmul", "float16 acc += float32 tl.dot", mm(acc16_carried=True), "gpu_would_reject"),
    Entry("matmul", "tl.static_range over a runtime K", looped("static_range"), "gpu_would_reject"),
    Entry("matmul", "a while loop that never advances", looped("while"), "timed_out"),
    Entry("matmul", "decoy launch, then torch", decoy_then_torch, "no_triton_kernel"),
    Entry("matmul", "decoy launch, then numpy", decoy_then_numpy, "no_triton_kernel"),
    Entry("matmul", "torch writes over the kernel's C", kernel_then_torch, "no_triton_kernel"),
    Entry(
        "matmul", "torch's answer moved by a kernel", torch_moved_by_a_kernel, "no_triton_kernel"
    ),
    Entry("matmul", "torch only for the long-K probe", torch_for_long_k, "no_triton_kernel"),
    Entry("matmul", "course matmul and a decoy", course_matmul_and_decoy, "course_kernel"),
    Entry("matmul", "course matmul and an epilogue", course_matmul_and_epilogue, "course_kernel"),
    # lesson 5, part 4
    Entry("scaled_matmul", "correct", scaled(), PASS),
    Entry("scaled_matmul", "beta * C never added", scaled(add_c=False), "wrong_values"),
    Entry("scaled_matmul", "not scaled by alpha", scaled(use_alpha=False), "wrong_values"),
    Entry(
        "scaled_matmul",
        "C read although beta == 0",
        scaled(always_read_c=True),
        "reads_c_when_beta_zero",
    ),
    Entry("scaled_matmul", "float16 accumulator", scaled(acc16=True), "precision"),
    Entry(
        "scaled_matmul",
        "c assumed contiguous",
        scaled(c_strides=lambda t: (t.shape[1], 1)),
        "ignores_strides",
    ),
    Entry("scaled_matmul", "a_ptrs strides swapped", scaled(swap_a=True), "transposed"),
    Entry("scaled_matmul", "no K mask", scaled(k_mask=False), "out_of_bounds_read"),
    Entry("scaled_matmul", "alpha and beta swapped", scaled(swap_alpha_beta=True), "wrong_values"),
    Entry("scaled_matmul", "alpha applied to beta * C", scaled(alpha_on_c=True), "wrong_values"),
    Entry("scaled_matmul", "alpha applied to both terms", scaled(c_term_slip=1), "wrong_values"),
    Entry("scaled_matmul", "beta applied to both terms", scaled(c_term_slip=2), "wrong_values"),
    Entry("scaled_matmul", "C added without beta", scaled(c_term_slip=3), "wrong_values"),
    Entry("scaled_matmul", "K loop of K // BLOCK_K trips", scaled(short_loop=True), "ragged_edge"),
    Entry("scaled_matmul", "alpha at every K step", scaled(alpha_every_step=True), "wrong_values"),
    Entry("scaled_matmul", "c on a's strides", scaled(c_like_a=True), "ignores_strides"),
    Entry("linear_relu", "correct", linear(), PASS),
    Entry("linear_relu", "correct, 64x64x32 blocks", linear(block=(64, 64, 32)), PASS),
    Entry("linear_relu", "w read as K x N", linear(w_as_kn=True), "transposed"),
    Entry(
        "linear_relu", "bias loaded without a mask", linear(bias_mask=False), "out_of_bounds_read"
    ),
    Entry("linear_relu", "no ReLU", linear(relu=False), "wrong_values"),
    Entry("linear_relu", "ReLU before the bias", linear(bias_first=False), "wrong_values"),
    Entry("linear_relu", "out assumed contiguous", linear(contiguous_out=True), "ignores_strides"),
    Entry("linear_relu", "K steps without the stride", linear(no_k_stride=True), "ignores_strides"),
    # lesson 6
    Entry("grouped_tile", "correct", tiles(), PASS),
    Entry(
        "grouped_tile",
        "the last group taken as tall as the others",
        tiles(short_group=False),
        "ragged_edge",
    ),
    Entry("grouped_tile", "rows walked first inside a group", tiles(swap=True), "wrong_values"),
    Entry("grouped_tile", "pid_n never stored", tiles(one_store=True), "unwritten"),
    Entry("grouped_tile", "one program short", tiles(programs=lambda m, n: m * n - 1), "unwritten"),
    # lesson 7
    Entry("descriptor_matmul", "correct, 128x128x64", described(block=(128, 128, 64)), PASS),
    # right values, but a tile with half the reuse the goals at 4096^3 ask
    Entry(
        "descriptor_matmul", "right values, 64x32x32", described(block=(64, 32, 32)), "goal_missed"
    ),
    Entry("descriptor_matmul", "masked pointer loads", pointer_matmul, "no_descriptor"),
    Entry("descriptor_matmul", "K loop floored", described(floor_k=True), "ragged_edge"),
    Entry("descriptor_matmul", "float16 accumulator", described(half_acc=True), "precision"),
    Entry(
        "descriptor_matmul",
        "lesson 7's A @ B kernel handed w",
        described(as_b=lambda w: w),
        "transposed",
    ),
    Entry(
        "descriptor_matmul",
        "w turned around on the host",
        described(as_b=lambda w: w.t().contiguous()),
        "host_copy",
    ),
    # lesson 0
    Entry("vector_add", "grid n // BLOCK", add(grid=lambda n, b: (max(1, n // b),)), "unwritten"),
    Entry("vector_add", "correct", add(), PASS),
    Entry("vector_add", "correct, one program of 4096", add(block=4096), PASS),
    Entry("vector_add", "grid of n programs", add(grid=lambda n, b: (n,)), "too_many_programs"),
    Entry(
        "vector_add", "grid given as an int", add(grid=lambda n, b: triton.cdiv(n, b)), "crashed"
    ),
    Entry(
        "vector_add", "adds into leftover zeros", add_into_leftover_memory, "uninitialised_buffer"
    ),
]


@dataclass(frozen=True)
class Outcome:
    entry: Entry
    codes: list[str]
    passed: bool
    # the check's whole result, for tests that read more of it than the codes
    result: object = field(default=None, compare=False, repr=False)

    @property
    def primary(self) -> str:
        return PASS if self.passed else (self.codes[0] if self.codes else "?")

    @property
    def right(self) -> bool:
        return self.primary == self.entry.intended


HANG_SECONDS = 8.0  # the bank's hangs end sooner than a notebook's would (20 s a program)


def run(entries=BANK) -> list[Outcome]:
    outcomes = []
    limit, time_limit.PROGRAM_SECONDS = time_limit.PROGRAM_SECONDS, HANG_SECONDS
    try:
        for entry in entries:
            torch.manual_seed(0)
            result = CHECKS[entry.check](entry.launcher)
            outcomes.append(Outcome(entry, result.codes, result.passed, result))
    finally:
        time_limit.PROGRAM_SECONDS = limit
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    bugs = [o for o in outcomes if o.entry.intended != PASS]
    correct = [o for o in outcomes if o.entry.intended == PASS]
    lines = [
        f"backend {tmm_course.BACKEND}: {sum(o.right for o in bugs)}/{len(bugs)} bugs diagnosed "
        f"with the intended code; {sum(not o.right for o in correct)}/{len(correct)} false "
        "alarms on correct launchers",
        "",
        "| check | entry | intended | primary | all codes |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        mark = "" if o.right else " **miss**"
        lines.append(
            f"| {o.entry.check} | {o.entry.name} | {o.entry.intended} | "
            f"{o.primary}{mark} | {' '.join(o.codes)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(run()))
