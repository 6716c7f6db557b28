"""The capstone's Triton kernels: a grouped pointer kernel that runs anywhere, a persistent kernel
that loads through tensor descriptors (TMA on Hopper), copying first what they cannot read as it
is; and what the TMA can read."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tmm_course import gpu
from tmm_course.kernels.launch_order import grouped_tile

ROUND = tl.constexpr(1 << 20)  # the grid barrier's count: more than any GPU has SMs

# fmt: off
# the kernels keep the hand layout a learner reads (argument groups, aligned comments)
__all__ = ["TensorDescriptor", "grouped_matmul_kernel", "grouped_tile",
           "persistent_tma_matmul_kernel", "reads_a_transposed", "reads_b_transposed",
           "rows_on_16_bytes", "tma_problem"]


@triton.jit
def grouped_matmul_kernel(a_ptr, b_ptr, c_ptr, partial_ptr, count_ptr, M, N, K,
                          wrap_m, wrap_n, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn,
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
    # rows past M (columns past N) wrap onto ones in memory: loads need no mask on M and N,
    # and what they fetch there is never stored. They wrap at wrap_m and wrap_n: M and N, or
    # in a copy whose rows are padded to 16 bytes (launches.grouped_setup), at M or N rounded
    # up. ALIGN_*: the largest power of two (up to 16) dividing wrap_m, wrap_n and each
    # stride, so that loads move 16 bytes at once even where a size is not a multiple of 16
    # (Triton then assumes nothing about it): rows wrapped at wrap_m still come in runs of
    # ALIGN_M that start on a multiple of ALIGN_M
    wrapped_m = tl.max_contiguous(tl.multiple_of(offs_m % wrap_m, ALIGN_M), ALIGN_M)
    wrapped_n = tl.max_contiguous(tl.multiple_of(offs_n % wrap_n, ALIGN_N), ALIGN_N)
    a_rows = tl.multiple_of(wrapped_m * stride_am, ALIGN_AM)
    a_cols = tl.multiple_of(offs_k * stride_ak, ALIGN_AK)
    b_rows = tl.multiple_of(offs_k * stride_bk, ALIGN_BK)
    b_cols = tl.multiple_of(wrapped_n * stride_bn, ALIGN_BN)
    # the slice's first K column moves the base pointers, not every offset: on an H200 with
    # Triton 3.6 this ran 8-19% faster than k_first added to the offsets (2048^3, 1536^3)
    a_ptrs = a_ptr + k_first * stride_ak + a_rows[:, None] + a_cols[None, :]
    b_ptrs = b_ptr + k_first * stride_bk + b_rows[:, None] + b_cols[None, :]
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
def _dot_step(a_desc, b_desc, acc, pid_m, pid_n, k, PRECISION: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              A_TRANSPOSED: tl.constexpr, B_TRANSPOSED: tl.constexpr):
    # one K-step of a tile: load its slab of A and of B through the descriptors, add the product.
    # A column-major operand is described as the row-major matrix it is the transpose of
    # (A_TRANSPOSED: a_desc describes A^T, K x M; B_TRANSPOSED: b_desc describes B^T, N x K),
    # and its tile turned around on the chip after the load
    if A_TRANSPOSED:
        a = a_desc.load([k * BLOCK_K, pid_m * BLOCK_M]).T
    else:
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
    if B_TRANSPOSED:
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T
    else:
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
    return tl.dot(a, b, acc, input_precision=PRECISION)


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
def persistent_tma_matmul_kernel(a_desc, b_desc, c, partial_ptr, count_ptr, M, N, K,
                                 stride_cm, stride_cn,
                                 a_src, a_room, stride_a0, stride_a1, pitch_a,
                                 b_src, b_room, stride_b0, stride_b1, pitch_b, arrivals_ptr,
                                 PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
                                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                 GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                                 A_TRANSPOSED: tl.constexpr, B_TRANSPOSED: tl.constexpr,
                                 SUBTILE: tl.constexpr, TAIL_SPLITS: tl.constexpr,
                                 C_BY_POINTER: tl.constexpr, COPY_A: tl.constexpr,
                                 COPY_B: tl.constexpr, COPY_TILE: tl.constexpr):
    # one program per SM, each walking tiles NUM_PROGRAMS apart; the descriptors know the
    # shapes, so the hardware (TMA) fills tiles past an edge with zeros and clips stores
    # (c: C's descriptor, or its address with C_BY_POINTER; see _store_tile)
    if COPY_A or COPY_B:
        # first, the copies the descriptors read (a_desc describes a_room, b_desc b_room):
        # rows the TMA cannot read, or B^T for float32, whose TF32 tensor cores need K-major
        # B; every program copies its share (in COPY_TILE-square tiles: launches.copy_tile),
        # then waits until all have. On the interpreter, whose programs run one after another,
        # the launch is one program (launches.persistent_tma_setup), which waits for nobody
        if COPY_A:
            _copy_tiles(a_src, a_room, K if A_TRANSPOSED else M, M if A_TRANSPOSED else K,
                        stride_a0, stride_a1, pitch_a, NUM_PROGRAMS, COPY_TILE)
        if COPY_B:
            _copy_tiles(b_src, b_room, N if B_TRANSPOSED else K, K if B_TRANSPOSED else N,
                        stride_b0, stride_b1, pitch_b, NUM_PROGRAMS, COPY_TILE)
        if NUM_PROGRAMS > 1:
            _wait_for_all(arrivals_ptr, NUM_PROGRAMS)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    tiles = grid_m * grid_n
    whole = tiles - tiles % NUM_PROGRAMS if TAIL_SPLITS > 1 else tiles  # the full waves' tiles
    # flatten: the compiler pipelines loads across the end of one tile and the start of the next
    for tile_id in tl.range(tl.program_id(axis=0), whole, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, grid_m, grid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            acc = _dot_step(a_desc, b_desc, acc, pid_m, pid_n, k, PRECISION, BLOCK_M, BLOCK_N,
                            BLOCK_K, A_TRANSPOSED, B_TRANSPOSED)
        _store_tile(c, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, SUBTILE,
                    C_BY_POINTER)
    if TAIL_SPLITS > 1:
        # the last, partial wave: each of its tiles cut into TAIL_SPLITS K-slices, so that
        # every SM has a share of it instead of a few SMs doing all of it while the rest idle
        per_slice = tl.cdiv(tl.cdiv(K, BLOCK_K), TAIL_SPLITS)
        for job in range(tl.program_id(axis=0), (tiles - whole) * TAIL_SPLITS, NUM_PROGRAMS):
            tile_id = whole + job // TAIL_SPLITS
            piece = job % TAIL_SPLITS
            pid_m, pid_n = grouped_tile(tile_id, grid_m, grid_n, GROUP_M)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            k_end = tl.minimum((piece + 1) * per_slice, tl.cdiv(K, BLOCK_K))
            for k in range(piece * per_slice, k_end):
                acc = _dot_step(a_desc, b_desc, acc, pid_m, pid_n, k, PRECISION, BLOCK_M,
                                BLOCK_N, BLOCK_K, A_TRANSPOSED, B_TRANSPOSED)
            # this slice's float32 partial; the tile's last slice to arrive adds up all of them
            in_tail = tile_id - whole
            in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            first = partial_ptr + in_tail * TAIL_SPLITS * BLOCK_M * BLOCK_N
            tl.store(first + piece * BLOCK_M * BLOCK_N + in_tile, acc)
            arrived = tl.atomic_add(count_ptr + in_tail, 1)  # acq_rel: the partial is visible
            if arrived == TAIL_SPLITS - 1:
                total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for s in tl.static_range(TAIL_SPLITS):
                    total += tl.load(first + s * BLOCK_M * BLOCK_N + in_tile, cache_modifier=".cg")
                _store_tile(c, total, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N,
                            SUBTILE, C_BY_POINTER)
                tl.atomic_xchg(count_ptr + in_tail, 0)  # ready for the next launch


@triton.jit
def _copy_tiles(src, dst, R, C, stride_r, stride_c, pitch, NUM_PROGRAMS: tl.constexpr,
                TILE: tl.constexpr):
    # dst (R x C, rows pitch apart) = src (R x C, any strides), in TILE x TILE tiles, this
    # program's share: read along whichever axis of src is contiguous, written along the rows
    # of dst (a tile turned around goes through shared memory on the way)
    per_row = tl.cdiv(C, TILE)
    for t in range(tl.program_id(axis=0), tl.cdiv(R, TILE) * per_row, NUM_PROGRAMS):
        rows = (t // per_row) * TILE + tl.arange(0, TILE)
        cols = (t % per_row) * TILE + tl.arange(0, TILE)
        inside = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(src + rows[:, None] * stride_r + cols[None, :] * stride_c, mask=inside)
        tl.store(dst + rows[:, None] * pitch + cols[None, :], tile, mask=inside)


@triton.jit
def _wait_for_all(arrivals_ptr, NUM_PROGRAMS: tl.constexpr):
    # a barrier across the grid (a cooperative launch: every program is on an SM at once). The
    # count only grows: each program adds 1, and the last to arrive rounds it up to the next
    # multiple of ROUND, which every program waits for. Release and acquire make the copies
    # visible; the proxy fence, to the TMA's reads
    tl.debug_barrier()  # this program's threads have all stored
    arrived = tl.atomic_add(arrivals_ptr, 1, sem="acq_rel", scope="gpu")
    goal = (arrived // ROUND + 1) * ROUND
    if arrived % ROUND == NUM_PROGRAMS - 1:
        tl.atomic_add(arrivals_ptr, ROUND - NUM_PROGRAMS, sem="release", scope="gpu")
    while tl.atomic_add(arrivals_ptr, 0, sem="acquire", scope="gpu") < goal:
        pass
    tl.inline_asm_elementwise("fence.proxy.async.global; // $0", "=r", [], dtype=tl.int32,
                              is_pure=False, pack=1)


# fmt: on


def reads_a_transposed(a: torch.Tensor) -> bool:
    """Whether the persistent kernel reads A as A^T (K x M, rows along M): a column-major A of
    a 16-bit dtype (float32 A goes through a row-major copy: TF32 tensor cores need K-major A)."""
    return a.stride(0) == 1 and a.stride(1) != 1 and a.dtype != torch.float32


def reads_b_transposed(b: torch.Tensor) -> bool:
    """Whether the persistent kernel reads B as B^T (N x K, rows along K): free for column-major
    B of 2+ rows; a copy for row-major float32 B (TF32 tensor cores need K-major B). Uncopied,
    Triton 3.6 turns each float32 tile around in shared memory every K-step: as C^T = B^T A^T,
    2048^3 and 4096^3 ran at 0.20-0.35x torch on an H200, against 0.81x and 0.86x stored. With
    B^T's tile read into registers instead (the one operand wgmma takes from there), a kernel of
    one tile per program ran them at 0.64x and 0.61x at best; given B^T, at 0.86x and 0.90x. On
    an H100 (2026-12-07), B read as it is ran 1536x6144x1536, 2048x8192x2048, 4096^3 and 3000^3
    at 0.27x, 0.23x, 0.21x and 0.31x torch at best; B^T copied first at 0.75x, 0.79x, 0.81x and
    1.03x; given B column-major (nothing to copy) at 0.98x, 0.99x, 0.94x and 1.24x. The copy
    costs about what its bytes do: 1536x6144x1536's B is 38 MB, read and written in 25 us at the
    3.0 TB/s a plain copy reached, and the plan took 31 us longer than with B column-major."""
    return (b.stride(0) == 1 and b.shape[0] > 1) or b.dtype == torch.float32


def rows_on_16_bytes(t: torch.Tensor) -> bool:
    """Whether a 2-D ``t`` starts on a 16-byte boundary and, unless it is one row or one column,
    has one contiguous axis whose lines (rows, or columns of a column-major ``t``) start 16
    bytes apart or a multiple of that: where Triton can move 16 bytes per load. Off them, its
    loads move what the lines' alignment allows: compiled for sm_90, for float16 rows 15,554
    bytes apart 2 bytes each and never asynchronously (``cp.async`` moves 4 bytes at least), so
    the pipeline's stages are gone; for rows 4,444 bytes apart, 4 bytes a ``cp.async``."""
    if t.data_ptr() % 16:
        return False
    if min(t.shape) <= 1:
        return True
    pitch = t.stride(0) if t.stride(1) == 1 else t.stride(1) if t.stride(0) == 1 else 1
    return pitch * t.element_size() % 16 == 0


