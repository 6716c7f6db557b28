"""How an exercise lays out a 2-D input: contiguous, or a view of a larger tensor, so that a
kernel that builds addresses from the shape instead of the strides reads the wrong cells."""

from __future__ import annotations

import torch

LAYOUTS = ("contiguous", "transposed view", "sliced view", "every other column")


def laid_out(gen: torch.Generator, m: int, n: int, layout: str, dtype=torch.float32):
    """A random ``m x n`` input under ``layout``: contiguous, transposed (a view of an
    ``n x m`` tensor), sliced (every other row, columns 1 to n of a wider tensor) or every
    other column."""
    if layout == "transposed view":
        return torch.randn(n, m, generator=gen).to(dtype).t()
    if layout == "sliced view":
        return torch.randn(2 * m, n + 3, generator=gen).to(dtype)[::2, 1 : n + 1]
    if layout == "every other column":
        return torch.randn(m, 2 * n, generator=gen).to(dtype)[:, ::2]
    if layout != "contiguous":
        raise ValueError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    return torch.randn(m, n, generator=gen).to(dtype)
