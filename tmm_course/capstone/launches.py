"""The capstone's launches: per-stream workspaces (split-K partials, tile counters, aligned
copies), and for each kernel a launch that, once prepared for a call signature, goes straight to
the compiled binary (:mod:`tmm_course.capstone.quick_launch`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton

import tmm_course
from tmm_course import gpu
from tmm_course.capstone.config import Config
from tmm_course.capstone.kernels import (
    TensorDescriptor,
    grouped_matmul_kernel,
    persistent_tma_matmul_kernel,
    readable,
    reads_a_transposed,
    reads_b_transposed,
    transpose_kernel,
)
from tmm_course.capstone.quick_launch import QuickLaunch


def _precision(a: torch.Tensor, precision: str) -> str | None:
    return gpu.precision_for(precision) if a.dtype == torch.float32 else None



_grouped = QuickLaunch(grouped_matmul_kernel, tmm_course.BACKEND)
_persistent = QuickLaunch(persistent_tma_matmul_kernel, tmm_course.BACKEND)
_workspaces: dict[tuple, torch.Tensor] = {}  # (what, dtype, device, stream) -> its buffer
_outgrown: list[torch.Tensor] = []  # buffers replaced by larger ones: kept, see _workspace


def _workspace(what: str, device: torch.device, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """A zeroed buffer of at least ``numel`` elements, one per purpose, dtype, device and
    stream: the launches of one stream run in turn, so they can share it. Its memory is kept,
    and so is that of a buffer it outgrows (a captured CUDA graph may still launch with it);
    each new one is at least twice as large as the last, so that adds up to less than the
    newest."""
    if device.type == "cuda" and device.index is None:  # "cuda": the current device
        device = torch.device("cuda", torch.cuda.current_device())
    stream = torch._C._cuda_getCurrentRawStream(device.index) if device.type == "cuda" else 0
    buffer = _workspaces.get((what, dtype, device, stream))
    if buffer is None or buffer.numel() < numel:
        if buffer is not None:
            _outgrown.append(buffer)
        size = max(numel, 4096, 0 if buffer is None else 2 * buffer.numel())
        buffer = torch.zeros(size, dtype=dtype, device=device)
        _workspaces[(what, dtype, device, stream)] = buffer
    return buffer


def tile_counters(device: torch.device, tiles: int) -> torch.Tensor:
    """Split-K's counters, one per tile, zero between launches (the last slice of a tile
    resets its own)."""
    return _workspace("tile counters", device, tiles, torch.int32)


def partials(device: torch.device, numel: int) -> torch.Tensor:
    """Float32 room for split-K's partial tiles (every element is written before it is
    read)."""
    return _workspace("partials", device, numel, torch.float32)


# a prepared launch: ``ready(a, b, out)`` computes a @ b into out (a new tensor if None)
Ready = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


def _grouped_launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config,
                    precision: str) -> tuple[tuple, dict, tuple[int, int], int]:  # fmt: skip
    """The grouped kernel's grid, fixed arguments (sizes and strides) and constexprs."""
    (m, k), n = a.shape, b.shape[1]
    tiles = tile_count(config, m, n)
    fixed = (m, n, k, *a.stride(), *b.stride(), *out.stride())
    constexprs = dict(
        PRECISION=_precision(a, precision), BLOCK_M=config.block_m, BLOCK_N=config.block_n,
        BLOCK_K=config.block_k, GROUP_M=config.group_m, SPLIT_K=config.split_k,
        ALIGN_M=_alignment(m), ALIGN_N=_alignment(n),
        ALIGN_AM=_alignment(a.stride(0)), ALIGN_AK=_alignment(a.stride(1)),
        ALIGN_BK=_alignment(b.stride(0)), ALIGN_BN=_alignment(b.stride(1)),
        EVEN_K=k % (config.block_k * config.split_k) == 0,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    return fixed, constexprs, (tiles, config.split_k), tiles


def _alignment(stride: int) -> int:
    """The largest power of two, up to 16, that divides ``stride`` (1 for 0)."""
    return min(stride & -stride, 16) if stride > 0 else 1


def _scratch(out: torch.Tensor, config: Config, tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split-K's float32 partials and tile counters (``out`` twice without split-K: unused)."""
    if config.split_k == 1:
        return out, out
    m, n = out.shape
    return partials(out.device, config.split_k * m * n), tile_counters(out.device, tiles)


def launch_grouped(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: Config,
    precision: str = "tf32",
) -> torch.Tensor:
    """Run :func:`grouped_matmul_kernel` with ``config`` into ``out`` (no input checks), in
    one launch also with split-K."""
    if a.shape[0] == 0 or b.shape[1] == 0:
        return out
    fixed, constexprs, grid, tiles = _grouped_launch(a, b, out, config, precision)
    _grouped(grid, (a, b, out, *_scratch(out, config, tiles), *fixed), **constexprs)
    return out


def prepare_grouped(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config, precision: str = "tf32"
) -> Ready:
    """Launch :func:`launch_grouped` once, and return a :data:`Ready` for later calls with
    tensors shaped, strided and aligned like these."""
    fixed, constexprs, grid, tiles = _grouped_launch(a, b, out, config, precision)

    def operands(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> tuple:
        return (a, b, out, *_scratch(out, config, tiles))

    def arguments(tensors: tuple, checked: bool) -> tuple:
        return (*tensors, *fixed)

    return _prepared(_grouped, grid, operands, arguments, constexprs, a, b, out)


def _prepared(
    quick: QuickLaunch, grid: tuple, operands: Callable, arguments: Callable, constexprs: dict,
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
) -> Ready:  # fmt: skip
    """Launch ``quick`` once on a, b and out, and return the :data:`Ready` that repeats it
    for new tensors shaped like these. ``operands(a, b, out)`` gives the tensors the kernel
    reads and writes (copies, for tensors it cannot read as they are; scratch), and
    ``arguments(tensors, checked)`` the kernel's arguments for them (``checked``: shaped like
    the first call's, no need to check them again). Those depend on nothing but the tensors'
    addresses, so a launch on the addresses of an earlier one passes what it passed then
    (:meth:`PreparedLaunch.keyed`)."""
    launch = quick.prepared(grid, arguments(operands(a, b, out), False), **constexprs)
    shape, dtype, device = out.shape, out.dtype, out.device

    def ready(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        if out is None:
            out = torch.empty(shape, dtype=dtype, device=device)
        tensors = operands(a, b, out)
        launch.keyed(tuple(t.data_ptr() for t in tensors), lambda: arguments(tensors, True))
        return out

    return ready


def program_slots() -> int:
    """How many persistent programs to launch: one per SM on a GPU, a few on the CPU."""
    here = gpu.current()
    return 4 if here is None else here.sms


def tile_count(config: Config, m: int, n: int) -> int:
    """How many BLOCK_M x BLOCK_N tiles cover an m x n product."""
    return triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)


def slices_of_the_tail(config: Config, m: int, n: int, k: int, slots: int) -> int:
    """Into how many K-slices the persistent kernel with ``config`` cuts each tile of its
    last wave on ``slots`` SMs (:func:`tail_splits`; 1 without ``split_tail``)."""
    if not config.split_tail:
        return 1
    return tail_splits(tile_count(config, m, n), slots, triton.cdiv(k, config.block_k))


def tail_splits(tiles: int, slots: int, k_steps: int) -> int:
    """Into how many K-slices the persistent kernel cuts each tile of its last, partial wave
    (``tiles % slots`` of them) so that the slices come close to one per SM: 1 (no split)
    for a full or more than half full last wave; at most 8, and at least 4 K-steps each."""
    tail = tiles % slots
    return 1 if tail == 0 else max(1, min(slots // tail, k_steps // 4, 8))



def aligned_like(t: torch.Tensor, what: str | None = None) -> torch.Tensor:
    """An uninitialised tensor shaped like ``t`` whose rows start on 128-byte boundaries (the
    row pitch rounded up; the columns past the last one are never read or written): the TMA
    needs 16, and reads rows a whole number of 128-byte lines apart fastest. With ``what``,
    its memory is the per-stream workspace of that name (:func:`_workspace`): the same
    address call after call."""
    rows, cols = t.shape
    per = 128 // t.element_size()
    pitch = -(-cols // per) * per
    if what is None:
        return torch.empty((rows, pitch), dtype=t.dtype, device=t.device)[:, :cols]
    memory = _workspace(what, t.device, rows * pitch, t.dtype)
    key = (memory.data_ptr(), memory.dtype, rows, cols)
    view = _views.get(key)
    if view is None:  # three view operations: several microseconds a call, so kept
        if len(_views) >= 256:
            _views.clear()
        view = _views[key] = memory[: rows * pitch].view(rows, pitch)[:, :cols]
    return view


_views: dict[tuple, torch.Tensor] = {}  # (address, dtype, rows, columns) -> aligned_like's view



_transpose = QuickLaunch(transpose_kernel, tmm_course.BACKEND)
TRANSPOSE_BLOCK = 64


def _prepare_transpose(src: torch.Tensor, dst: torch.Tensor) -> Callable:
    """Copy ``src`` turned around into ``dst`` now, and return the copy for later tensors
    shaped like these: ``copy(src, dst)``."""
    (r, c), block = src.shape, TRANSPOSE_BLOCK
    grid = (triton.cdiv(r, block), triton.cdiv(c, block))

    def arguments(src: torch.Tensor, dst: torch.Tensor) -> tuple:
        return (src, dst, r, c, *src.stride(), *dst.stride())

    launch = _transpose.prepared(grid, arguments(src, dst), BLOCK=block, num_warps=4)

    def copy(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        launch.keyed((src.data_ptr(), dst.data_ptr()), lambda: arguments(src, dst))
        return dst

    return copy


class _Checked(TensorDescriptor or object):
    """A tensor descriptor made without checking its arguments again: a prepared launch's
    later calls describe tensors shaped like those its first call checked."""

    def __post_init__(self) -> None:
        pass

    @classmethod
    def of(cls, t: torch.Tensor, block_shape: list[int]) -> _Checked:
        return cls(t, t.shape, t.stride(), block_shape)


def _persistent_launch(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config, precision: str, stage: bool
) -> tuple[Callable, Callable, dict, tuple[int]]:
    """The persistent kernel's ``operands(a, b, out)`` and ``arguments(tensors, checked)``
    (see :func:`_prepared`), its constexprs and grid. A column-major operand is read as the
    row-major matrix it is the transpose of; B^T is read from a copy for float32, whose tensor
    cores need K-major B; with ``stage``, A or B whose rows the TMA cannot read (float32 A
    column-major, say) is copied into one it can, and such a C is stored by pointer. Copies
    live in per-stream workspaces, so they keep their addresses from call to call."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    a_transposed, transposed = reads_a_transposed(a), reads_b_transposed(b)
    copy_b = transposed and b.stride(0) != 1
    stage_a = stage and not readable(a.t() if a_transposed else a)
    by_pointer = stage and not readable(out)
    stage_b = stage and not copy_b and not readable(b.t() if transposed else b)
    a_block = [bk, bm] if a_transposed else [bm, bk]
    b_block = [bn, bk] if transposed else [bk, bn]
    c_block = [bm, bn // 2] if config.subtile else [bm, bn]
    tiles = tile_count(config, m, n)
    splits = slices_of_the_tail(config, m, n, k, program_slots())
    programs = program_slots() if splits > 1 else min(program_slots(), tiles)
    tail = tiles % programs
    turn_around = None  # the copy of B^T, once prepared

    def operands(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> tuple:
        nonlocal turn_around
        a = a.t() if a_transposed else a
        if stage_a:
            a = aligned_like(a, "staged A").copy_(a)
        if copy_b:
            b_read = aligned_like(b.t(), "B^T")
            if turn_around is None:
                turn_around = _prepare_transpose(b, b_read)
            else:
                turn_around(b, b_read)
        else:
            b_read = b.t() if transposed else b
            if stage_b:
                b_read = aligned_like(b_read, "staged B").copy_(b_read)
        if splits > 1:
            scratch = partials(out.device, tail * splits * bm * bn), tile_counters(out.device, tail)
        else:  # unused: any long-lived tensor will do
            scratch = (tile_counters(out.device, 1),) * 2
        return (a, b_read, out, *scratch)

    def arguments(tensors: tuple, checked: bool) -> tuple:
        a_read, b_read, out, *scratch = tensors
        describe = _Checked.of if checked else TensorDescriptor.from_tensor
        c = out if by_pointer else describe(out, c_block)
        c_strides = out.stride() if by_pointer else (0, 0)
        return (describe(a_read, a_block), describe(b_read, b_block), c, *scratch, m, n, k,
                *c_strides)  # fmt: skip

    constexprs = dict(
        PRECISION=_precision(a, precision), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_M=config.group_m, NUM_PROGRAMS=programs, A_TRANSPOSED=a_transposed,
        B_TRANSPOSED=transposed, SUBTILE=config.subtile, TAIL_SPLITS=splits,
        C_BY_POINTER=by_pointer, num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    return operands, arguments, constexprs, (programs,)


def launch_persistent_tma(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: Config,
    precision: str = "tf32",
) -> torch.Tensor:
    """Run :func:`persistent_tma_matmul_kernel` with ``config`` into ``out``; the tensors must
    pass :func:`tma_problem` (no input checks here)."""
    operands, arguments, constexprs, grid = _persistent_launch(a, b, out, config, precision, False)
    args = arguments(operands(a, b, out), False)
    _persistent(grid, args, **constexprs)
    return out


def prepare_persistent_tma(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: Config,
    precision: str = "tf32",
    stage: bool = False,
) -> Ready:
    """Launch :func:`launch_persistent_tma` once, and return a :data:`Ready` for later calls
    with tensors shaped, strided and aligned like these. ``stage``: tensors whose rows the TMA
    cannot read (:func:`tma_problem` with ``stage=False``) go through aligned copies (A, B)
    or are stored by pointer (C)."""
    operands, arguments, constexprs, grid = _persistent_launch(a, b, out, config, precision, stage)
    return _prepared(_persistent, grid, operands, arguments, constexprs, a, b, out)

