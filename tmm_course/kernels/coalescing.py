"""Lesson 5: why a transpose is tiled. A warp's 32 lanes that touch neighbouring addresses share
a few 32-byte memory sectors (the access is *coalesced*); lanes that touch addresses a row apart
need a sector each. A transpose that gives each program one row of ``x`` reads rows but writes
columns of ``out``; a tiled one (lesson 3's strided copy of the view ``x.t()``) works on square
tiles, which the compiler can read and write a row at a time."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tmm_course import validate
from tmm_course.kernels.strides import strided_copy

SECTOR_BYTES = 32
WARP = 32


def sectors_per_warp(stride_elements: int, itemsize: int = 4) -> int:
    """The 32-byte sectors one warp touches when its 32 lanes access elements
    ``stride_elements`` apart (1: neighbours, a row's length: one per row)."""
    return len({lane * stride_elements * itemsize // SECTOR_BYTES for lane in range(WARP)})


@triton.jit
def row_transpose_kernel(x_ptr, out_ptr, M, N, BLOCK_N: tl.constexpr):
    # one program per row i of x: read it left to right, write it down column i of out
    i = tl.program_id(axis=0)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        row = tl.load(x_ptr + i * N + offs, mask=offs < N)
        tl.store(out_ptr + offs * M + i, row, mask=offs < N)  # lanes M elements apart


def row_transpose(x: torch.Tensor, block_n: int = 256) -> torch.Tensor:
    """``x.t()`` as a contiguous tensor, one program per row of a contiguous ``x``."""
    validate.tensor("x", x, ndim=2)
    if not x.is_contiguous():
        raise validate.KernelInputError(
            f"x has strides {x.stride()}; this kernel expects a contiguous x. Fix: x.contiguous()."
        )
    m, n = x.shape
    out = torch.empty((n, m), dtype=x.dtype, device=x.device)
    if m and n:
        row_transpose_kernel[(m,)](x, out, m, n, BLOCK_N=block_n)
    return out


def tiled_transpose(x: torch.Tensor, block: int = 64) -> torch.Tensor:
    """``x.t()`` as a contiguous tensor: lesson 3's strided copy of the view ``x.t()``."""
    return strided_copy(x.t(), block_m=block, block_n=block)


TRANSPOSES = {
    "tiled (lesson 3's copy of x.t())": tiled_transpose,
    "one row per program": row_transpose,
    "torch: x.t().contiguous()": lambda x: x.t().contiguous(),
}


def bandwidth_gbs(x: torch.Tensor, rounds: int = 3) -> dict[str, float]:
    """Each transpose of ``x``, checked, then timed in turn, L2 flushed before each call
    (:func:`~tmm_course.timing.cold_cache_ms`: the bytes come from DRAM): bytes read plus
    bytes written per second (a GPU only)."""
    from tmm_course.timing import cold_cache_ms, interleaved

    for name, fn in TRANSPOSES.items():
        if not torch.equal(fn(x), x.t()):
            raise AssertionError(f"{name} did not transpose x")
    moved = 2 * x.numel() * x.element_size()
    runs = {name: (lambda fn=fn: fn(x)) for name, fn in TRANSPOSES.items()}
    ms = interleaved(runs, rounds, rep_ms=100, timer=cold_cache_ms)
    return {name: moved / (ms[name] * 1e-3) / 1e9 for name in TRANSPOSES}
