"""The capstone's launches: each kernel's grid, arguments and constexprs for a call; per-stream
workspaces (split-K partials, tile counters, aligned copies); and per call signature a
:data:`Ready`, which repeats a prepared launch (:mod:`~tmm_course.capstone.quick_launch`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from triton import knobs

import tmm_course
from tmm_course import gpu
from tmm_course.capstone import kernels
from tmm_course.capstone.config import Config
from tmm_course.capstone.kernels import readable, reads_a_transposed, reads_b_transposed
from tmm_course.capstone.quick_launch import PreparedLaunch

# a prepared launch: ``ready(a, b, out)`` computes a @ b into out (a new tensor if None)
Ready = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]
# one call signature's launch (see _ready): arguments, scratch, constexprs, grid, and what to
# do before each launch (copy operands, say; None: nothing)
Setup = tuple[Callable[..., tuple], bool, dict, tuple[int, ...], "Callable[..., None] | None"]


def _precision(a: torch.Tensor, precision: str) -> str | None:
    return gpu.precision_for(precision) if a.dtype == torch.float32 else None


def alignment(stride: int) -> int:
    """The largest power of two, up to 16, that divides ``stride`` (1 for 0)."""
    return min(stride & -stride, 16) if stride > 0 else 1


def _stream(device: torch.device) -> int:
    return torch._C._cuda_getCurrentRawStream(device.index) if device.type == "cuda" else 0


_workspaces: dict[tuple, torch.Tensor] = {}  # (what, dtype, device, stream) -> its buffer
_outgrown: list[torch.Tensor] = []  # buffers replaced by larger ones: kept, see _workspace


def _workspace(what: str, device: torch.device, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """A zeroed buffer of at least ``numel`` elements, one per purpose, dtype, device and
    stream (the launches of one stream run in turn, so they can share it). A buffer it outgrows
    is kept (a captured CUDA graph may still launch with it); each new one is at least twice
    the last, so those add up to less than the newest."""
    if device.type == "cuda" and device.index is None:  # "cuda": the current device
        device = torch.device("cuda", torch.cuda.current_device())
    where = (what, dtype, device, _stream(device))
    buffer = _workspaces.get(where)
    if buffer is None or buffer.numel() < numel:
        if buffer is not None:
            _outgrown.append(buffer)
        size = max(numel, 4096, 0 if buffer is None else 2 * buffer.numel())
        buffer = _workspaces[where] = torch.zeros(size, dtype=dtype, device=device)
    return buffer


def tile_counters(device: torch.device, tiles: int) -> torch.Tensor:
    """Split-K's counters, one per tile, zero between launches (a tile's last slice resets it)."""
    return _workspace("tile counters", device, tiles, torch.int32)


def partials(device: torch.device, numel: int) -> torch.Tensor:
    """Float32 room for split-K's partial tiles (each element is written before it is read)."""
    return _workspace("partials", device, numel, torch.float32)


