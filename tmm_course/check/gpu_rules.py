"""On the interpreter, refuse what a GPU would refuse to compile, with the reason: a kernel that
passes on a laptop should not fail the moment it meets a GPU.

Checked while :func:`like_a_gpu` is active: every ``tl.dot`` tile side is at least 16 (the
smallest the GPU's matrix instructions take)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

SMALLEST_DOT_SIDE = 16
DOT_TOO_SMALL = "Input shapes should have M >="  # how Triton's compiler refuses a small tl.dot


class GpuWouldReject(RuntimeError):
    """Code the interpreter runs but a GPU compiler refuses."""


def dot_shape_problem(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> str | None:
    """Why ``tl.dot`` of tiles shaped ``a_shape`` and ``b_shape`` would not compile on a GPU."""
    m, k = a_shape[-2:]
    n = b_shape[-1]
    small = {
        name: side for name, side in (("M", m), ("N", n), ("K", k)) if side < SMALLEST_DOT_SIDE
    }
    if not small:
        return None
    sides = ", ".join(f"BLOCK_{name} = {side}" for name, side in small.items())
    return (
        f"tl.dot needs every tile side to be at least {SMALLEST_DOT_SIDE} on a GPU, but here "
        f"{sides} (a is {m}x{k}, b is {k}x{n}). Fix: blocks of 16 or more; a ragged edge "
        "is handled by masks, not by smaller blocks."
    )


NOT_CONSTEXPR = "must be of type tl.constexpr"  # a block size passed as a runtime value


def not_constexpr(message: str) -> str:
    """Triton's refusal of a runtime block size, with the fix."""
    start = message.find(NOT_CONSTEXPR)
    said = message[max(0, message.rfind("(", 0, start) - 40) : start + len(NOT_CONSTEXPR)]
    return (
        f"a size that must be known when compiling was passed as a runtime value ({said.strip()})."
        " Fix: annotate the kernel's argument, e.g. BLOCK: tl.constexpr."
    )


def compiler_said(message: str) -> str:
    """The compiler's refusal of a small ``tl.dot``, in the words the interpreter check uses."""
    start = message.find(DOT_TOO_SMALL)
    line = message[start:].splitlines()[0] if start >= 0 else message.strip()
    return (
        f"tl.dot needs every tile side to be at least {SMALLEST_DOT_SIDE}; the compiler says: "
        f"{line.strip()[:200]}. Fix: blocks of 16 or more."
    )


@contextlib.contextmanager
def like_a_gpu() -> Iterator[None]:
    """Interpreted kernels inside the block raise :class:`GpuWouldReject` where a GPU's
    compiler would stop them (a Triton whose interpreter differs is left unchecked)."""
    try:
        from triton.runtime.interpreter import InterpreterBuilder
    except ImportError:  # pragma: no cover
        yield
        return
    original = getattr(InterpreterBuilder, "create_dot", None)
    if original is None:  # pragma: no cover - an interpreter without it
        yield
        return

    def create_dot(self, a, b, *rest, **kwargs):
        problem = dot_shape_problem(np.shape(a.data), np.shape(b.data))
        if problem:
            raise GpuWouldReject(problem)
        return original(self, a, b, *rest, **kwargs)

    InterpreterBuilder.create_dot = create_dot
    try:
        yield
    finally:
        InterpreterBuilder.create_dot = original
