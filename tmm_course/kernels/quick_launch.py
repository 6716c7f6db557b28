"""Low-overhead kernel launches: after the first call, go straight to the compiled binary.

``kernel[grid](*args)`` binds and specializes every argument in Python on each call, tens of
microseconds on a slow host: more than a small matmul takes on the GPU. ``QuickLaunch`` keys
the compiled kernel by what Triton specializes on (dtypes, 16-byte alignment, ints equal to 1
or divisible by 16, 32- or 64-bit ints) and launches it directly. Anything unusual (the
interpreter, launch hooks, an unknown Triton) takes Triton's own path.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import ClassVar

import torch

from tmm_course.backend import GPU


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

    def launch(*args: object) -> object:
        final = list(args[:_BASE_ARGS_FORMAT_LEN])
        for i, arg in enumerate(args[_BASE_ARGS_FORMAT_LEN:]):
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
        return raw(*final)

    launch.remembers = True
    launcher.launch = launch
    return True


class QuickLaunch:
    """Launch ``kernel`` as ``QuickLaunch(kernel, backend)(grid, args, **constexprs)``: ``args``
    are its runtime arguments in order, and the constexprs follow them in the signature and
    are passed in that order (the compiled launcher takes them positionally)."""

    # told of every launch that skips Triton's own path (which a recorder can watch itself)
    observer: ClassVar[Callable[[object, Sequence[object]], None] | None] = None

    def __init__(self, kernel: object, backend: str) -> None:
        self.kernel = kernel
        self.enabled = backend == GPU and _launch_hooks_known()
        self.compiled: dict[tuple, tuple[object, tuple]] = {}

    def __call__(
        self,
        grid: Sequence[int],
        args: Sequence[object],
        traits: Hashable = None,
        **constexprs: object,
    ) -> None:
        """Launch on ``grid``. ``traits``, if given, must stand for everything Triton specializes
        on in ``args`` (a caller that already knows it saves computing it here)."""
        if not self.enabled:
            self.kernel[tuple(grid)](*args, **constexprs)
            return
        from triton import knobs
        from triton.runtime import driver

        key = self._key(args, traits, constexprs)
        hit = self.compiled.get(key)
        if hit is None:
            compiled = self.kernel[tuple(grid)](*args, **constexprs)
            options = {"num_warps", "num_stages", "num_ctas", "maxnreg"}
            values = tuple(v for k, v in constexprs.items() if k not in options)
            self.compiled[key] = (compiled, values)
            return
        compiled, values = hit
        if QuickLaunch.observer is not None:
            QuickLaunch.observer(self.kernel, args)
        g = (*grid, 1, 1)[:3]
        stream = driver.active.get_current_stream(driver.active.get_current_device())
        hooks = knobs.runtime  # profilers' launch hooks see these launches too
        try:
            metadata = compiled.launch_metadata(g, stream, *args, *values)
            compiled.run(g[0], g[1], g[2], stream, compiled.function, compiled.packed_metadata,
                         metadata, hooks.launch_enter_hook, hooks.launch_exit_hook,
                         *args, *values)  # fmt: skip
        except (AttributeError, TypeError):  # a Triton whose launcher differs: stop trying
            self.enabled = False
            self.kernel[tuple(grid)](*args, **constexprs)

    def _key(self, args: Sequence[object], traits: Hashable, constexprs: dict) -> tuple:
        if traits is None:
            traits = tuple(_traits(a) for a in args)
        return (tuple(constexprs.items()), traits)

    def prepared(
        self, grid: Sequence[int], args: Sequence[object], **constexprs: object
    ) -> Callable[[Sequence[object]], None]:
        """Launch on ``grid`` now, and return ``launch(args)`` for later calls whose arguments
        Triton would specialize the same way (the same dtypes, shapes and alignments; other
        addresses): it goes to the compiled binary without computing any key."""
        self(grid, args, None, **constexprs)
        hit = self.compiled.get(self._key(args, None, constexprs)) if self.enabled else None
        if hit is None:  # quick launches are off here
            return lambda args: self(grid, args, None, **constexprs)
        from triton import knobs
        from triton.runtime import driver

        compiled, values = hit
        remember_descriptors(compiled)
        grid3 = (*grid, 1, 1)[:3]
        g0, g1, g2 = grid3
        run, function, packed = compiled.run, compiled.function, compiled.packed_metadata
        device = driver.active.get_current_device()
        stream = driver.active.get_current_stream
        hooks = knobs.runtime

        def launch(args: Sequence[object]) -> None:
            if not self.enabled:
                self(grid, args, None, **constexprs)
                return
            if QuickLaunch.observer is not None:
                QuickLaunch.observer(self.kernel, args)
            here = stream(device)
            enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook  # profilers' hooks
            metadata = None
            if enter is not None:
                metadata = compiled.launch_metadata(grid3, here, *args, *values)
            try:
                run(g0, g1, g2, here, function, packed, metadata, enter, leave, *args, *values)
            except (AttributeError, TypeError):  # a Triton whose launcher differs
                self.enabled = False
                self(grid, args, None, **constexprs)

        return launch
