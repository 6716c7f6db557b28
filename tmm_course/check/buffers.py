"""The memory a judge hands a launcher, the same for the check and the grader: each input in a
storage of poison (NaN, or -1 for integers: before it, after it and in the gaps of a strided
view), so that a load past its edge reads poison, which no product or copy hides; the output
poisoned inside a buffer of canary values, so that a stray store changes a canary."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import tmm_course

CANARY = 12345.0  # written around every output; a store that lands outside changes it


def poison(dtype: torch.dtype) -> float:
    """What memory nothing should read holds: NaN, or -1 for an integer dtype."""
    return math.nan if dtype.is_floating_point else -1


def _margin(pitch: int) -> int:
    """Room on each side: enough for blocks of up to 128 rows and columns to overshoot
    without touching memory that is not ours (the interpreter would crash on that)."""
    return 128 * (pitch + 1)


@dataclass
class Framed:
    """A tensor as a judge hands it out: a 1-D storage and the view a launcher receives."""

    storage: torch.Tensor
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int

    def view(self, storage: torch.Tensor | None = None) -> torch.Tensor:
        """The view, on this storage or on ``storage`` (what came back from a worker)."""
        base = self.storage if storage is None else storage
        return torch.as_strided(base, self.size, self.stride, self.offset)

    def covered(self) -> torch.Tensor:
        """Which storage elements the view reaches."""
        mask = torch.zeros(self.storage.numel(), dtype=torch.bool, device=self.storage.device)
        index = torch.arange(self.storage.numel(), device=self.storage.device)
        mask[torch.as_strided(index, self.size, self.stride, self.offset).reshape(-1)] = True
        return mask


def framed(x: torch.Tensor, device: torch.device | str | None = None) -> Framed:
    """``x`` (same values, shape and strides) in a storage of :func:`poison` on ``device``
    (else ``x``'s): poison before and after it and in the gaps of a strided view."""
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(x.shape, x.stride(), strict=True) if s)
    margin = _margin(max(x.stride(), default=1))
    storage = torch.full(
        (margin + span + margin,), poison(x.dtype), dtype=x.dtype, device=device or x.device
    )
    frame = Framed(storage, tuple(x.shape), tuple(x.stride()), margin)
    frame.view().copy_(x)
    return frame


def padded_input(x: torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
    """The view of :func:`framed`: what the check hands a launcher for ``x``."""
    return framed(x, device).view()


@dataclass
class Guarded:
    """An output view inside a larger buffer of canary values (rows may be padded), and what
    it held before the launches."""

    frame: Framed
    out: torch.Tensor
    poison: torch.Tensor  # what ``out`` held before the launches

    @property
    def buffer(self) -> torch.Tensor:
        return self.frame.storage

    @property
    def region(self) -> torch.Tensor:
        """True where the buffer belongs to ``out``."""
        return self.frame.covered()

    def canaries_intact(self) -> bool:
        return bool((self.buffer[~self.region] == CANARY).all())


def guarded_output(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    row_gap: int = 0,
    *,
    device: torch.device | str | None = None,
    fill: torch.Tensor | None = None,
) -> Guarded:
    """A ``shape`` output (one or two sides) inside canaries before, after and between rows,
    holding :func:`poison`, or ``fill`` (what an update such as C = alpha*A@B + beta*C starts
    from, or random numbers, so that no kernel can tell a judge's output by its NaN).

    ``row_gap > 0`` makes the output non-contiguous: its row stride is ``N + row_gap``.
    """
    rows, cols = (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0])
    pitch = cols + row_gap
    margin = _margin(pitch)
    device = device or tmm_course.DEVICE
    storage = torch.full((margin + rows * pitch + margin,), CANARY, dtype=dtype, device=device)
    stride = (pitch, 1) if len(shape) == 2 else (1,)
    frame = Framed(storage, tuple(shape), stride, margin)
    out = frame.view()
    if fill is None:
        out.fill_(poison(dtype))
    else:
        out.copy_(fill)
    return Guarded(frame, out, out.detach().clone())


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bits (NaN equal to the same NaN)."""
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    if a.shape != b.shape or a.element_size() != b.element_size():
        return False
    return bool(torch.equal(a.view(bits[a.element_size()]), b.view(bits[b.element_size()])))


def as_bytes(storage: torch.Tensor) -> bytes:
    """A buffer's bytes, for the grader's pipe: any dtype numpy lacks (float8) goes as raw bytes,
    which ``torch.frombuffer`` reads back in the buffer's own dtype."""
    return storage.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
