"""The memory a check hands a launcher: an output poisoned with NaN (or -1) inside a buffer of
canary values, and inputs with random room around them, so that a stray store changes a canary
and a stray load reads junk instead of crashing."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import tmm_course

CANARY = 12345.0  # written around every output; a store that lands outside changes it


@dataclass
class Guarded:
    """An output view inside a larger buffer of canary values (rows may be padded)."""

    buffer: torch.Tensor
    out: torch.Tensor
    region: torch.Tensor  # True where the buffer belongs to ``out``

    def canaries_intact(self) -> bool:
        outside = self.buffer[~self.region]
        return bool((outside == CANARY).all())


def _margin(pitch: int) -> int:
    """Canary room on each side: enough for blocks of up to 128 rows and columns to overshoot
    without touching memory that is not ours (the interpreter would crash on that)."""
    return 128 * (pitch + 1)


def guarded_output(shape: tuple[int, int], dtype: torch.dtype, row_gap: int = 0) -> Guarded:
    """An ``shape`` output poisoned with NaN (or -1), canaries before, after and between rows.

    ``row_gap > 0`` makes the output non-contiguous: its row stride is ``N + row_gap``.
    """
    m, n = shape
    pitch = n + row_gap
    margin = _margin(pitch)
    size = margin + m * pitch + margin
    device = tmm_course.DEVICE
    buffer = torch.full((size,), CANARY, dtype=dtype, device=device)
    out = buffer[margin : margin + m * pitch].view(m, pitch)[:, :n]
    region = torch.zeros(size, dtype=torch.bool, device=device)
    region[margin : margin + m * pitch].view(m, pitch)[:, :n] = True
    out.fill_(math.nan if dtype.is_floating_point else -1)
    return Guarded(buffer, out, region)


def padded_input(x: torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
    """``x`` with the same values, shape and strides, in a storage with random room around it
    (on ``device``, else ``x``'s), so that a load past its edge reads junk instead of
    crashing."""
    span = 1 + sum(
        (size - 1) * abs(stride) for size, stride in zip(x.shape, x.stride(), strict=True)
    )
    margin = _margin(max(x.stride(), default=1))
    buffer = torch.randn(margin + span + margin, device=device or x.device).to(x.dtype)
    view = buffer.as_strided(x.shape, x.stride(), margin)
    view.copy_(x)
    return view
