"""On a GPU, replay a launcher call through Triton's interpreter to see every lane per view.

A compiled kernel's loads leave no trace: one that reads past an input's edge and masks only
its store gives the right answer on a GPU. The check therefore runs each case twice there: on
the GPU (the values it judges) and, from a copy taken before that run, on the CPU through the
interpreter with the memory guard on (the loads and stores it judges, and the picture). Every
``kernel[grid](...)`` and every call of a ``@triton.jit`` helper inside the block goes through
:class:`~triton.runtime.interpreter.InterpretedFunction` instead of the compiler.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

import tmm_course
from tmm_course.check import launches
from tmm_course.check.memory_guard import (
    OutOfBoundsAccess,
    Trace,
    only_these_tensors,
    raised_from,
)


def on_the_cpu(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` on the CPU with the same storage around it: same offset, shape and
    strides."""
    storage = x.untyped_storage()
    storage = storage.clone() if storage.device.type == "cpu" else storage.cpu()
    return torch.empty(0, dtype=x.dtype).set_(storage, x.storage_offset(), x.shape, x.stride())


@contextlib.contextmanager
def interpreted() -> Iterator[None]:
    """Inside the block, compiled kernels and their helpers run on Triton's interpreter."""
    import triton
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    from tmm_course.capstone import plain_launches

    twins: dict[Callable, interpreter.InterpretedFunction] = {}

    def twin(fn: Callable) -> interpreter.InterpretedFunction:
        if fn not in twins:
            twins[fn] = interpreter.InterpretedFunction(fn)
        return twins[fn]

    def run(self, *args, grid, warmup, **kwargs):
        return twin(self.fn).run(*args, grid=grid, warmup=warmup, **kwargs)

    def call(self, *args, **kwargs):  # a @triton.jit helper called inside a kernel
        scope = interpreter._patch_lang(self.fn)
        try:
            return twin(self.fn).rewrite()(*args, **kwargs)
        finally:
            scope.restore()

    patch_tensor = interpreter._patch_lang_tensor

    def patch_tensor_with_scalar_index(tensor, scope):
        # a loop bound is a one-element array there; numpy >= 2.4 refuses int() of it, which
        # Triton < 3.7's interpreter does (it squeezes it from 3.7 on)
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    saved = (JITFunction.run, JITFunction.__call__)
    interpret = triton.knobs.runtime.interpret
    device = tmm_course.DEVICE
    JITFunction.run, JITFunction.__call__ = run, call
    interpreter._patch_lang_tensor = patch_tensor_with_scalar_index
    triton.knobs.runtime.interpret = True
    # the replay's tensors are CPU copies: launchers (the course's too) that check or allocate
    # on tmm_course.DEVICE must see the CPU, or the replay stops and judges nothing
    tmm_course.DEVICE = torch.device("cpu")
    try:
        with plain_launches():  # matmul_fast's prepared launches are compiled ones: none here
            yield
    finally:
        JITFunction.run, JITFunction.__call__ = saved
        interpreter._patch_lang_tensor = patch_tensor
        triton.knobs.runtime.interpret = interpret
        tmm_course.DEVICE = device


@dataclass
class Replay:
    """CPU copies of one case's tensors, taken before the GPU ran it."""

    inputs: list[torch.Tensor | float]
    out: torch.Tensor

    @classmethod
    def before(cls, inputs: Sequence[torch.Tensor | float], out: torch.Tensor) -> Replay:
        copies = [on_the_cpu(x) if isinstance(x, torch.Tensor) else x for x in inputs]
        return cls(copies, on_the_cpu(out))

    def run(self, fn: Callable, names: Sequence[str]) -> Trace | OutOfBoundsAccess | None:
        """Run ``fn(*inputs, out)`` on the copies. Returns the record of its loads and stores;
        the error if a lane pointed outside every tensor; None when the replay could not
        finish (it then judges nothing)."""
        tensors = [x for x in self.inputs if isinstance(x, torch.Tensor)]
        views = dict(zip(names, [*tensors, self.out], strict=True))
        with contextlib.ExitStack() as stack:
            launched = stack.enter_context(launches.recording())
            trace = stack.enter_context(only_these_tensors(views, launched))
            stack.enter_context(interpreted())
            try:
                fn(*self.inputs, self.out)
            except Exception as error:  # the GPU run judged the values; this judges memory
                stray = raised_from(error, OutOfBoundsAccess)
                # a launcher that allocates on the GPU hands the interpreter memory the guard
                # cannot place: only an all-CPU replay proves that a lane left every tensor
                on_cpu = all(t.device.type == "cpu" for x in launched.seen for t in x.tensors)
                return stray if stray is not None and on_cpu else None
        return trace
