"""On Triton's interpreter, refuse loads and stores outside the tensors a check handed out.

A compiled kernel that strays past its tensors usually reads junk or faults cleanly on the GPU;
the interpreter instead dereferences the raw address in this Python process, and a wild
pointer kills the notebook's kernel. While :func:`only_these_tensors` is active, every
unmasked lane of ``tl.load``/``tl.store`` must fall inside one of the given tensors' storages,
or the launch stops with :class:`OutOfBoundsAccess`, which says where the lane pointed.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import torch


class OutOfBoundsAccess(RuntimeError):
    """A kernel lane loaded or stored outside every allowed tensor."""

    def __init__(self, kind: str, address: int, lanes: int) -> None:
        self.kind = kind
        super().__init__(
            f"{kind} outside every tensor the kernel was given ({lanes} lane(s), first at "
            f"address {address:#x}): a mask is missing or an offset is wrong"
        )


def _ranges(tensors: Sequence[torch.Tensor]) -> np.ndarray:
    spans = []
    for t in tensors:
        storage = t.untyped_storage()
        spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    return np.array(spans, dtype=np.uint64).reshape(-1, 2)


def _stray(ptrs: np.ndarray, mask: np.ndarray, size: int, ranges: np.ndarray) -> np.ndarray:
    active = np.broadcast_to(ptrs, mask.shape)[mask] if mask.shape else ptrs[mask]
    active = active.astype(np.uint64).ravel()
    inside = np.zeros(active.shape, dtype=bool)
    for start, end in ranges:
        inside |= (active >= start) & (active + np.uint64(size) <= end)
    return active[~inside]


# the leading parameters the guard reads; the rest (cache and eviction hints) differ between
# Triton versions (3.6: cache_modifier, eviction_policy; 3.9: cache_policy) and pass through
LOAD_PARAMETERS = ("self", "ptrs", "mask", "other")
STORE_PARAMETERS = ("self", "ptrs", "value", "mask")


def unsupported_reason() -> str | None:
    """Why the guard cannot hook this Triton's interpreter, or None if it can."""
    import triton

    try:
        from triton.runtime import interpreter
    except ImportError as exc:  # pragma: no cover - an interpreter moved elsewhere
        return f"triton {triton.__version__} has no triton.runtime.interpreter ({exc})"
    builder = getattr(interpreter, "InterpreterBuilder", None)
    hooks = {"create_masked_load": LOAD_PARAMETERS, "create_masked_store": STORE_PARAMETERS}
    if builder is None or not hasattr(interpreter, "_get_np_dtype"):
        return f"triton {triton.__version__}'s interpreter has no InterpreterBuilder to hook"
    for name, expected in hooks.items():
        method = getattr(builder, name, None)
        if method is None:
            return f"triton {triton.__version__}'s interpreter has no {name}"
        leading = tuple(inspect.signature(method).parameters)[: len(expected)]
        if leading != expected:
            return f"triton {triton.__version__}'s {name} takes {leading}, not {expected} first"
    return None


@contextlib.contextmanager
def only_these_tensors(tensors: Sequence[torch.Tensor]) -> Iterator[None]:
    """Interpreter launches inside this block may touch only ``tensors``' storages.

    On a Triton whose interpreter the guard does not know, it warns once and guards nothing:
    the checks still run, with the canaries and poison as their only watch."""
    reason = unsupported_reason()
    if reason is not None:
        _warn_unguarded(reason)
        yield
        return
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store
    ranges = _ranges(tensors)

    def check(kind: str, ptrs, mask) -> None:
        size = np.dtype(interpreter._get_np_dtype(ptrs.get_element_ty())).itemsize
        stray = _stray(ptrs.data, np.asarray(mask.data, dtype=bool), size, ranges)
        if stray.size:
            raise OutOfBoundsAccess(kind, int(stray[0]), int(stray.size))

    def guarded_load(self, ptrs, mask, *rest, **hints):
        check("load", ptrs, mask)
        return load(self, ptrs, mask, *rest, **hints)

    def guarded_store(self, ptrs, value, mask, *rest, **hints):
        check("store", ptrs, mask)
        return store(self, ptrs, value, mask, *rest, **hints)

    builder.create_masked_load, builder.create_masked_store = guarded_load, guarded_store
    try:
        yield
    finally:
        builder.create_masked_load, builder.create_masked_store = load, store


@functools.cache
def _warn_unguarded(reason: str) -> None:
    warnings.warn(
        f"The memory guard cannot hook this Triton: {reason}. Checks still run, but a load or "
        "store far outside its tensors may crash the notebook's kernel instead of being "
        "reported. Fix: pip install 'triton>=3.6,<3.10' (the versions the course is tested on).",
        RuntimeWarning,
        stacklevel=4,
    )
