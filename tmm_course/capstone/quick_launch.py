"""Prepared launches: after the first call, go straight to the compiled binary.

``kernel[grid](*args)`` binds and specializes every argument in Python on each call, tens of
microseconds on a slow host: more than a small matmul takes on the GPU. A
:class:`PreparedLaunch` makes its first launch that way and keeps the compiled kernel; later
calls, whose arguments the caller promises Triton would specialize alike (the same dtypes,
shapes, strides and alignment), go to the compiled kernel's launcher, and on Triton 3.6's
NVIDIA launcher reuse the flat arguments its C function takes (tensor descriptors encoded),
kept per key (the tensors' addresses). The interpreter, profilers' launch hooks, and every
launch inside :func:`plain_launches` take Triton's own path."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Hashable, Iterator, Sequence

from triton import knobs
from triton.runtime import driver

from tmm_course.backend import GPU

_plain = 0  # how many plain_launches() blocks are open
_CHAIN = knobs.HookChain  # the type of Triton's default launch hooks
# not kernel arguments
OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "launch_cooperative_grid"})
FLAT_LIMIT = 64  # argument lists a prepared launch keeps at most (then it starts again)


@contextlib.contextmanager
def plain_launches() -> Iterator[None]:
    """Inside, every prepared launch takes Triton's own path: recorders and caches see it."""
    global _plain
    _plain += 1
    try:
        yield
    finally:
        _plain -= 1


def listening(hooks: object) -> bool:
    """Whether a profiler has set a launch hook (a launch that passed one would build launch
    metadata for nobody). Checked on every call: Triton's default, an empty chain of hooks, is
    told by its type first, the cheapest test there is."""
    enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
    if type(enter) is _CHAIN and type(leave) is _CHAIN:
        return bool(enter.calls or leave.calls)
    return any(hook is not None and getattr(hook, "calls", True) != [] for hook in (enter, leave))


def direct_launch(compiled: object) -> tuple[Callable, Callable[[Sequence], list]] | None:
    """Triton 3.6's NVIDIA launcher taken apart: its C launch function, and ``flatten(args)``,
    the arguments as it takes them (a tensor descriptor as its encoded TMA descriptor, shape
    and strides; a tensor as its address). None for another launcher, or one that allocates
    scratch memory per launch."""
    launcher = getattr(compiled, "run", None)
    scratch = (getattr(launcher, "global_scratch_size", 1),
               getattr(launcher, "profile_scratch_size", 1))  # fmt: skip
    try:
        from triton.backends.nvidia.driver import CudaLauncher, make_tensordesc_arg

        call = list(inspect.signature(CudaLauncher.__call__).parameters)
    except (ImportError, AttributeError, ValueError):
        return None
    expected = ["self", "gridX", "gridY", "gridZ", "stream", "function", "args"]  # Triton 3.6's
    if call != expected or scratch != (0, 0):
        return None
    inner = launcher.launch
    if inspect.isbuiltin(inner):  # no tensor descriptors: the C function itself
        return inner, _addresses
    code, cells = getattr(inner, "__code__", None), getattr(inner, "__closure__", None)
    found = dict(zip(code.co_freevars, (c.cell_contents for c in cells), strict=False)) if (
        code and cells) else {}  # fmt: skip
    try:
        names = ("launcher", "tensordesc_indices", "tensordesc_meta")
        raw, where, metas = (found[name] for name in names)
    except KeyError:
        return None
    meta = dict(zip(sorted(where), metas, strict=True))

    def flatten(args: Sequence) -> list:
        final = []
        for i, arg in enumerate(args):
            if i in meta:  # without metadata Triton passes the base tensor: its address here
                final.extend(_addresses(make_tensordesc_arg(arg, meta[i])))
            else:
                final.append(_address(arg))
        return final

    return raw, flatten


def _address(arg: object) -> object:
    """A tensor as its address, which the launch function takes as well (kept arguments must
    not keep a caller's tensors alive, nor their memory in use); anything else as it is."""
    return arg.data_ptr() if hasattr(arg, "data_ptr") else arg


def _addresses(args: Sequence) -> list:
    return [_address(arg) for arg in args]


class PreparedLaunch:
    """``kernel`` on a fixed ``grid`` with fixed ``constexprs``: launched once now on ``args``
    through Triton's own path, then by ``launch(key, make_args)`` for arguments Triton
    specializes alike. ``key`` must fix every argument ``make_args()`` gives (say, the tensors'
    addresses): on Triton 3.6's NVIDIA launcher, ``make_args`` is called for a new key only."""

    def __init__(self, kernel: object, grid: Sequence[int], args: Sequence[object],
                 constexprs: dict, backend: str) -> None:  # fmt: skip
        self.kernel, self.grid, self.constexprs = kernel, tuple(grid), constexprs
        self.grid3 = (*grid, 1, 1)[:3]
        compiled = kernel[self.grid](*args, **constexprs)
        self.compiled = self.direct = None
        self.flat: dict[Hashable, list] = {}
        if backend != GPU or _plain or compiled is None:
            return
        self.compiled, self.hooks = compiled, knobs.runtime
        self.device = driver.active.get_current_device()
        self.stream = driver.active.get_current_stream
        self.values = tuple(v for k, v in constexprs.items() if k not in OPTIONS)
        self.direct = direct_launch(compiled)
        if self.direct is not None:
            run = compiled.run
            self.head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None,
                         None, compiled.packed_metadata, None, None, None)  # fmt: skip

    def __call__(self, key: Hashable, make_args: Callable[[], Sequence[object]],
                 stream: int | None = None) -> None:  # fmt: skip
        """Launch on the current stream (``stream``: its handle, where the caller has it)."""
        compiled = self.compiled
        if compiled is None or _plain or listening(self.hooks):
            self.kernel[self.grid](*make_args(), **self.constexprs)
            return
        g0, g1, g2 = self.grid3
        if stream is None:
            stream = self.stream(self.device)
        if self.direct is None:  # a launcher this does not take apart: its public call
            compiled.run(g0, g1, g2, stream, compiled.function, compiled.packed_metadata, None,
                         None, None, *make_args(), *self.values)  # fmt: skip
            return
        flat = self.flat.get(key)
        if flat is None:
            if len(self.flat) >= FLAT_LIMIT:
                self.flat.clear()
            flat = self.flat[key] = self.direct[1]((*make_args(), *self.values))
        self.direct[0](g0, g1, g2, stream, *self.head, *flat)
