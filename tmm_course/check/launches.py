"""Which Triton kernels a launcher started, and with which tensors, on either backend.

While :func:`recording` is active, every ``kernel[grid](...)`` (compiled or interpreted, and
the course's own low-overhead launches) is noted with the kernel's name and module and the
tensors it was handed. A check uses this to tell a Triton kernel from a torch one-liner, the
learner's kernel from the course's own, and memory the launcher allocated for its own launches
(a ``.contiguous()`` copy, a float32 scratch output) from memory it should not touch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

COURSE_PACKAGE = "tmm_course"


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the kernel's name and module, and the tensors among its arguments
    (with the kernel itself and every argument, for compiling it ahead for a GPU)."""

    kernel: str
    module: str
    tensors: tuple[torch.Tensor, ...]
    jit: object = field(default=None, compare=False, repr=False)
    args: tuple = field(default=(), compare=False, repr=False)
    kwargs: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def from_the_course(self) -> bool:
        """A kernel that ships with tmm_course (not one written in the notebook)."""
        return self.module == COURSE_PACKAGE or self.module.startswith(COURSE_PACKAGE + ".")


@dataclass
class Launches:
    """Every launch noted while :func:`recording` was active, in order."""

    seen: list[Launch] = field(default_factory=list)
    listeners: list[Callable[[Launch], None]] = field(default_factory=list)
    # called once a launch has returned (on a GPU: queued), with that launch
    finished: list[Callable[[Launch], None]] = field(default_factory=list)

    def note(self, kernel: object, args: tuple, kwargs: dict) -> Launch:
        fn = getattr(kernel, "fn", kernel)
        tensors = tuple(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
        launch = Launch(
            getattr(fn, "__name__", "kernel"),
            getattr(fn, "__module__", "") or "",
            tensors,
            kernel,
            tuple(args),
            dict(kwargs),
        )
        self.seen.append(launch)
        for listener in self.listeners:
            listener(launch)
        return launch

    def done(self, launch: Launch) -> None:
        for listener in self.finished:
            listener(launch)

    @property
    def kernels(self) -> list[str]:
        return [launch.kernel for launch in self.seen]


def _launch_classes() -> list[type]:
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - a Triton without an interpreter
        pass
    return classes


@contextlib.contextmanager
def recording() -> Iterator[Launches]:
    """Note every kernel launch inside the block (both backends)."""
    from tmm_course.capstone import plain_launches

    record = Launches()
    patched: list[tuple[type, str, object]] = []

    def wrap_run(original):
        def run(self, *args, grid, warmup, **kwargs):
            if warmup:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            launch = record.note(self, args, kwargs)
            result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
            record.done(launch)
            return result

        return run

    for cls in _launch_classes():
        patched.append((cls, "run", cls.run))
        cls.run = wrap_run(cls.run)

    try:
        with plain_launches():  # the capstone's quick launches skip kernel.run once warm
            yield record
    finally:
        for cls, name, original in reversed(patched):
            setattr(cls, name, original)
