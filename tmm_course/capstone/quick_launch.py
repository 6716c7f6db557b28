"""Low-overhead kernel launches: after the first call, go straight to the compiled binary.

``kernel[grid](*args)`` binds and specializes every argument in Python on each call, tens of
microseconds on a slow host: more than a small matmul takes on the GPU. ``QuickLaunch`` keys
the compiled kernel by what Triton specializes on (dtypes, 16-byte alignment, ints equal to 1
or divisible by 16, 32- or 64-bit ints) and launches it directly. Anything unusual (the
interpreter, launch hooks, an unknown Triton) takes Triton's own path, and so does every
launch inside :func:`plain_launches`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator, Sequence

import torch

from tmm_course.backend import GPU

_plain = 0  # how many plain_launches() blocks are open
COMPILED_LIMIT = 256  # compiled kernels a QuickLaunch keeps at most


@contextlib.contextmanager
def plain_launches() -> Iterator[None]:
    """Inside the block every quick launch takes Triton's own path (``kernel[grid](...)``),
    which launch recorders, the interpreter and the compiler's caches see."""
    global _plain
    _plain += 1
    try:
        yield
    finally:
        _plain -= 1


def _quick(quick: QuickLaunch) -> bool:
    return quick.enabled and not _plain


def _traits(arg: object) -> object:
    if isinstance(arg, torch.Tensor):
        return (arg.dtype, arg.data_ptr() % 16 == 0)
    if hasattr(arg, "block_shape") and hasattr(arg, "base"):  # a host-side tensor descriptor
        shape = (*arg.shape, *arg.strides, *arg.block_shape)
        return (_traits(arg.base), tuple(shape), getattr(arg, "padding", None))
    if isinstance(arg, bool) or arg is None:
        return arg
    if isinstance(arg, int):
        return (arg == 1, arg % 16 == 0, -(2**31) <= arg < 2**31)
    return type(arg)  # anything else: never seen by the kernels that use this


def _launch_hooks_known() -> bool:
    """Triton 3.4 and later keep the launch hooks in ``triton.knobs``; older ones differ."""
    try:
        from triton import knobs
    except ImportError:
        return False
    return hasattr(knobs, "runtime")


def _hook(hook: object) -> object:
    """A launch hook, or None where there is none: Triton 3.6 keeps an empty chain of hooks
    by default, and a launch that passes it builds launch metadata for nobody."""
    return None if getattr(hook, "calls", True) == [] else hook


def remember_descriptors(compiled: object) -> bool:
    """Make ``compiled``'s launcher remember the TMA descriptor it encodes for each tensor
    descriptor argument (by address, shape, strides and padding) instead of encoding it
    again on every launch. Only for the launcher this was written against (Triton 3.6's
    NVIDIA one); returns whether it did."""
    launcher = getattr(compiled, "run", None)
    inner = getattr(launcher, "launch", None)
    if getattr(inner, "remembers", False):
        return True
    code, cells = getattr(inner, "__code__", None), getattr(inner, "__closure__", None)
    if code is None or cells is None:
        return False
    found = dict(zip(code.co_freevars, (c.cell_contents for c in cells), strict=False))
    try:
        from triton.backends.nvidia.driver import _BASE_ARGS_FORMAT_LEN, make_tensordesc_arg
        names = ("launcher", "tensordesc_indices", "tensordesc_meta")
        raw, where, metas = (found[name] for name in names)
    except (ImportError, KeyError):
        return False
    meta = dict(zip(sorted(where), metas, strict=True))
    encoded: dict[tuple, list] = {}

    def flatten(args: Sequence[object]) -> list:
        """The kernel's arguments as the compiled launch function takes them: each tensor
        descriptor as its encoded TMA descriptor, shape and strides."""
        final = []
        for i, arg in enumerate(args):
            if i not in meta:
                final.append(arg)
                continue
            key = (i, arg.base.data_ptr(), tuple(arg.shape), tuple(arg.strides), arg.padding)
            hit = encoded.get(key)
            if hit is None:
                if len(encoded) >= 256:
                    encoded.clear()
                hit = encoded[key] = make_tensordesc_arg(arg, meta[i])
            final.extend(hit)
        return final

    def launch(*args: object) -> object:
        return raw(*args[:_BASE_ARGS_FORMAT_LEN], *flatten(args[_BASE_ARGS_FORMAT_LEN:]))

    launch.remembers = True
    launch.raw, launch.flatten = raw, flatten
    launcher.launch = launch
    return True


def _run(compiled: object, grid3: tuple, stream: int, args: Sequence[object], values: tuple,
         hooks: object) -> None:  # fmt: skip
    """Launch ``compiled`` straight through its launcher; profilers' launch hooks
    (``hooks``: ``triton.knobs.runtime``) see the launch too."""
    enter, leave = _hook(hooks.launch_enter_hook), _hook(hooks.launch_exit_hook)
    metadata = None if enter is None else compiled.launch_metadata(grid3, stream, *args, *values)
    compiled.run(*grid3, stream, compiled.function, compiled.packed_metadata, metadata, enter,
                 leave, *args, *values)  # fmt: skip


