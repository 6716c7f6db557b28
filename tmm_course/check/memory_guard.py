"""On Triton's interpreter, judge every load and store lane against the view it belongs to.

A compiled kernel that strays past its tensors reads junk or faults on the GPU; the interpreter
instead dereferences the raw address in this Python process, where a wild pointer kills the
notebook's kernel. While :func:`only_these_tensors` is active, each active lane of
``tl.load``/``tl.store`` (and of an atomic, ``tl.atomic_add`` say, judged as a store) is
classified:

- inside an element of one of the check's views: performed, and recorded;
- inside a check tensor's storage but not one of its view's elements (the padding around an
  input, the canaries around an output, the gap between rows): recorded as a read or write
  outside the view, and *not performed* (a load gets ``other``, a store is dropped);
- inside a tensor the launcher handed to its own launch (a ``.contiguous()`` copy, a scratch
  output): legal memory, performed;
- anywhere else: the launch stops with :class:`OutOfBoundsAccess`.

What was recorded (:class:`Trace`) says, per program, which cells of which tensor it loaded and
stored: the check's diagnosis and its picture of the kernel are drawn from it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from tmm_course.check import time_limit
from tmm_course.check.launches import Launch, Launches

# the leading parameters the guard reads; the rest (cache and eviction hints) differ between
# Triton versions (3.6: cache_modifier, eviction_policy; 3.9: cache_policy) and pass through
LOAD_PARAMETERS = ("self", "ptrs", "mask", "other")
STORE_PARAMETERS = ("self", "ptrs", "value", "mask")
# an atomic read-modify-write (tl.atomic_add and its kin) writes: it is judged as a store;
# tl.atomic_cas has no mask, every lane active
ATOMIC_PARAMETERS = ("self", "rmwOp", "ptr", "val", "mask")
CAS_PARAMETERS = ("self", "ptr", "cmp", "val")
PICTURE_MARGIN = 8  # cells drawn around a view for lanes that strayed outside it


def raised_from(error: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The ``kind`` exception ``error`` was raised from, or None: the interpreter wraps what a
    kernel raised (an :class:`OutOfBoundsAccess`, say) in an error of its own."""
    for _ in range(20):
        if error is None or isinstance(error, kind):
            return error
        error = error.__cause__ or error.__context__
    return None


class OutOfBoundsAccess(RuntimeError):
    """A kernel lane loaded or stored outside every tensor it could reach."""

    def __init__(self, kind: str, address: int, lanes: int) -> None:
        self.kind = kind
        super().__init__(
            f"{kind} outside every tensor the kernel was given ({lanes} lane(s), first at "
            f"address {address:#x}): a mask is missing or an offset is wrong"
        )


