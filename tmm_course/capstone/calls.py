"""``matmul_fast``: check a call once, plan it, prepare its launch, and serve every later call
of the same signature straight from that prepared launch. :func:`reset` forgets them all;
:func:`plain_launches` runs a block with none of them and every launch on Triton's own path."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import torch
from triton.runtime.errors import OutOfResources

from tmm_course import validate
from tmm_course.capstone import quick_launch
from tmm_course.capstone.config import Config
from tmm_course.capstone.kernels import tma_problem
from tmm_course.capstone.launches import Ready, prepare_grouped, prepare_persistent_tma
from tmm_course.capstone.plans import PATHS, Plan, by_rules, plan, reads_in_place, smaller
from tmm_course.kernels.matmul import check_blocks, check_operands, output_for

_READY: dict[tuple, Ready] = {}  # call signature -> its prepared launch
READY_LIMIT = 4096  # call signatures remembered at most; then the oldest are forgotten


def matmul_fast(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    precision: str = "tf32",
    out: torch.Tensor | None = None,
    path: str | None = None,
    config: Config | None = None,
) -> torch.Tensor:
    """C = A @ B the fastest way this course knows for the device, shape and dtype (see
    :func:`plan`). ``path`` ("persistent_tma" or "grouped") and ``config`` override the
    choice (its K-steps no deeper than K: :meth:`Config.for_depth`); the other arguments are
    lesson 4's :func:`~tmm_course.kernels.matmul`'s. A call shaped like an earlier one (shapes,
    strides, dtypes, devices, alignment) goes straight to the compiled kernel: a small product
    takes microseconds, and Python must not take longer."""
    try:  # the call signature: everything a prepared launch depends on
        call = (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.get_device(),
                b.get_device(), a.data_ptr() % 16, b.data_ptr() % 16, precision, path, config,
                None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(),
                                          out.data_ptr() % 16))  # fmt: skip
        ready = _READY.get(call)
    except (AttributeError, TypeError):  # not tensors, say: the checks below say what is wrong
        call = ready = None
    if ready is not None:
        if out is not None:  # a call shaped like an earlier one may still overlap its inputs
            validate.no_overlap(out, a=a, b=b)
        return ready(a, b, out)
    check_operands(a, b, precision)
    out = output_for(a, b, out)
    prepare, chosen_config = _prepare(a, b, out, path, config)
    while True:  # a GPU with less shared memory than the plan assumed gets a smaller config
        try:
            ready = prepare(a, b, out, chosen_config, precision)
            break
        except OutOfResources as exc:
            if config is not None:
                raise validate.KernelInputError(
                    f"config={config} needs more shared memory than this GPU has ({exc}). "
                    "Fix: fewer num_stages, a smaller block_k, or config=None to let plan() choose."
                ) from exc
            chosen_config = smaller(chosen_config)
            if chosen_config is None:
                raise
    if call is not None:
        if len(_READY) >= READY_LIMIT:
            del _READY[next(iter(_READY))]
        _READY[call] = ready
    return out


def _prepare(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, path: str | None, config: Config | None
) -> tuple[Callable[..., Ready], Config]:
    """Choose the kernel and configuration for checked operands: what matmul_fast will run."""
    chosen = plan(a, b, out)
    if path is not None and path != chosen.path:
        if path not in PATHS:
            raise validate.KernelInputError(
                f"path={path!r}: expected one of {', '.join(PATHS)}, or None to let plan() choose."
            )
        # with rows the TMA cannot read: copies of A and B, C stored by pointer
        stage = path == "persistent_tma" and tma_problem(a, b, out) is not None
        if stage and (reason := tma_problem(a, b, out, stage=True)) is not None:
            raise validate.KernelInputError(
                f"path='persistent_tma' cannot run here: {reason}. Expected a Hopper GPU "
                "(or the interpreter) and Triton 3.4 or later. Fix: path='grouped'."
            )
        in_place = path == "grouped" and reads_in_place(a, b)
        chosen = Plan(path, by_rules(path, a.dtype), "asked for", stage=stage, in_place=in_place)
    if config is not None and not isinstance(config, Config):
        raise validate.KernelInputError(
            f"config is a {type(config).__name__}; expected a Config. Fix: "
            "config=tmm_course.capstone.Config(block_m=64, block_n=64, block_k=32)."
        )
    config = config or chosen.config
    check_blocks((config.block_m, config.block_n, config.block_k))
    config = config.for_depth(a.shape[1])
    if a.shape[0] == 0 or b.shape[1] == 0 or a.shape[1] == 0:
        return _without_a_kernel, config
    if chosen.path == "persistent_tma":
        return prepare_persistent_tma, config
    if chosen.in_place:
        return functools.partial(prepare_grouped, copies=False), config
    return prepare_grouped, config


def _without_a_kernel(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *_: object) -> Ready:
    """An empty C, or K = 0 (every sum is empty: C is zero)."""

    def ready(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        out = a.new_empty((a.shape[0], b.shape[1])) if out is None else out
        return out.zero_() if a.shape[1] == 0 else out

    ready(a, b, out)
    return ready


def reset() -> None:
    """Forget every prepared call: each signature is checked and planned again (new fit, say)."""
    _READY.clear()


@contextlib.contextmanager
def plain_launches() -> Iterator[None]:
    """Inside the block ``matmul_fast`` prepares its calls afresh (forgotten after), and every
    capstone launch takes Triton's own path: see :func:`quick_launch.plain_launches`."""
    global _READY
    saved, _READY = _READY, {}
    try:
        with quick_launch.plain_launches():
            yield
    finally:
        _READY = saved
