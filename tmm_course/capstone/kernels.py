"""Lesson 6: the fast kernels and their launches. A grouped pointer kernel that runs anywhere,
and a persistent kernel that loads through tensor descriptors (TMA on Hopper). Which one runs,
with which :class:`Config`, is :mod:`tmm_course.kernels.dispatch`'s choice (``matmul_fast``)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import gpu
from tmm_course.kernels.quick_launch import QuickLaunch

try:  # host-side tensor descriptors arrived in triton 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton
    TensorDescriptor = None



@dataclass(frozen=True)
class Config:
    """One way to launch a kernel: tile sizes, warps per program, pipeline depth, group of
    rows, how many slices K is cut into (grouped kernel), and for the persistent kernel
    whether C is stored in two halves (frees shared memory for one more pipeline stage),
    whether the tiles of a last, partial wave are shared out in K-slices (``split_tail``) and
    whether each tile is computed as C^T = B^T A^T (``swap_ab``: a few rows of A then sit on
    the narrow side of the tensor cores' instruction, whose other side needs 64 rows) and
    whether some warps only load while others compute (``warp_specialize``)."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8
    split_k: int = 1
    subtile: bool = False
    flatten: bool = True  # persistent kernel: let the compiler pipeline across tiles
    split_tail: bool = False
    swap_ab: bool = False
    warp_specialize: bool = False  # persistent kernel: loading warps apart from computing ones

    def __str__(self) -> str:
        text = f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"
        text += f" g{self.group_m}"
        if self.split_k > 1:
            text += f" split-K {self.split_k}"
        text += " subtiled" if self.subtile else ""
        text += " split tail" if self.split_tail else ""
        text += " swapped" if self.swap_ab else ""
        text += " warp-specialized" if self.warp_specialize else ""
        return text + ("" if self.flatten else " unflattened")

    @classmethod
    def from_text(cls, text: str) -> Config:
        """The configuration ``str(config)`` describes: "128x256x64 w8 s3 g8 subtiled"."""
        words = text.split()
        try:
            block_m, block_n, block_k = (int(x) for x in words[0].split("x"))
            split_k = int(words[words.index("split-K") + 1]) if "split-K" in words else 1
            return cls(
                block_m, block_n, block_k, num_warps=int(words[1][1:]),
                num_stages=int(words[2][1:]), group_m=int(words[3][1:]), split_k=split_k,
                subtile="subtiled" in words, flatten="unflattened" not in words,
                split_tail="tail" in words, swap_ab="swapped" in words,
                warp_specialize="warp-specialized" in words,
            )  # fmt: skip
        except (IndexError, ValueError) as exc:
            raise ValueError(
                f"{text!r} does not describe a Config; expected text like '128x256x64 w8 s3 "
                "g8 split-K 2 subtiled split tail swapped', as str(Config(...)) writes it."
            ) from exc


@triton.jit
def grouped_tile(tile_id, grid_m, grid_n, GROUP_M: tl.constexpr):
    # grouped order: GROUP_M rows of tiles are walked column by column, then the next group,
    # so programs running together share rows of A and columns of B in L2
    tiles_per_group = GROUP_M * grid_n
    first_m = (tile_id // tiles_per_group) * GROUP_M
    rows_here = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % tiles_per_group) % rows_here
    pid_n = (tile_id % tiles_per_group) // rows_here
    return pid_m, pid_n


@triton.jit
def grouped_matmul_kernel(a_ptr, b_ptr, c_ptr, partial_ptr, count_ptr, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
                          ALIGN_M: tl.constexpr, ALIGN_N: tl.constexpr,
                          ALIGN_AM: tl.constexpr, ALIGN_AK: tl.constexpr,
                          ALIGN_BK: tl.constexpr, ALIGN_BN: tl.constexpr, EVEN_K: tl.constexpr):
    # lesson 4's kernel on a grid whose programs take their tiles in grouped order; axis 1
    # cuts K into SPLIT_K slices: each leaves a float32 partial, and the last slice of a tile
    # to finish adds them up into C (one launch; count_ptr holds a counter per tile)
    tile = tl.program_id(axis=0)
    pid_m, pid_n = grouped_tile(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    slabs = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)  # K-slabs per slice
    k_first = tl.program_id(axis=1) * slabs * BLOCK_K
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # rows past M (columns past N) wrap onto real ones: loads need no mask on M and N, and
    # what they fetch there is never stored. ALIGN_*: the largest power of two (up to 16)
    # dividing M, N and each stride, so that loads move 16 bytes at once even where a size
    # is not a multiple of 16 (Triton then assumes nothing about it): rows wrapped at M
    # still come in runs of ALIGN_M that start on a multiple of ALIGN_M
    wrapped_m = tl.max_contiguous(tl.multiple_of(offs_m % M, ALIGN_M), ALIGN_M)
    wrapped_n = tl.max_contiguous(tl.multiple_of(offs_n % N, ALIGN_N), ALIGN_N)
    a_rows = tl.multiple_of(wrapped_m * stride_am, ALIGN_AM)
    a_cols = tl.multiple_of((k_first + offs_k) * stride_ak, ALIGN_AK)
    b_rows = tl.multiple_of((k_first + offs_k) * stride_bk, ALIGN_BK)
    b_cols = tl.multiple_of(wrapped_n * stride_bn, ALIGN_BN)
    a_ptrs = a_ptr + a_rows[:, None] + a_cols[None, :]
    b_ptrs = b_ptr + b_rows[:, None] + b_cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # whole slabs load without a mask; a last, partial one (K not a multiple of BLOCK_K)
    # is masked on its own, so that a mask does not stop every load moving 16 bytes at once
    k_here = tl.maximum(tl.minimum(K - k_first, slabs * BLOCK_K), 0)  # this slice's share
    for _ in range(0, k_here // BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if not EVEN_K:
        k_left = k_here % BLOCK_K
        if k_left > 0:
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    inside = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=inside)
    else:
        in_tile = offs_m[:, None] * N + offs_n[None, :]  # each partial is M x N, contiguous
        tl.store(partial_ptr + tl.program_id(axis=1) * M * N + in_tile, acc, mask=inside)
        arrived = tl.atomic_add(count_ptr + tile, 1)  # acq_rel: the partial above is visible
        if arrived == SPLIT_K - 1:  # every other slice of this tile has stored its partial
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for s in tl.static_range(SPLIT_K):
                total += tl.load(partial_ptr + s * M * N + in_tile, mask=inside, other=0.0,
                                 cache_modifier=".cg")
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=inside)
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next launch


