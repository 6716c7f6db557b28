"""Lesson 3: a 2-D copy that walks any input through its strides, and its wrong-stride twin."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import validate


@triton.jit
def strided_copy_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :] * stride_xn, mask=mask)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, x, mask=mask)


@triton.jit
def swapped_strides_copy_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # The trap: the row index walks the column stride and vice versa (square inputs only).
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs_m[:, None] * stride_xn + offs_n[None, :] * stride_xm, mask=mask)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, x, mask=mask)


def _copy(kernel, x: torch.Tensor, block_m: int, block_n: int) -> torch.Tensor:
    validate.tensor("x", x, ndim=2)
    validate.on_device(tmm_course.DEVICE, x=x)
    validate.dtype("x", x, (torch.float32, torch.float16, torch.int32), tmm_course.BACKEND)
    validate.power_of_two("block_m", block_m)
    validate.power_of_two("block_n", block_n)
    m, n = x.shape
    out = torch.full(
        (m, n), float("nan") if x.is_floating_point() else -1, dtype=x.dtype, device=x.device
    )
    if m and n:
        grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
        kernel[grid](x, out, m, n, *x.stride(), *out.stride(), BLOCK_M=block_m, BLOCK_N=block_n)
    return out


def strided_copy(x: torch.Tensor, block_m: int = 16, block_n: int = 16) -> torch.Tensor:
    """A contiguous copy of any 2-D view ``x`` (transposed, sliced...), read via its strides."""
    return _copy(strided_copy_kernel, x, block_m, block_n)


def swapped_strides_copy(x: torch.Tensor, block_m: int = 16, block_n: int = 16) -> torch.Tensor:
    """The buggy copy that pairs each index with the other axis's stride (square ``x`` only)."""
    if x.dim() == 2 and x.shape[0] != x.shape[1]:
        raise validate.KernelInputError(
            f"x has shape {tuple(x.shape)}; this demonstration reads out of bounds unless x is "
            "square. Expected an n x n tensor."
        )
    return _copy(swapped_strides_copy_kernel, x, block_m, block_n)


def layouts(m: int, n: int) -> dict[str, torch.Tensor]:
    """``m x n`` views whose storage holds its own addresses 0, 1, 2, ..."""

    def strip(size: int) -> torch.Tensor:
        return torch.arange(size, dtype=torch.float32, device=tmm_course.DEVICE)

    return {
        "row-major": strip(m * n).view(m, n),
        "column-major": strip(m * n).view(n, m).t(),
        "transposed view": strip(n * m).view(n, m).t(),
        "sliced view x[1::2, 1:]": strip(2 * m * (n + 1)).view(2 * m, n + 1)[1::2, 1:],
    }


@dataclass(frozen=True)
class StridePicture:
    """A view, the addresses the kernel read for each (i, j), and the storage strip."""

    name: str
    shape: tuple[int, int]
    strides: tuple[int, int]
    offset: int
    addresses: np.ndarray  # (m, n): what the kernel loaded = where (i, j) lives
    storage_size: int


def stride_picture(name: str, view: torch.Tensor) -> StridePicture:
    """Run the strided copy over ``view`` and keep the addresses it read."""
    addresses = strided_copy(view).cpu().numpy().astype(np.int64)
    return StridePicture(
        name,
        tuple(view.shape),
        tuple(view.stride()),
        view.storage_offset(),
        addresses,
        view.untyped_storage().nbytes() // view.element_size(),
    )