def aligned_like(t: torch.Tensor, what: str | None = None) -> torch.Tensor:
    """An uninitialised tensor shaped like ``t`` whose rows start on 128-byte boundaries (the
    pitch rounded up; columns past the last are never touched): the TMA needs 16, and reads
    rows whole 128-byte lines apart fastest. With ``what``, in the per-stream workspace of that
    name (:func:`_workspace`): the same address call after call."""
    rows, cols = t.shape
    per = 128 // t.element_size()
    pitch = -(-cols // per) * per
    if what is None:
        return torch.empty((rows, pitch), dtype=t.dtype, device=t.device)[:, :cols]
    memory = _workspace(what, t.device, rows * pitch, t.dtype)
    return memory[: rows * pitch].view(rows, pitch)[:, :cols]


def _ready(kernel: object, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, setup: Setup
           ) -> Ready:  # fmt: skip
    """Launch ``kernel`` once with ``setup``; the :data:`Ready` that repeats it for tensors
    like these. ``arguments(a, b, out)``: its arguments, which depend on nothing but the
    addresses (and with ``scratch`` the stream's workspaces), the launch's key."""
    arguments, scratch, constexprs, grid, before = setup
    if before is not None:
        before(a, b)
    launch = PreparedLaunch(kernel, grid, arguments(a, b, out), constexprs, tmm_course.BACKEND)
    shape, device = tuple(out.shape), out.device  # C has A's dtype and device

    def ready(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        if out is None:
            out = a.new_empty(shape)  # a plain tuple: the fastest allocation torch has
        key, stream = (a.data_ptr(), b.data_ptr(), out.data_ptr()), None
        if scratch:  # the workspaces' addresses depend on the stream, and on their growth
            stream = _stream(device)
            key += (stream, len(_outgrown))
        if before is not None:
            before(a, b)
        launch(key, lambda: arguments(a, b, out), stream)
        return out

    return ready


def tile_count(config: Config, m: int, n: int) -> int:
    """How many BLOCK_M x BLOCK_N tiles cover an m x n product."""
    return _cdiv(m, config.block_m) * _cdiv(n, config.block_n)


def _cdiv(x: int, y: int) -> int:
    """x / y rounded up in plain ints: the plan counts tiles for every candidate and neighbour."""
    return -(-x // y)


def _room(t: torch.Tensor, what: str) -> torch.Tensor:
    """Where the grouped kernel reads a copy of ``t``: :func:`aligned_like`'s workspace ``what``,
    in ``t``'s layout (a column-major ``t``'s columns start on 128-byte boundaries)."""
    if t.stride(0) == 1 and t.stride(1) != 1:
        return aligned_like(t.t(), what).t()
    return aligned_like(t, what)


def grouped_setup(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config,
                  precision: str, copies: bool = True) -> Setup:  # fmt: skip
    """The grouped kernel's :data:`Setup`: it reads A and B as they are, or an operand whose
    lines are off 16-byte boundaries (:func:`kernels.rows_on_16_bytes`) copied before each
    launch into a per-stream workspace whose lines start on 128-byte ones. Read as they are,
    each load moved 2 bytes, none of them asynchronously: on an H200 3001x2999x4093 float16 took
    3.9 ms in 128x256x64 tiles, where lesson 4's kernel took 0.87 ms; copied, 0.21 ms (grid_h200
    .json's paths). 333x7777x2222 in 128x128x64 tiles ran at 0.45x torch as it is, 1.55x copied.
    Without ``copies`` it reads every operand in place (where a copy costs more than it saves:
    :func:`plans.copies_pay`)."""
    (m, k), n = a.shape, b.shape[1]
    tiles = tile_count(config, m, n)
    copy_a = copies and not kernels.rows_on_16_bytes(a)
    copy_b = copies and not kernels.rows_on_16_bytes(b)
    view_a = (lambda a: _room(a, "A copied")) if copy_a else (lambda a: a)
    view_b = (lambda b: _room(b, "B copied")) if copy_b else (lambda b: b)
    a_in, b_in = view_a(a), view_b(b)  # what the kernel reads
    # in a copy, rows wrap at M rounded up (a column-major A), columns at N (a row-major B):
    # inside the padded lines, so that the runs the loads take stay 16 bytes long
    wrap = lambda size, copied, along: -(-size // 16) * 16 if copied and along == 1 else size
    wrap_m, wrap_n = wrap(m, copy_a, a_in.stride(0)), wrap(n, copy_b, b_in.stride(1))
    fixed = (m, n, k, wrap_m, wrap_n, *a_in.stride(), *b_in.stride(), *out.stride())
    split = config.split_k > 1

    def arguments(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> tuple:
        scratch = (partials(out.device, config.split_k * m * n),
                   tile_counters(out.device, tiles)) if split else (out, out)  # fmt: skip
        return (view_a(a), view_b(b), out, *scratch, *fixed)

    def before(a: torch.Tensor, b: torch.Tensor) -> None:
        for copied, view, t in ((copy_a, view_a, a), (copy_b, view_b, b)):
            if copied:
                view(t).copy_(t)

    constexprs = dict(
        PRECISION=_precision(a, precision), BLOCK_M=config.block_m, BLOCK_N=config.block_n,
        BLOCK_K=config.block_k, GROUP_M=config.group_m, SPLIT_K=config.split_k,
        ALIGN_M=alignment(wrap_m), ALIGN_N=alignment(wrap_n),
        ALIGN_AM=alignment(a_in.stride(0)), ALIGN_AK=alignment(a_in.stride(1)),
        ALIGN_BK=alignment(b_in.stride(0)), ALIGN_BN=alignment(b_in.stride(1)),
        EVEN_K=k % (config.block_k * config.split_k) == 0,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    copies = copy_a or copy_b
    grid = (tiles, config.split_k)
    return arguments, split or copies, constexprs, grid, before if copies else None


def launch_grouped(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config,
                   precision: str = "tf32", copies: bool = True) -> torch.Tensor:  # fmt: skip
    """The grouped kernel into ``out`` on Triton's own path (no checks), split-K in one launch."""
    if a.shape[0] and b.shape[1]:
        setup = grouped_setup(a, b, out, config, precision, copies)
        arguments, _, constexprs, grid, before = setup
        if before is not None:
            before(a, b)
        kernels.grouped_matmul_kernel[grid](*arguments(a, b, out), **constexprs)
    return out


def prepare_grouped(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config,
                    precision: str = "tf32", copies: bool = True) -> Ready:  # fmt: skip
    """Launch the grouped kernel once: a :data:`Ready` for later calls of this signature."""
    setup = grouped_setup(a, b, out, config, precision, copies)
    return _ready(kernels.grouped_matmul_kernel, a, b, out, setup)


def program_slots() -> int:
    """How many persistent programs to launch: one per SM on a GPU, a few on the CPU."""
    here = gpu.current()
    return 4 if here is None else here.sms


def slices_of_the_tail(config: Config, m: int, n: int, k: int, slots: int) -> int:
    """:func:`tail_splits` for ``config`` on ``slots`` SMs (1 without ``split_tail``)."""
    if not config.split_tail:
        return 1
    return tail_splits(tile_count(config, m, n), slots, _cdiv(k, config.block_k))


K_STEPS_A_SLICE, MOST_SLICES = 8, 8  # a split tile: 1 K-slice per 8 K-steps, 8 slices at most


def tail_splits(tiles: int, slots: int, k_steps: int) -> int:
    """Into how many K-slices (of ceil(k_steps / slices) K-steps, the last what is left) the
    persistent kernel cuts each tile of its last wave, for about one slice per SM: 1 for a full
    or more than half full wave. A slice pays a pipeline's fill and a partial's trip through
    memory, which short ones do not earn back: on an H200 512^3 float32 ran at 0.74x torch in 2
    slices of 4 K-steps, 0.86x whole; 3072^3 float16 at 0.85x in 5 slices of 10, 0.78x whole."""
    tail = tiles % slots
    return 1 if tail == 0 else max(1, min(slots // tail, k_steps // K_STEPS_A_SLICE, MOST_SLICES))


def copy_tile(dtype: torch.dtype, elements: int) -> int:
    """The side of the tiles the persistent kernel copies in, for a copy of ``elements``: 64, or
    128 for float32 copies of 2**22 elements or more, where more bytes in flight per program
    keep the copy from waiting on memory (8192^3 float32 took 3.48 ms, not 3.90, on an H200)."""
    return 128 if dtype == torch.float32 and elements >= 1 << 22 else 64


def persistent_tma_setup(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config,
                         precision: str) -> Setup:  # fmt: skip
    """The persistent kernel's :data:`Setup`. A column-major operand is read as the row-major
    matrix it is the transpose of; an operand whose rows the TMA cannot read as they are (and
    B^T for float32) is copied by the kernel itself first, into a per-stream workspace (the
    same address call after call); a C whose rows the TMA cannot write is stored by pointer."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    a_transposed, transposed = reads_a_transposed(a), reads_b_transposed(b)
    view_a = (lambda a: a.t()) if a_transposed else (lambda a: a)  # what a_desc describes
    view_b = (lambda b: b.t()) if transposed else (lambda b: b)
    copy_a, copy_b = not readable(view_a(a)), not readable(view_b(b))
    copies = copy_a or copy_b
    by_pointer = not readable(out)
    blocks = ([bk, bm] if a_transposed else [bm, bk], [bn, bk] if transposed else [bk, bn],
              [bm, bn // 2] if config.subtile else [bm, bn])  # fmt: skip
    tiles = tile_count(config, m, n)
    # the interpreter (Triton's knob; the check's replay of a GPU case too) runs programs in
    # turn: a copying launch there is one program, with no barrier (a GPU has more than one SM)
    slots = 1 if copies and knobs.runtime.interpret else program_slots()
    splits = slices_of_the_tail(config, m, n, k, slots)
    # every SM a program when tails are split or there are copies to share out; else one a tile
    programs = slots if splits > 1 or copies else min(slots, tiles)
    tail = tiles % programs
    tile = copy_tile(a.dtype, max(a.numel() if copy_a else 0, b.numel() if copy_b else 0))

    def copy(t: torch.Tensor, copied: bool, what: str) -> tuple:
        room = aligned_like(t, what) if copied else t
        return room, (t, room, *t.stride(), room.stride(0))

    def arguments(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> tuple:
        (a_room, a_copy), (b_room, b_copy) = (copy(view_a(a), copy_a, "A copied"),
                                              copy(view_b(b), copy_b, "B copied"))  # fmt: skip
        describe = kernels.TensorDescriptor.from_tensor
        c = out if by_pointer else describe(out, blocks[2])
        scratch = (partials(out.device, tail * splits * bm * bn),
                   tile_counters(out.device, tail)) if splits > 1 else (out, out)  # fmt: skip
        return (describe(a_room, blocks[0]), describe(b_room, blocks[1]), c, *scratch, m, n, k,
                *(out.stride() if by_pointer else (0, 0)), *a_copy, *b_copy,
                _workspace("arrivals", out.device, 1, torch.int64) if copies else out)  # fmt: skip

    constexprs = dict(
        PRECISION=_precision(a, precision), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_M=config.group_m, NUM_PROGRAMS=programs, A_TRANSPOSED=a_transposed,
        B_TRANSPOSED=transposed, SUBTILE=config.subtile, TAIL_SPLITS=splits,
        C_BY_POINTER=by_pointer, COPY_A=copy_a, COPY_B=copy_b, COPY_TILE=tile,
        num_warps=config.num_warps,
        num_stages=config.num_stages, launch_cooperative_grid=copies,
    )  # fmt: skip
    return arguments, splits > 1 or copies, constexprs, (programs,), None


def launch_persistent_tma(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config,
                          precision: str = "tf32") -> torch.Tensor:  # fmt: skip
    """The persistent kernel into ``out`` on Triton's own path, unchecked (:func:`tma_problem`)."""
    arguments, _, constexprs, grid, _ = persistent_tma_setup(a, b, out, config, precision)
    kernels.persistent_tma_matmul_kernel[grid](*arguments(a, b, out), **constexprs)
    return out


def prepare_persistent_tma(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config,
                           precision: str = "tf32") -> Ready:  # fmt: skip
    """:func:`prepare_grouped` for the persistent kernel (copies and C by pointer as needed)."""
    setup = persistent_tma_setup(a, b, out, config, precision)
    return _ready(kernels.persistent_tma_matmul_kernel, a, b, out, setup)