@triton.jit
def _zeros(BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SWAP_AB: tl.constexpr):
    # a tile's float32 accumulator: C's tile, or with SWAP_AB its transpose
    if SWAP_AB:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    return acc


@triton.jit
def _tile_of_c(acc, SWAP_AB: tl.constexpr):
    # the accumulator as C's BLOCK_M x BLOCK_N tile
    if SWAP_AB:
        acc = acc.T
    return acc


@triton.jit
def _dot_step(a_desc, b_desc, acc, pid_m, pid_n, k, PRECISION: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              B_TRANSPOSED: tl.constexpr, SWAP_AB: tl.constexpr):
    # one K-step of a tile: load its slab of A and of B through the descriptors, add the product
    # (B_TRANSPOSED: b_desc describes B^T, N x K; SWAP_AB: add B^T A^T to C^T's tile, so that
    # BLOCK_N, not BLOCK_M, is the side of the tensor cores' instruction that needs 64 rows)
    a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
    if B_TRANSPOSED:
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T
    else:
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
    if SWAP_AB:
        acc = tl.dot(b.T, a.T, acc, input_precision=PRECISION)
    else:
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    return acc


@triton.jit
def _store_tile(c, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, SUBTILE: tl.constexpr, C_BY_POINTER: tl.constexpr):
    # c: C's tensor descriptor; or with C_BY_POINTER, C's address, for rows the TMA cannot
    # write (masked stores, as in lesson 4). SUBTILE: store C in two halves, so the staging
    # buffer in shared memory is half as big
    if C_BY_POINTER:
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        inside = (rows[:, None] < M) & (cols[None, :] < N)
        where = c + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(where, acc.to(c.dtype.element_ty), mask=inside)
    elif SUBTILE:
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(c.dtype))
        c.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(c.dtype))
    else:
        c.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c.dtype))


@triton.jit
def _add_up_slice(c, acc, partial_ptr, count_ptr, tile_id, piece, pid_m, pid_n, M, N,
                  stride_cm, stride_cn, SPLITS: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, SUBTILE: tl.constexpr, C_BY_POINTER: tl.constexpr):
    # one K-slice of a tail tile: leave its float32 partial; the last slice of the tile to
    # arrive adds up all SPLITS partials and stores the tile
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    first = partial_ptr + tile_id * SPLITS * BLOCK_M * BLOCK_N
    tl.store(first + piece * BLOCK_M * BLOCK_N + in_tile, acc)
    arrived = tl.atomic_add(count_ptr + tile_id, 1)  # acq_rel: the partial above is visible
    if arrived == SPLITS - 1:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLITS):
            total += tl.load(first + s * BLOCK_M * BLOCK_N + in_tile, cache_modifier=".cg")
        _store_tile(c, total, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N,
                    SUBTILE, C_BY_POINTER)
        tl.atomic_xchg(count_ptr + tile_id, 0)  # ready for the next launch


