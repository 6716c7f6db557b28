"""Lesson 4: the tiled matmul kernel, C = A @ B, and a twin that records every K step."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import gpu, validate

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
PRECISIONS = ("tf32", "ieee")  # how tl.dot multiplies float32 inputs on a GPU


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr,
                  M, N, K,
                  stride_am, stride_ak,  # how A steps through memory
                  stride_bk, stride_bn,  # how B steps through memory
                  stride_cm, stride_cn,  # how C steps through memory
                  PRECISION: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # 1. which tile of C is mine
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)

    # 2. pointer tiles to the first K-slab of A (BLOCK_M x BLOCK_K) and of B (BLOCK_K x BLOCK_N)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    # 3. the K-loop: accumulate in float32, whatever the input dtype
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K  # the last slab may be ragged: mask lanes past K to 0
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)  # acc += a @ b
        a_ptrs += BLOCK_K * stride_ak  # slide both windows one slab along K
        b_ptrs += BLOCK_K * stride_bk

    # 4. cast once, on the way out, and store only the cells inside C
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@triton.jit
def matmul_kloop_kernel(a_ptr, b_ptr, acc_snap_ptr, a_snap_ptr, b_snap_ptr,
                        M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                        tile_m, tile_n, PRECISION: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # matmul_kernel for one tile (tile_m, tile_n), saving after every K step the A and B slabs
    # it loaded and its accumulator, to float32 buffers of shape (steps, rows, cols); with
    # BLOCK_K = 1 each step adds an outer product (a GPU's tl.dot wants BLOCK_K >= 16)
    offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rows_m = tl.arange(0, BLOCK_M)[:, None]
    rows_k = tl.arange(0, BLOCK_K)[:, None]
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        if BLOCK_K == 1:
            acc += a.to(tl.float32) * b.to(tl.float32)  # (BLOCK_M, 1) x (1, BLOCK_N)
        else:
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_snap = a_snap_ptr + k * BLOCK_M * BLOCK_K + rows_m * BLOCK_K + offs_k[None, :]
        b_snap = (
            b_snap_ptr + k * BLOCK_K * BLOCK_N + rows_k * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        )
        acc_snap = (
            acc_snap_ptr + k * BLOCK_M * BLOCK_N + rows_m * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        )
        tl.store(a_snap, a.to(tl.float32))
        tl.store(b_snap, b.to(tl.float32))
        tl.store(acc_snap, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk


def check_operands(a: object, b: object, precision: str) -> None:
    """Raise KernelInputError unless a (M, K) @ b (K, N) is a product the kernels can form."""
    validate.tensor("a", a, ndim=2)
    validate.tensor("b", b, ndim=2)
    if a.device != b.device:
        raise validate.KernelInputError(
            f"a is on {a.device} and b on {b.device}; expected both on tmm_course.DEVICE "
            f"({tmm_course.DEVICE}). Fix: a, b = a.to(tmm_course.DEVICE), b.to(tmm_course.DEVICE)."
        )
    validate.on_device(tmm_course.DEVICE, a=a, b=b)
    if a.shape[1] != b.shape[0]:
        raise validate.KernelInputError(
            f"Inner dimensions differ: a is {tuple(a.shape)} and b is {tuple(b.shape)}, so "
            f"a's {a.shape[1]} columns cannot meet b's {b.shape[0]} rows. Expected a (M, K) and "
            "b (K, N). Fix: check the order of the operands, or transpose one (b.T)."
        )
    validate.same_dtype(a=a, b=b)
    validate.dtype("a", a, DTYPES, tmm_course.BACKEND)
    if precision not in PRECISIONS:
        raise validate.KernelInputError(
            f"precision={precision!r}: expected 'tf32' (fast, about 3 decimal digits on a GPU) "
            "or 'ieee' (exact float32)."
        )


def check_blocks(blocks: tuple[int, int, int]) -> None:
    """Tile sizes must be powers of two; ``tl.dot`` takes any BLOCK_M and BLOCK_N, and a
    BLOCK_K of at least 16 (Triton 3.9 takes 8 for float32 inputs, 3.6 does not)."""
    for name, block in zip(("block_m", "block_n"), blocks[:2], strict=True):
        validate.power_of_two(name, block)
    validate.power_of_two("block_k", blocks[2], minimum=16)


def output_for(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """``out`` checked against the product's shape and dtype (and sharing no memory with ``a``
    or ``b``), or a new (M, N) tensor."""
    m, n = a.shape[0], b.shape[1]
    if out is None:
        return torch.empty((m, n), dtype=a.dtype, device=a.device)
    validate.tensor("out", out, ndim=2)
    validate.on_device(tmm_course.DEVICE, out=out)
    if tuple(out.shape) != (m, n) or out.dtype != a.dtype:
        raise validate.KernelInputError(
            f"out is {tuple(out.shape)} {out.dtype}; expected ({m}, {n}) {a.dtype}. "
            "Fix: out = torch.empty(M, N, dtype=a.dtype, device=a.device)."
        )
    validate.no_overlap(out, a=a, b=b)
    return out


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    precision: str = "tf32",
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 32,
    out: torch.Tensor | None = None,
    num_warps: int = 4,
    num_stages: int = 3,
) -> torch.Tensor:
    """C = A @ B with :func:`matmul_kernel`, for any strides, in float16, bfloat16 (GPU) or
    float32. ``precision`` sets how float32 products are formed on a GPU ("tf32", Triton's
    default, or "ieee"); the interpreter always computes exact float32. ``out``, if given,
    receives C (any strides). ``num_warps`` and ``num_stages`` (Triton's defaults) matter on
    a GPU only; lesson 6 tunes them."""
    check_operands(a, b, precision)
    check_blocks((block_m, block_n, block_k))
    (m, k), n = a.shape, b.shape[1]
    out = output_for(a, b, out)
    if m == 0 or n == 0:
        return out
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    matmul_kernel[grid](
        a,
        b,
        out,
        m,
        n,
        k,
        *a.stride(),
        *b.stride(),
        *out.stride(),
        PRECISION=gpu.precision_for(precision) if a.dtype == torch.float32 else None,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return out


@dataclass(frozen=True)
class KLoopFrames:
    """What one program saw and held after each K step, as the kernel stored it."""

    tile: tuple[int, int]  # (pid_m, pid_n)
    blocks: tuple[int, int, int]  # BLOCK_M, BLOCK_N, BLOCK_K
    a_slabs: torch.Tensor  # (steps, BLOCK_M, BLOCK_K): the A tile loaded at each step
    b_slabs: torch.Tensor  # (steps, BLOCK_K, BLOCK_N): the B tile loaded at each step
    acc: torch.Tensor  # (steps, BLOCK_M, BLOCK_N): the accumulator after each step

    @property
    def steps(self) -> int:
        return self.acc.shape[0]


def matmul_kloop_frames(
    a: torch.Tensor,
    b: torch.Tensor,
    tile: tuple[int, int] = (0, 0),
    *,
    precision: str = "tf32",
    block_m: int = 16,
    block_n: int = 16,
    block_k: int = 16,
) -> KLoopFrames:
    """Run :func:`matmul_kloop_kernel` for output tile ``tile`` and return its K-loop frames.
    ``block_k=1`` (one column of A and one row of B per step) allows tiles of any power of two."""
    check_operands(a, b, precision)
    if block_k == 1:
        for name, block in (("block_m", block_m), ("block_n", block_n)):
            validate.power_of_two(name, block, minimum=2)
    else:
        check_blocks((block_m, block_n, block_k))
    (m, k), n = a.shape, b.shape[1]
    grid_m, grid_n = triton.cdiv(m, block_m), triton.cdiv(n, block_n)
    if not (0 <= tile[0] < grid_m and 0 <= tile[1] < grid_n):
        raise validate.KernelInputError(
            f"tile={tile} is outside the {grid_m} x {grid_n} grid of {block_m} x {block_n} "
            f"tiles. Expected 0 <= pid_m < {grid_m} and 0 <= pid_n < {grid_n}."
        )
    steps = max(1, triton.cdiv(k, block_k))
    new = lambda *shape: torch.full(shape, float("nan"), device=a.device)
    acc = new(steps, block_m, block_n)
    a_slabs, b_slabs = new(steps, block_m, block_k), new(steps, block_k, block_n)
    if k == 0:
        acc.zero_()
        a_slabs.zero_()
        b_slabs.zero_()
    else:
        matmul_kloop_kernel[(1,)](
            a,
            b,
            acc,
            a_slabs,
            b_slabs,
            m,
            n,
            k,
            *a.stride(),
            *b.stride(),
            *tile,
            PRECISION=gpu.precision_for(precision) if a.dtype == torch.float32 else None,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
        )
    return KLoopFrames(tuple(tile), (block_m, block_n, block_k), a_slabs, b_slabs, acc)