@dataclass
class Region:
    """A storage the kernel may reach: a check's view (judged per element) or a tensor the
    launcher allocated for its own launches (legal as a whole)."""

    name: str
    start: int
    end: int
    itemsize: int
    view: torch.Tensor | None = None
    position: np.ndarray | None = None  # storage element -> flat index in the view, or -1

    @classmethod
    def of_view(cls, name: str, view: torch.Tensor) -> Region:
        storage = view.untyped_storage()
        itemsize = view.element_size()
        position = np.full(storage.nbytes() // itemsize, -1, dtype=np.int64)
        if view.numel():
            index = view.storage_offset() + sum(
                np.arange(size).reshape([-1 if d == axis else 1 for d in range(view.dim())])
                * stride
                for axis, (size, stride) in enumerate(zip(view.shape, view.stride(), strict=True))
            )
            position[np.asarray(index).ravel()] = np.arange(view.numel())
        start = storage.data_ptr()
        return cls(name, start, start + storage.nbytes(), itemsize, view, position)

    @classmethod
    def owned(cls, tensor: torch.Tensor) -> Region:
        storage = tensor.untyped_storage()
        start = storage.data_ptr()
        return cls("scratch", start, start + storage.nbytes(), tensor.element_size())

    def cell(self, element: int) -> tuple[int, int] | None:
        """(row, column) of a storage element in a 2-D view's coordinates, also just outside
        the view (None if the view's strides do not say where); a 1-D view is one row:
        (0, element), which its picture wraps into rows."""
        if self.view is None or self.view.dim() not in (1, 2):
            return None
        offset = element - self.view.storage_offset()
        if self.view.dim() == 1:
            (step,) = self.view.stride()
            index, off_grid = divmod(offset, step) if step > 0 else (0, 1)
            inside = -PICTURE_MARGIN <= index < self.view.shape[0] + PICTURE_MARGIN
            return (0, index) if inside and not off_grid else None
        (rows, cols), (s0, s1) = self.view.shape, self.view.stride()
        if 0 < s1 <= s0 and s0 >= cols * s1:  # rows apart by s0, columns by s1
            row, rest = divmod(offset, s0)
            col, off_grid = divmod(rest, s1)
        elif 0 < s0 < s1 and s1 >= rows * s0:  # column-major-like
            col, rest = divmod(offset, s1)
            row, off_grid = divmod(rest, s0)
        else:
            return None
        if off_grid:
            return None
        inside = -PICTURE_MARGIN <= row < rows + PICTURE_MARGIN
        return (row, col) if inside and -PICTURE_MARGIN <= col < cols + PICTURE_MARGIN else None


@dataclass
class Access:
    """What one program did to one view in one load or store."""

    program: tuple[int, int, int]
    kind: str  # "load" or "store"
    tensor: str
    cells: np.ndarray  # flat indices into the view, lanes performed
    strays: list[tuple[int, int]]  # (row, column) of lanes outside the view, not performed
    stray_lanes: int  # how many lanes fell outside the view (some may have no cell)
    launch: int = -1  # which launch made it: an index into Trace.launches


@dataclass
class ScratchAccess:
    """What one launch did to memory the launcher allocated itself (a copy, a scratch output)."""

    launch: int
    kind: str
    start: int  # the storage's first address
    elements: np.ndarray  # storage elements touched
    program: tuple[int, int, int] = (0, 0, 0)  # the program that touched them


@dataclass
class Trace:
    """Every load and store lane the kernels of one launcher call made into the check's views."""

    views: dict[str, torch.Tensor] = field(default_factory=dict)
    accesses: list[Access] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)  # in order, as the guard saw them
    scratch: list[ScratchAccess] = field(default_factory=list)
    # loads whose mask switched off every lane (a K-slab masked away whole, say)
    loads_masked_off: int = 0

    def cells(self, kind: str, tensor: str, launches: set[int] | None = None) -> torch.Tensor:
        """A flat boolean per cell of the view ``tensor``: True where a lane of ``kind`` landed
        (only lanes of the launches numbered in ``launches``, when given)."""
        view = self.views[tensor]
        hit = torch.zeros(view.numel(), dtype=torch.bool)
        for a in self.accesses:
            mine = launches is None or a.launch in launches
            if a.kind == kind and a.tensor == tensor and a.cells.size and mine:
                hit[torch.from_numpy(a.cells)] = True
        return hit

    def scratch_elements(self, kind: str, start: int, launches: set[int]) -> int:
        """How many distinct storage elements of the launcher's own memory starting at
        ``start`` the launches numbered in ``launches`` touched with ``kind``."""
        touched = [
            s.elements
            for s in self.scratch
            if s.kind == kind and s.start == start and s.launch in launches
        ]
        return int(np.unique(np.concatenate(touched)).size) if touched else 0

    def outside(self, kind: str) -> dict[str, int]:
        """Lanes of ``kind`` ("load" or "store") outside each view, by view name."""
        counts: dict[str, int] = {}
        for a in self.accesses:
            if a.kind == kind and a.stray_lanes:
                counts[a.tensor] = counts.get(a.tensor, 0) + a.stray_lanes
        return counts

    def first_straying(self, kind: str, tensor: str) -> Access | None:
        """The first access of ``kind`` to ``tensor`` with a lane outside it (with a cell)."""
        return next((a for a in self.accesses
                     if a.kind == kind and a.tensor == tensor and a.strays), None)  # fmt: skip

    def stored_cells(self, tensor: str) -> torch.Tensor:
        """A flat boolean per cell of the view ``tensor``: True where some lane stored."""
        return self.cells("store", tensor)

    def touched(self, kind: str, tensor: str) -> int:
        """How many lanes of ``kind`` landed inside the view ``tensor``."""
        return sum(a.cells.size for a in self.accesses if a.kind == kind and a.tensor == tensor)


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


