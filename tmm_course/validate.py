"""Input checks for the kernels' launchers: each error says what was wrong, what was
expected, and how to fix it."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from tmm_course.backend import INTERPRETER


class KernelInputError(ValueError):
    """A launcher was given input its kernel cannot handle."""


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tensor(name: str, value: object, ndim: int | None = None) -> torch.Tensor:
    """``value`` must be a torch tensor (of ``ndim`` dimensions)."""
    if not isinstance(value, torch.Tensor):
        raise KernelInputError(
            f"{name} is a {type(value).__name__}, expected a torch.Tensor. "
            f"Fix: {name} = torch.as_tensor({name}, device=tmm_course.DEVICE)."
        )
    if ndim is not None and value.dim() != ndim:
        raise KernelInputError(
            f"{name} has {value.dim()} dimension(s) (shape {tuple(value.shape)}), "
            f"expected {ndim}. Fix: pass a {ndim}-D tensor, e.g. {name}.reshape(...)."
        )
    return value


def dtype(name: str, value: torch.Tensor, allowed: Iterable[torch.dtype], backend: str) -> None:
    """``value.dtype`` must be one of ``allowed``, and bfloat16 needs a GPU."""
    allowed = tuple(allowed)
    if value.dtype not in allowed:
        names = ", ".join(_name(d) for d in allowed)
        raise KernelInputError(
            f"{name} has dtype {_name(value.dtype)}, expected one of: {names}. "
            f"Fix: {name}.to(torch.{_name(allowed[0])})."
        )
    if value.dtype == torch.bfloat16 and backend != INTERPRETER:
        from tmm_course import gpu

        here = gpu.current()
        if here is not None and not here.bfloat16:
            raise KernelInputError(
                f"{name} is bfloat16, which the course runs only where tensor cores multiply "
                f"it, compute capability 8.0 (Ampere) or newer; {here.name} is "
                f"{here.capability[0]}.{here.capability[1]}, where Triton compiles a bfloat16 "
                f"tl.dot onto plain FMA instructions. Fix: {name}.to(torch.float16)."
            )
    if value.dtype == torch.bfloat16 and backend == INTERPRETER:
        raise KernelInputError(
            f"{name} is bfloat16, which Triton's interpreter computes wrongly (its tl.dot "
            "multiplies raw bit patterns). Expected float16 or float32 on the CPU. "
            f"Fix: {name}.to(torch.float16), or run on a GPU."
        )


def same_dtype(**tensors: torch.Tensor) -> None:
    """All tensors share one dtype."""
    dtypes = {n: t.dtype for n, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{n} is {_name(d)}" for n, d in dtypes.items())
        first = next(iter(dtypes.values()))
        raise KernelInputError(
            f"Mixed dtypes: {listed}; expected one dtype for all. "
            f"Fix: convert them, e.g. .to(torch.{_name(first)})."
        )


def on_device(expected: torch.device, **tensors: torch.Tensor) -> None:
    """Every tensor lives on ``expected`` (the backend's device)."""
    for n, t in tensors.items():
        if t.device.type != expected.type:
            raise KernelInputError(
                f"{n} is on {t.device}, but this backend runs on {expected}. "
                f"Expected all tensors on tmm_course.DEVICE. Fix: {n} = {n}.to(tmm_course.DEVICE)."
            )


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes ``t`` may touch: [first, last + 1) (torch strides are never negative)."""
    if t.numel() == 0:
        return 0, 0
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    start = t.data_ptr()
    return start, start + (last + 1) * t.element_size()


def _share_elements(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether two tensors whose byte ranges meet share an element (interleaved views of one
    buffer, such as its left and right columns, do not); asked only when the ranges meet."""
    if x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr():
        return True  # two allocations meet only if they share memory
    if x.element_size() != y.element_size():
        return True  # one buffer seen as two dtypes: the ranges decide
    every = torch.arange(x.untyped_storage().nbytes() // x.element_size(), device=x.device)
    own = [every.as_strided(t.shape, t.stride(), t.storage_offset()).flatten() for t in (x, y)]
    return bool(torch.isin(own[0], own[1]).any())


def no_overlap(out: torch.Tensor, **inputs: torch.Tensor) -> None:
    """``out`` shares no memory with any input: a kernel writing ``out`` tile by tile while it
    still reads an input there would read its own results and return wrong values."""
    first, end = _span(out)
    for n, t in inputs.items():
        lo, hi = _span(t)
        if t.device == out.device and lo < end and first < hi and _share_elements(out, t):
            raise KernelInputError(
                f"out shares memory with {n}: the kernel would overwrite {n} while it still "
                f"reads it, and return wrong values. Expected an out of its own. Fix: leave "
                f"out= away (a new tensor is returned), or give out=torch.empty_like(...); to "
                f"put the product into {n}, copy it there afterwards: {n}.copy_(result)."
            )


def same_shape(**tensors: torch.Tensor) -> None:
    """All tensors have one shape."""
    shapes = {n: tuple(t.shape) for n, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{n} {s}" for n, s in shapes.items())
        raise KernelInputError(f"Shapes differ: {listed}; expected one shape for all.")


def power_of_two(name: str, value: object, minimum: int = 1) -> int:
    """Block sizes are powers of two (``tl.arange`` needs it), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise KernelInputError(f"{name}={value!r} is not an int; expected a power of two like 16.")
    if value < minimum or value & (value - 1):
        below = 1 << max(value.bit_length() - 1, 0)
        hint = max(minimum, below)
        raise KernelInputError(
            f"{name}={value} is not a power of two >= {minimum}; tl.arange needs a power of "
            f"two. Fix: {name}={hint} or {hint * 2}."
        )
    return value


def positive(name: str, value: object) -> int:
    """Sizes are positive ints."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise KernelInputError(f"{name}={value!r}: expected a positive int, like {name}=8.")
    return value
