"""Problem sizes per backend: small on the interpreter, realistic on a GPU."""

from __future__ import annotations

from typing import TypeVar

from tmm_course.backend import GPU

T = TypeVar("T")


def per_backend(backend: str, *, cpu: T, gpu: T) -> T:
    """``cpu`` on Triton's interpreter, ``gpu`` on compiled Triton."""
    return gpu if backend == GPU else cpu
