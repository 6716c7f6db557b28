"""On Triton's interpreter, refuse loads and stores outside the tensors a check handed out.

A compiled kernel that strays past its tensors usually reads junk or faults cleanly on the GPU;
the interpreter instead dereferences the raw address in this Python process, and a wild
pointer kills the notebook's kernel. While :func:`only_these_tensors` is active, every
unmasked lane of ``tl.load``/``tl.store`` must fall inside one of the given tensors' storages,
or the launch stops with :class:`OutOfBoundsAccess`, which says where the lane pointed.
"""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def only_these_tensors(tensors: Sequence[torch.Tensor]) -> Iterator[None]:
    """Interpreter launches inside this block may touch only ``tensors``' storages."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store
    ranges = _ranges(tensors)

    def check(kind: str, ptrs, mask) -> None:
        size = np.dtype(interpreter._get_np_dtype(ptrs.get_element_ty())).itemsize
        stray = _stray(ptrs.data, np.asarray(mask.data, dtype=bool), size, ranges)
        if stray.size:
            raise OutOfBoundsAccess(kind, int(stray[0]), int(stray.size))

    def guarded_load(self, ptrs, mask, other, cache_policy, is_volatile):
        check("load", ptrs, mask)
        return load(self, ptrs, mask, other, cache_policy, is_volatile)

    def guarded_store(self, ptrs, value, mask, cache_policy):
        check("store", ptrs, mask)
        return store(self, ptrs, value, mask, cache_policy)

    builder.create_masked_load, builder.create_masked_store = guarded_load, guarded_store
    try:
        yield
    finally:
        builder.create_masked_load, builder.create_masked_store = load, store