@triton.jit
def persistent_tma_matmul_kernel(a_desc, b_desc, c, partial_ptr, count_ptr, M, N, K,
                                 stride_cm, stride_cn,
                                 PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
                                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                 GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                                 B_TRANSPOSED: tl.constexpr, SUBTILE: tl.constexpr,
                                 FLATTEN: tl.constexpr, TAIL_SPLITS: tl.constexpr,
                                 SWAP_AB: tl.constexpr, C_BY_POINTER: tl.constexpr,
                                 WARP_SPECIALIZE: tl.constexpr):
    # one program per SM, each walking tiles NUM_PROGRAMS apart; the descriptors know the
    # shapes, so the hardware (TMA) fills tiles past an edge with zeros and clips stores
    # (c: C's descriptor, or its address with C_BY_POINTER; see _store_tile)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    tiles = grid_m * grid_n
    whole = tiles  # tiles computed whole; with TAIL_SPLITS > 1, the full waves only
    if TAIL_SPLITS > 1:
        whole = tiles - tiles % NUM_PROGRAMS
    for tile_id in tl.range(tl.program_id(axis=0), whole, NUM_PROGRAMS, flatten=FLATTEN,
                            warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = grouped_tile(tile_id, grid_m, grid_n, GROUP_M)
        acc = _zeros(BLOCK_M, BLOCK_N, SWAP_AB)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            acc = _dot_step(a_desc, b_desc, acc, pid_m, pid_n, k, PRECISION, BLOCK_M, BLOCK_N,
                            BLOCK_K, B_TRANSPOSED, SWAP_AB)
        _store_tile(c, _tile_of_c(acc, SWAP_AB), pid_m, pid_n, M, N, stride_cm, stride_cn,
                    BLOCK_M, BLOCK_N, SUBTILE, C_BY_POINTER)
    if TAIL_SPLITS > 1:
        # the last, partial wave: each of its tiles cut into TAIL_SPLITS K-slices, so that
        # every SM has a share of it instead of a few SMs doing all of it while the rest idle
        per_slice = tl.cdiv(tl.cdiv(K, BLOCK_K), TAIL_SPLITS)
        for job in range(tl.program_id(axis=0), (tiles - whole) * TAIL_SPLITS, NUM_PROGRAMS):
            tile_id = whole + job // TAIL_SPLITS
            piece = job % TAIL_SPLITS
            pid_m, pid_n = grouped_tile(tile_id, grid_m, grid_n, GROUP_M)
            acc = _zeros(BLOCK_M, BLOCK_N, SWAP_AB)
            k_end = tl.minimum((piece + 1) * per_slice, tl.cdiv(K, BLOCK_K))
            for k in range(piece * per_slice, k_end):
                acc = _dot_step(a_desc, b_desc, acc, pid_m, pid_n, k, PRECISION, BLOCK_M,
                                BLOCK_N, BLOCK_K, B_TRANSPOSED, SWAP_AB)
            _add_up_slice(c, _tile_of_c(acc, SWAP_AB), partial_ptr, count_ptr, tile_id - whole,
                          piece, pid_m, pid_n, M, N, stride_cm, stride_cn, TAIL_SPLITS,
                          BLOCK_M, BLOCK_N, SUBTILE, C_BY_POINTER)


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
    traits: Hashable = None,
) -> torch.Tensor:
    """Run :func:`grouped_matmul_kernel` with ``config`` into ``out`` (no input checks), in
    one launch also with split-K. ``traits``: a key that fixes the shapes, strides, dtypes and
    alignments of a, b and out."""
    if a.shape[0] == 0 or b.shape[1] == 0:
        return out
    fixed, constexprs, grid, tiles = _grouped_launch(a, b, out, config, precision)
    _grouped(grid, (a, b, out, *_scratch(out, config, tiles), *fixed),
             None if traits is None else (traits, config.split_k > 1), **constexprs)  # fmt: skip
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


def reads_b_transposed(b: torch.Tensor) -> bool:
    """Whether the persistent kernel reads B as B^T (N x K, rows along K): free when B is
    column-major already; a copy for float32, whose TF32 tensor cores need K-major B (read
    as it is, row-major B makes the kernel several times slower on an H200)."""
    return (b.stride(0) == 1 and b.shape[0] > 1) or b.dtype == torch.float32


def _readable(t: torch.Tensor) -> bool:
    """Whether a tensor descriptor can read ``t`` as it is: contiguous rows that start on
    16-byte boundaries."""
    rows_apart = t.stride(0) * t.element_size()
    return t.stride(1) == 1 and rows_apart % 16 == 0 and t.data_ptr() % 16 == 0


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


