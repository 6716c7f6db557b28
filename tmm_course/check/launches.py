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
from pathlib import Path

import torch

import tmm_course
from tmm_course import hints

COURSE_PACKAGE = "tmm_course"
COURSE_FOLDER = Path(tmm_course.__file__).resolve().parent


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
    grid: object = field(default=None, compare=False, repr=False)  # a tuple, or grid(meta)
    # what an autotuner (@triton.autotune) does to the launch's arguments around it, by
    # parameter name: "zero" (reset_to_zero, before it), "restore" (restore_value: after it,
    # as they were before it)
    hooks: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def from_the_course(self) -> bool:
        """A kernel that ships with tmm_course (not one written in the notebook)."""
        return (
            self.module == COURSE_PACKAGE
            or self.module.startswith(COURSE_PACKAGE + ".")
            or (self.jit is not None and from_the_course(self.jit))
        )


def from_the_course(fn: object) -> bool:
    """Whether a Python function (or a ``@triton.jit`` kernel) ships with tmm_course: by its
    module, or by the file its code was compiled from (a course kernel rebuilt under a new name
    or module keeps that)."""
    fn = getattr(fn, "fn", fn)
    module = getattr(fn, "__module__", "") or ""
    if module == COURSE_PACKAGE or module.startswith(COURSE_PACKAGE + "."):
        return True
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    try:
        return Path(code.co_filename).resolve().is_relative_to(COURSE_FOLDER)
    except (OSError, ValueError):
        return False


@dataclass
class Launches:
    """Every launch noted while :func:`recording` was active, in order."""

    seen: list[Launch] = field(default_factory=list)
    listeners: list[Callable[[Launch], None]] = field(default_factory=list)
    # called once a launch has returned (on a GPU: queued), with that launch
    finished: list[Callable[[Launch], None]] = field(default_factory=list)
    # an autotuner's resets and restores due before the next launch
    pending: dict = field(default_factory=dict)

    def note(self, kernel: object, args: tuple, kwargs: dict, grid: object = None) -> Launch:
        fn = getattr(kernel, "fn", kernel)
        hooks, self.pending = self.pending, {}
        launch = Launch(
            getattr(fn, "__name__", "kernel"),
            getattr(fn, "__module__", "") or "",
            tuple(tensors_of(a) for a in (*args, *kwargs.values()) if tensors_of(a) is not None),
            kernel,
            tuple(args),
            dict(kwargs),
            grid,
            hooks,
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


def tensors_of(argument: object) -> torch.Tensor | None:
    """The tensor a kernel argument hands the kernel: the tensor itself, or the base of a host
    ``TensorDescriptor``; None for a scalar."""
    if isinstance(argument, torch.Tensor):
        return argument
    base = getattr(argument, "base", None)
    if isinstance(base, torch.Tensor) and hasattr(argument, "block_shape"):
        return base
    return None


def _launch_classes() -> list[type]:
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - a Triton without an interpreter
        pass
    return classes


def arguments(launch: Launch) -> dict[str, object]:
    """The launch's arguments by the kernel's parameter names, defaults filled in (launch
    options such as ``num_warps`` left out); ``TypeError`` when they do not fit its
    signature."""
    import inspect

    signature = inspect.signature(getattr(launch.jit, "fn", launch.jit))
    bound = signature.bind_partial(
        *launch.args, **{k: v for k, v in launch.kwargs.items() if k in signature.parameters}
    )
    bound.apply_defaults()
    return dict(bound.arguments)


def grid_of(launch: Launch) -> tuple[int, int, int]:
    """The launch's grid as three ints (a ``grid(meta)`` function called as Triton calls it,
    on the launch's :func:`arguments`); ``ValueError`` when it is not made of integers."""
    grid = launch.grid
    if callable(grid):
        grid = grid(arguments(launch))
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    try:
        sizes = [int(g) for g in grid] + [1] * (3 - len(grid))
    except (TypeError, ValueError) as error:
        raise ValueError(f"the launch grid {grid!r} is not made of integers") from error
    return sizes[0], sizes[1], sizes[2]


def _noting_hooks(original: Callable, record: Launches) -> Callable:
    """``Autotuner.run`` that notes, for the launches it makes, what its reset_to_zero and
    restore_value hooks do (a pre_hook or post_hook of the learner's own is Python: it is not
    replayed, and Triton then runs neither reset nor restore)."""

    def run(self, *args, **kwargs):
        zero = list(getattr(self, "reset_to_zero", None) or ())
        restore = list(getattr(self, "restore_value", None) or ())
        mine = getattr(self, "user_defined_pre_hook", False) or not hasattr(self, "pre_hook")
        if mine or not (zero or restore):
            return original(self, *args, **kwargs)
        pre = self.pre_hook

        def noted(nargs, reset_only=False):
            record.pending.setdefault("zero", zero)
            if not reset_only and restore and not getattr(self, "user_defined_post_hook", False):
                record.pending["restore"] = restore
            return pre(nargs, reset_only)

        self.pre_hook = noted
        try:
            return original(self, *args, **kwargs)
        finally:
            self.pre_hook = pre
            record.pending = {}

    return run


@contextlib.contextmanager
def recording(dry: bool = False) -> Iterator[Launches]:
    """Note every kernel launch inside the block (both backends). ``dry``: note each launch
    and skip it (nothing runs: what a launcher would launch on a problem too large to run)."""
    from tmm_course.capstone import plain_launches

    record = Launches()
    patched: list[tuple[type, str, object]] = []

    def wrap_run(original):
        def run(self, *args, grid, warmup, **kwargs):
            if isinstance(grid, int):  # Triton's own words: "object of type 'int' has no len()"
                raise TypeError(hints.INT_GRID)
            if warmup:  # a compile only: dry, as nothing else runs, it is skipped too
                return None if dry else original(self, *args, grid=grid, warmup=warmup, **kwargs)
            launch = record.note(self, args, kwargs, grid)
            if dry:
                return None
            result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
            record.done(launch)
            return result

        return run

    for cls in _launch_classes():
        patched.append((cls, "run", cls.run))
        cls.run = wrap_run(cls.run)
    from triton.runtime.autotuner import Autotuner

    patched.append((Autotuner, "run", Autotuner.run))
    Autotuner.run = _noting_hooks(Autotuner.run, record)

    try:
        with plain_launches():  # the capstone's quick launches skip kernel.run once warm
            yield record
    finally:
        for cls, name, original in reversed(patched):
            setattr(cls, name, original)