class PreparedLaunch:
    """A compiled kernel's launch on a fixed grid, for arguments Triton specializes alike:
    ``launch(args)``. ``launch.keyed(key, make_args)`` also keeps the flat arguments it
    passed for each ``key`` (which must fix every argument, say the tensors' addresses) and
    makes none the next time: on Triton 3.6's NVIDIA launcher, without launch hooks, outside
    :func:`plain_launches`; elsewhere it is ``launch(make_args())``."""

    def __init__(self, quick: QuickLaunch, grid: Sequence[int], constexprs: dict,
                 compiled: object | None, values: tuple) -> None:  # fmt: skip
        self.quick, self.grid, self.constexprs = quick, tuple(grid), constexprs
        self.compiled, self.values = compiled, values
        self.grid3 = (*grid, 1, 1)[:3]
        self.flat: dict[Hashable, tuple] = {}
        self.raw = None
        if compiled is None:  # quick launches are off here
            return
        from triton import knobs
        from triton.runtime import driver

        self.device = driver.active.get_current_device()
        self.stream = driver.active.get_current_stream
        self.hooks = knobs.runtime
        launcher = compiled.run
        scratch = (getattr(launcher, "global_scratch_size", 1),
                   getattr(launcher, "profile_scratch_size", 1))  # fmt: skip
        if scratch == (0, 0):  # nothing to allocate per launch
            self.raw = getattr(launcher.launch, "raw", None)
        if self.raw is not None:
            self.flatten = launcher.launch.flatten
            self.options = (launcher.launch_cooperative_grid, launcher.launch_pdl, None, None)

    def __call__(self, args: Sequence[object]) -> None:
        quick, compiled = self.quick, self.compiled
        if compiled is None or not _quick(quick):
            quick(self.grid, args, **self.constexprs)
            return
        try:
            _run(compiled, self.grid3, self.stream(self.device), args, self.values, self.hooks)
        except (AttributeError, TypeError):  # a Triton whose launcher differs
            quick.enabled = False
            quick(self.grid, args, **self.constexprs)

    def keyed(self, key: Hashable, make_args: Callable[[], Sequence[object]]) -> None:
        if (self.raw is None or not _quick(self.quick)
                or _hook(self.hooks.launch_enter_hook) is not None
                or _hook(self.hooks.launch_exit_hook) is not None):  # fmt: skip
            self(make_args())
            return
        flat = self.flat.get(key)
        if flat is None:
            if len(self.flat) >= 64:
                self.flat.clear()
            flat = self.flat[key] = tuple(self.flatten((*make_args(), *self.values)))
        compiled = self.compiled
        g0, g1, g2 = self.grid3
        try:
            self.raw(g0, g1, g2, self.stream(self.device), compiled.function, *self.options,
                     compiled.packed_metadata, None, None, None, *flat)  # fmt: skip
        except TypeError:  # a launch function that takes other arguments: the plain path
            self.raw = None
            self(make_args())


class QuickLaunch:
    """Launch ``kernel`` as ``QuickLaunch(kernel, backend)(grid, args, **constexprs)``: ``args``
    are its runtime arguments in order, and the constexprs follow them in the signature and
    are passed in that order (the compiled launcher takes them positionally)."""

    def __init__(self, kernel: object, backend: str) -> None:
        self.kernel = kernel
        self.enabled = backend == GPU and _launch_hooks_known()
        self.compiled: dict[tuple, tuple[object, tuple]] = {}

    def __call__(
        self,
        grid: Sequence[int],
        args: Sequence[object],
        **constexprs: object,
    ) -> None:
        """Launch on ``grid``."""
        if not _quick(self):
            self.kernel[tuple(grid)](*args, **constexprs)
            return
        from triton import knobs
        from triton.runtime import driver

        key = self._key(args, constexprs)
        hit = self.compiled.get(key)
        if hit is None:
            compiled = self.kernel[tuple(grid)](*args, **constexprs)
            options = {"num_warps", "num_stages", "num_ctas", "maxnreg"}
            values = tuple(v for k, v in constexprs.items() if k not in options)
            if len(self.compiled) >= COMPILED_LIMIT:  # the oldest first (Triton keeps its own)
                del self.compiled[next(iter(self.compiled))]
            self.compiled[key] = (compiled, values)
            return
        compiled, values = hit
        stream = driver.active.get_current_stream(driver.active.get_current_device())
        try:
            _run(compiled, (*grid, 1, 1)[:3], stream, args, values, knobs.runtime)
        except (AttributeError, TypeError):  # a Triton whose launcher differs: stop trying
            self.enabled = False
            self.kernel[tuple(grid)](*args, **constexprs)

    def _key(self, args: Sequence[object], constexprs: dict) -> tuple:
        return (tuple(constexprs.items()), tuple(_traits(a) for a in args))

    def prepared(
        self, grid: Sequence[int], args: Sequence[object], **constexprs: object
    ) -> PreparedLaunch:
        """Launch on ``grid`` now, and return the :class:`PreparedLaunch` for later calls whose
        arguments Triton would specialize the same way (the same dtypes, shapes and
        alignments; other addresses): it goes to the compiled binary without computing any
        key."""
        self(grid, args, **constexprs)
        hit = self.compiled.get(self._key(args, constexprs)) if _quick(self) else None
        if hit is None:  # quick launches are off here
            return PreparedLaunch(self, grid, constexprs, None, ())
        compiled, values = hit
        remember_descriptors(compiled)
        return PreparedLaunch(self, grid, constexprs, compiled, values)