@triton.jit
def transpose_kernel(src_ptr, dst_ptr, R, C, stride_sr, stride_sc, stride_dr, stride_dc,
                     BLOCK: tl.constexpr):
    # dst (C x R) = src (R x C) turned around, a BLOCK x BLOCK tile per program: read along
    # the rows of src, written along the rows of dst (the tile turns around on the chip)
    rows = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    inside = (rows[:, None] < R) & (cols[None, :] < C)
    tile = tl.load(src_ptr + rows[:, None] * stride_sr + cols[None, :] * stride_sc, mask=inside)
    tl.store(dst_ptr + cols[:, None] * stride_dr + rows[None, :] * stride_dc, tl.trans(tile),
             mask=tl.trans(inside))  # fmt: skip


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
    (see :func:`_prepared`), its constexprs and grid. B^T is read from a copy for float32,
    whose tensor cores need K-major B; with ``stage``, A or B whose rows the TMA cannot read
    is copied into one it can, and such a C is stored by pointer. Copies live in per-stream
    workspaces, so they keep their addresses from call to call."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    transposed = reads_b_transposed(b)
    copy_b = transposed and b.stride(0) != 1
    stage_a, by_pointer = stage and not _readable(a), stage and not _readable(out)
    stage_b = stage and not copy_b and not _readable(b.t() if transposed else b)
    b_block = [bn, bk] if transposed else [bk, bn]
    c_block = [bm, bn // 2] if config.subtile else [bm, bn]
    tiles = tile_count(config, m, n)
    splits = slices_of_the_tail(config, m, n, k, program_slots())
    programs = program_slots() if splits > 1 else min(program_slots(), tiles)
    tail = tiles % programs
    turn_around = None  # the copy of B^T, once prepared

    def operands(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> tuple:
        nonlocal turn_around
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
        a, b_read, out, *scratch = tensors
        describe = _Checked.of if checked else TensorDescriptor.from_tensor
        c = out if by_pointer else describe(out, c_block)
        c_strides = out.stride() if by_pointer else (0, 0)
        return (describe(a, [bm, bk]), describe(b_read, b_block), c, *scratch, m, n, k, *c_strides)

    constexprs = dict(
        PRECISION=_precision(a, precision), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_M=config.group_m, NUM_PROGRAMS=programs, B_TRANSPOSED=transposed,
        SUBTILE=config.subtile, FLATTEN=config.flatten, TAIL_SPLITS=splits,
        SWAP_AB=config.swap_ab, C_BY_POINTER=by_pointer, WARP_SPECIALIZE=config.warp_specialize,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    return operands, arguments, constexprs, (programs,)


def launch_persistent_tma(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: Config,
    precision: str = "tf32",
    traits: Hashable = None,
) -> torch.Tensor:
    """Run :func:`persistent_tma_matmul_kernel` with ``config`` into ``out``; the tensors must
    pass :func:`tma_problem` (no input checks here)."""
    operands, arguments, constexprs, grid = _persistent_launch(a, b, out, config, precision, False)
    args = arguments(operands(a, b, out), False)
    _persistent(grid, args, None if traits is None else (traits, grid), **constexprs)
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


def _misaligned(name: str, row_stride: int, t: torch.Tensor) -> str | None:
    if (row_stride * t.element_size()) % 16 or t.data_ptr() % 16:
        return (
            f"{name}'s rows ({row_stride} elements of {t.element_size()} bytes apart) or its "
            "start address are not on 16-byte boundaries"
        )
    return None


def tma_problem(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, stage: bool = False
) -> str | None:
    """Why the persistent kernel cannot read these tensors through tensor descriptors, or
    None if it can: each needs contiguous rows that start on 16-byte boundaries, unless
    ``stage`` (then A and B go through aligned copies, and C is stored by pointer)."""
    if TensorDescriptor is None:
        return f"triton {triton.__version__} has no host-side tensor descriptors (3.4+)"
    here = gpu.current()
    if here is not None and not here.tma:
        major, minor = here.capability
        return f"TMA needs compute capability 9.0 (Hopper) or newer, not {major}.{minor}"
    named = [("a", a), ("b", b)] + ([] if out is None else [("out", out)])
    for name, t in named:
        if min(t.shape) == 0:
            return f"{name} is empty {tuple(t.shape)}"
    if stage:
        return None
    rows = {name: t.stride() for name, t in named}  # (row stride, column stride)
    if reads_b_transposed(b):  # B^T: b's columns if b is column-major, else a dense copy
        rows["b"] = (b.stride(1), 1) if b.stride(0) == 1 else (b.shape[0], 1)
    for name, t in named:
        row_stride, column_stride = rows[name]
        if column_stride != 1:
            return f"{name}'s rows are not contiguous (strides {t.stride()})"
        if problem := _misaligned(name, row_stride, t):
            return problem
    return None