def _hooks(builder: type, hooks: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether every method of ``hooks`` exists on ``builder`` and takes the parameters the
    guard reads first (a Triton whose atomics differ runs them unguarded)."""
    for name, expected in hooks.items():
        method = getattr(builder, name, None)
        if method is None:
            return False
        if tuple(inspect.signature(method).parameters)[: len(expected)] != expected:
            return False
    return True


class _Judge:
    """Classifies lanes against the regions and records what they did."""

    def __init__(self, views: Mapping[str, torch.Tensor], trace: Trace) -> None:
        self.regions = [Region.of_view(name, view) for name, view in views.items()]
        self.trace = trace

    def add_launch(self, launch: Launch) -> None:
        """Tensors a launcher hands its own kernels are legal memory, unless they share a
        storage with a check's view (then the view decides)."""
        self.trace.launches.append(launch)
        for tensor in launch.tensors:
            start = tensor.untyped_storage().data_ptr()
            if not any(r.start <= start < r.end for r in self.regions):
                self.regions.append(Region.owned(tensor))

    def region_of(self, address: int) -> Region | None:
        for region in self.regions:
            if region.start <= address < region.end:
                return region
        return None

    def judge(self, builder, kind: str, ptrs, mask, itemsize: int) -> np.ndarray:
        """The mask with every lane outside its view switched off; stops a lane that reaches
        no region."""
        mask = mask if isinstance(mask, np.ndarray) else mask.data  # a plain array on 3.6's TMA
        addresses = np.broadcast_to(ptrs.data, np.shape(mask)).astype(np.uint64)
        active = np.asarray(mask, dtype=bool)
        keep = active.copy()
        program = tuple(int(i) for i in (builder.grid_idx or (0, 0, 0)))
        time_limit.note_program(program)
        flat_addresses, flat_active = addresses.ravel(), active.ravel()
        lanes = flat_addresses[flat_active]
        if kind == "load" and not lanes.size:
            self.trace.loads_masked_off += 1
        owner = np.full(lanes.shape, -1)
        for index, region in enumerate(self.regions):
            inside = (lanes >= region.start) & (lanes + np.uint64(itemsize) <= region.end)
            owner[inside & (owner == -1)] = index
        if (owner == -1).any():
            stray = lanes[owner == -1]
            raise OutOfBoundsAccess(kind, int(stray[0]), int(stray.size))
        outside_view = np.zeros(lanes.shape, dtype=bool)
        launch = len(self.trace.launches) - 1
        for index in np.unique(owner):
            region = self.regions[index]
            if region.position is None:
                offset = lanes[owner == index] - np.uint64(region.start)
                elements = (offset // np.uint64(region.itemsize)).astype(np.int64)
                self.trace.scratch.append(
                    ScratchAccess(launch, kind, region.start, elements, program)
                )
                continue
            here = owner == index
            offset = lanes[here] - np.uint64(region.start)
            element = (offset // np.uint64(region.itemsize)).astype(np.int64)
            aligned = offset % np.uint64(region.itemsize) == 0
            position = np.where(aligned, region.position[element], -1)
            outside = position < 0
            outside_view[np.flatnonzero(here)[outside]] = True
            self.trace.accesses.append(
                Access(
                    program,
                    kind,
                    region.name,
                    position[~outside],
                    [c for e in element[outside][:64] if (c := region.cell(int(e))) is not None],
                    int(outside.sum()),
                    launch,
                )
            )
        flat_keep = keep.ravel()
        flat_keep[np.flatnonzero(flat_active)[outside_view]] = False
        return flat_keep.reshape(active.shape)


@contextlib.contextmanager
def only_these_tensors(
    views: Mapping[str, torch.Tensor], launches: Launches | None = None
) -> Iterator[Trace | None]:
    """Interpreter launches inside this block are judged against ``views`` (and what the
    launcher allocates for its own launches, when ``launches`` records them). Yields the
    :class:`Trace`, or None on a Triton whose interpreter the guard does not know: then it
    warns once and guards nothing (the checks keep their canaries and poison)."""
    reason = unsupported_reason()
    if reason is not None:
        warn_unguarded(reason)
        yield None
        return
    from triton.runtime import interpreter

    trace = Trace(views=dict(views))
    judge = _Judge(views, trace)
    if launches is not None:
        launches.listeners.append(judge.add_launch)
    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store

    def itemsize(ptrs) -> int:
        return np.dtype(interpreter._get_np_dtype(ptrs.get_element_ty())).itemsize

    def like(mask, keep: np.ndarray):
        # the interpreter's own form of a mask: a TensorHandle, or on triton 3.6 for tensor
        # descriptor loads and stores, a plain numpy array
        return keep if isinstance(mask, np.ndarray) else type(mask)(keep, mask.dtype)

    def guarded_load(self, ptrs, mask, *rest, **hints):
        keep = judge.judge(self, "load", ptrs, mask, itemsize(ptrs))
        return load(self, ptrs, like(mask, keep), *rest, **hints)

    def guarded_store(self, ptrs, value, mask, *rest, **hints):
        keep = judge.judge(self, "store", ptrs, mask, itemsize(ptrs))
        return store(self, ptrs, value, like(mask, keep), *rest, **hints)

    def guarded_atomic(self, op, ptrs, value, mask, *rest, **hints):
        keep = judge.judge(self, "store", ptrs, mask, itemsize(ptrs))
        return atomic(self, op, ptrs, value, like(mask, keep), *rest, **hints)

    def guarded_cas(self, ptrs, compare, value, *rest, **hints):
        every = np.ones(np.shape(ptrs.data), dtype=bool)
        keep = judge.judge(self, "store", ptrs, every, itemsize(ptrs))
        if not keep.all():  # no mask to switch a lane off with: stop it
            stray = np.broadcast_to(ptrs.data, every.shape)[~keep]
            raise OutOfBoundsAccess("store", int(stray.ravel()[0]), int(stray.size))
        return cas(self, ptrs, compare, value, *rest, **hints)

    atomic, cas = builder.create_atomic_rmw, builder.create_atomic_cas
    atomics = _hooks(builder, {"create_atomic_rmw": ATOMIC_PARAMETERS,
                               "create_atomic_cas": CAS_PARAMETERS})  # fmt: skip
    builder.create_masked_load, builder.create_masked_store = guarded_load, guarded_store
    if atomics:
        builder.create_atomic_rmw, builder.create_atomic_cas = guarded_atomic, guarded_cas
    try:
        yield trace
    finally:
        builder.create_masked_load, builder.create_masked_store = load, store
        if atomics:
            builder.create_atomic_rmw, builder.create_atomic_cas = atomic, cas
        if launches is not None:
            launches.listeners.remove(judge.add_launch)


@functools.cache
def warn_unguarded(reason: str) -> None:
    """Warn, once per reason (``warn_unguarded.cache_clear()`` forgets them), that the guard
    cannot hook this Triton."""
    warnings.warn(
        f"The memory guard cannot hook this Triton: {reason}. Checks still run, but a load or "
        "store far outside its tensors may crash the notebook's kernel instead of being "
        "reported. Fix: pip install 'triton>=3.6,<3.10' (the versions the course is tested on).",
        RuntimeWarning,
        stacklevel=4,
    )