def readable(t: torch.Tensor) -> bool:
    """Whether a tensor descriptor can read ``t`` as it is: contiguous rows, 16-byte aligned.
    Rows off 128-byte lines are read as they are: on an H200, copying A, B or both onto lines
    inside the kernel first, or storing C by pointer, lost up to 16% at 3000^3 bfloat16 and
    6000^3 float16, and A copied 22-26% at 1000^3 and 2000^3; B copied won only at 5000^3
    (0.83x torch against 0.79x)."""
    rows_apart = t.stride(0) * t.element_size()
    return t.stride(1) == 1 and rows_apart % 16 == 0 and t.data_ptr() % 16 == 0


def tma_problem(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, stage: bool = False
) -> str | None:
    """Why the persistent kernel cannot read these tensors through tensor descriptors (None if
    it can): contiguous rows on 16-byte boundaries, unless ``stage`` (copies; C by pointer)."""
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
    if reads_a_transposed(a):  # A^T: a's columns
        rows["a"] = (a.stride(1), 1)
    if reads_b_transposed(b):  # B^T: b's columns if b is column-major, else a dense copy
        rows["b"] = (b.stride(1), 1) if b.stride(0) == 1 else (b.shape[0], 1)
    for name, t in named:
        row_stride, column_stride = rows[name]
        if column_stride != 1:
            return f"{name}'s rows are not contiguous (strides {t.stride()})"
        if (row_stride * t.element_size()) % 16 or t.data_ptr() % 16:
            return (
                f"{name}'s rows ({row_stride} elements of {t.element_size()} bytes apart) or its "
                "start address are not on 16-byte boundaries"
            )
    return None
