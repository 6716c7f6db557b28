"""Lesson 2: a column plus a row is a tile, and the same trick builds a tile of pointer offsets."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import validate

COLUMN, ROW, SUM = 0, 1, 2  # what broadcast_kernel stores


@triton.jit
def broadcast_kernel(col_ptr, row_ptr, out_ptr, M, N, WHAT: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col = tl.load(col_ptr + offs_m, mask=offs_m < M, other=0)  # (BLOCK_M,)
    row = tl.load(row_ptr + offs_n, mask=offs_n < N, other=0)  # (BLOCK_N,)
    zeros = tl.zeros((BLOCK_M, BLOCK_N), dtype=col.dtype)
    if WHAT == 0:
        tile = col[:, None] + zeros  # (BLOCK_M, 1) stretched along the columns
    elif WHAT == 1:
        tile = row[None, :] + zeros  # (1, BLOCK_N) stretched along the rows
    else:
        tile = col[:, None] + row[None, :]  # (BLOCK_M, 1) + (1, BLOCK_N) -> (BLOCK_M, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], tile, mask=mask)


@triton.jit
def offsets_kernel(out_ptr, M, N, stride_0, stride_1, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offsets = offs_m[:, None] * stride_0 + offs_n[None, :] * stride_1  # where (i, j) lives
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], offsets, mask=mask)


def broadcast(
    col: torch.Tensor, row: torch.Tensor, what: int = SUM, block_m: int = 16, block_n: int = 16
) -> torch.Tensor:
    """The ``len(col) x len(row)`` tile the kernel builds: the column stretched (``COLUMN``),
    the row stretched (``ROW``), or ``col[:, None] + row[None, :]`` (``SUM``)."""
    validate.tensor("col", col, ndim=1)
    validate.tensor("row", row, ndim=1)
    validate.on_device(tmm_course.DEVICE, col=col, row=row)
    validate.same_dtype(col=col, row=row)
    validate.dtype("col", col, (torch.float32, torch.int32), tmm_course.BACKEND)
    validate.power_of_two("block_m", block_m)
    validate.power_of_two("block_n", block_n)
    if what not in (COLUMN, ROW, SUM):
        raise validate.KernelInputError(f"what={what!r}: expected COLUMN, ROW or SUM (0, 1, 2).")
    m, n = col.numel(), row.numel()
    out = torch.full((m, n), -1, dtype=col.dtype, device=col.device)
    if m and n:
        grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
        broadcast_kernel[grid](
            col.contiguous(),
            row.contiguous(),
            out,
            m,
            n,
            WHAT=what,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
        )
    return out


def element_offsets(
    m: int, n: int, stride_0: int, stride_1: int, block_m: int = 16, block_n: int = 16
) -> torch.Tensor:
    """The ``m x n`` tile of element offsets ``i*stride_0 + j*stride_1`` built by the kernel."""
    validate.positive("M", m)
    validate.positive("N", n)
    for name, stride in (("stride_0", stride_0), ("stride_1", stride_1)):
        if isinstance(stride, bool) or not isinstance(stride, int):
            raise validate.KernelInputError(
                f"{name}={stride!r}: expected an int, like x.stride(0)."
            )
    validate.power_of_two("block_m", block_m)
    validate.power_of_two("block_n", block_n)
    out = torch.full((m, n), -1, dtype=torch.int32, device=tmm_course.DEVICE)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    offsets_kernel[grid](out, m, n, stride_0, stride_1, BLOCK_M=block_m, BLOCK_N=block_n)
    return out


def broadcast_tiles(col: torch.Tensor, row: torch.Tensor) -> dict[str, np.ndarray]:
    """The three tiles the kernel builds: column stretched, row stretched, and their sum."""
    return {
        "col[:, None]": broadcast(col, row, COLUMN).cpu().numpy(),
        "row[None, :]": broadcast(col, row, ROW).cpu().numpy(),
        "col[:, None] + row[None, :]": broadcast(col, row, SUM).cpu().numpy(),
    }
