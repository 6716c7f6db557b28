"""Lesson 6: lesson 4's kernel on a 1-D grid whose programs take their tiles in grouped order.

``GROUP_M=1`` is plain row-major order (program ``pid`` takes row ``pid // grid_n``); larger
groups walk ``GROUP_M`` rows of tiles column by column, so programs that run at the same time
share rows of ``A`` and columns of ``B`` through the L2 cache. Everything else (tiles, the
K-loop, masks, the cast on store) is lesson 4's kernel, line for line."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tmm_course import gpu, validate
from tmm_course.kernels.matmul import check_blocks, check_operands, output_for


@triton.jit
def grouped_tile(pid, grid_m, grid_n, GROUP_M: tl.constexpr):
    # program pid -> its tile (pid_m, pid_n): groups of GROUP_M rows, each walked column by
    # column; the last group may have fewer rows
    per_group = GROUP_M * grid_n  # programs in one full group
    first_m = (pid // per_group) * GROUP_M  # the group's first row of tiles
    rows = tl.minimum(grid_m - first_m, GROUP_M)  # rows in this group
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    return pid_m, pid_n


@triton.jit
def ordered_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          PRECISION: tl.constexpr, GROUP_M: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # 1. which tile of C is mine: from one program id, in grouped order (the only change)
    pid_m, pid_n = grouped_tile(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N),
                                GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # 2.-4. lesson 4's kernel as it was
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def ordered_matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    group_m: int = 8,
    precision: str = "tf32",
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 32,
    out: torch.Tensor | None = None,
    num_warps: int = 4,
    num_stages: int = 3,
) -> torch.Tensor:
    """C = A @ B with :func:`ordered_matmul_kernel`: lesson 4's :func:`~tmm_course.kernels.matmul`
    with the same arguments, plus ``group_m`` (1: row-major order)."""
    check_operands(a, b, precision)
    check_blocks((block_m, block_n, block_k))
    validate.positive("group_m", group_m)
    (m, k), n = a.shape, b.shape[1]
    out = output_for(a, b, out)
    if m == 0 or n == 0:
        return out
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    ordered_matmul_kernel[grid](
        a, b, out, m, n, k, *a.stride(), *b.stride(), *out.stride(),
        PRECISION=gpu.precision_for(precision) if a.dtype == torch.float32 else None,
        GROUP_M=group_m, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return out
