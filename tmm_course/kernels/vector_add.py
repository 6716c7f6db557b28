"""Lesson 0: the smallest useful kernel, ``out = x + y`` over a 1-D grid of programs."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import validate


@triton.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)  # which block of the vector is mine?
    offsets = pid * BLOCK + tl.arange(0, BLOCK)  # the BLOCK indices I own
    mask = offsets < n  # the last block may hang over the end
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor, block: int = 128) -> torch.Tensor:
    """Return ``x + y`` computed by :func:`vector_add_kernel`, ``cdiv(n, block)`` programs."""
    validate.tensor("x", x, ndim=1)
    validate.tensor("y", y, ndim=1)
    validate.on_device(tmm_course.DEVICE, x=x, y=y)
    validate.same_shape(x=x, y=y)
    validate.same_dtype(x=x, y=y)
    validate.dtype("x", x, (torch.float32, torch.float16, torch.bfloat16), tmm_course.BACKEND)
    validate.power_of_two("block", block)
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        vector_add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    return out
