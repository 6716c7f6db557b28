"""Lesson 6: the fast kernels. A grouped pointer kernel that runs anywhere, a persistent
kernel that loads through tensor descriptors (TMA on Hopper), and ``matmul_fast``, which
picks one of them and a tile configuration for the device, shape and dtype."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import validate
from tmm_course.backend import GPU
from tmm_course.kernels.matmul import check_blocks, check_operands, output_for

try:  # host-side tensor descriptors arrived in triton 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton
    TensorDescriptor = None


@dataclass(frozen=True)
class Config:
    """One way to launch a kernel: tile sizes, warps per program, pipeline depth, group."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8

    def __str__(self) -> str:
        return (
            f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"
            f" g{self.group_m}"
        )


@triton.jit
def _tile_of(tile_id, grid_m, grid_n, GROUP_M: tl.constexpr):
    # grouped order: GROUP_M rows of tiles are walked column by column, then the next group,
    # so programs running together share rows of A and columns of B in L2
    tiles_per_group = GROUP_M * grid_n
    first_m = (tile_id // tiles_per_group) * GROUP_M
    rows_here = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % tiles_per_group) % rows_here
    pid_n = (tile_id % tiles_per_group) // rows_here
    return pid_m, pid_n


@triton.jit
def grouped_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # lesson 4's kernel on a 1-D grid whose programs take their tiles in grouped order
    pid_m, pid_n = _tile_of(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N),
                            GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # rows past M (columns past N) wrap onto real ones: loads need no mask on M and N, and
    # what they fetch there is never stored
    a_ptrs = a_ptr + (offs_m % M)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + (offs_n % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def persistent_tma_matmul_kernel(a_desc, b_desc, c_desc, M, N, K,
                                 PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
                                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                 GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr):
    # one program per SM, each walking tiles NUM_PROGRAMS apart; the descriptors know the
    # shapes, so the hardware (TMA) fills tiles past an edge with zeros and clips stores
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    for tile_id in tl.range(tl.program_id(axis=0), grid_m * grid_n, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = _tile_of(tile_id, grid_m, grid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def _precision(a: torch.Tensor, precision: str) -> str | None:
    return precision if a.dtype == torch.float32 else None


def launch_grouped(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config, precision: str = "tf32"
) -> torch.Tensor:
    """Run :func:`grouped_matmul_kernel` with ``config`` into ``out`` (no input checks)."""
    (m, k), n = a.shape, b.shape[1]
    if m == 0 or n == 0:
        return out
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
    grouped_matmul_kernel[grid](
        a, b, out, m, n, k, *a.stride(), *b.stride(), *out.stride(),
        PRECISION=_precision(a, precision), BLOCK_M=config.block_m, BLOCK_N=config.block_n,
        BLOCK_K=config.block_k, GROUP_M=config.group_m,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    return out


def program_slots() -> int:
    """How many persistent programs to launch: one per SM on a GPU, a few on the CPU."""
    if tmm_course.BACKEND == GPU:
        return torch.cuda.get_device_properties(tmm_course.DEVICE).multi_processor_count
    return 4


def launch_persistent_tma(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config, precision: str = "tf32"
) -> torch.Tensor:
    """Run :func:`persistent_tma_matmul_kernel` with ``config`` into ``out``; the tensors must
    pass :func:`tma_problem` (no input checks here)."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    programs = min(program_slots(), tiles)
    persistent_tma_matmul_kernel[(programs,)](
        TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
        TensorDescriptor.from_tensor(out, [bm, bn]), m, n, k,
        PRECISION=_precision(a, precision), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_M=config.group_m, NUM_PROGRAMS=programs,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    return out


def tma_problem(*tensors: torch.Tensor) -> str | None:
    """Why these tensors cannot be read through tensor descriptors, or None if they can."""
    if TensorDescriptor is None:
        return f"triton {triton.__version__} has no host-side tensor descriptors (3.4+)"
    if tmm_course.BACKEND == GPU:
        major, minor = torch.cuda.get_device_capability(tmm_course.DEVICE)
        if major < 9:
            return f"TMA needs compute capability 9.0 (Hopper) or newer, not {major}.{minor}"
    for name, t in zip("abc", tensors, strict=False):
        if min(t.shape) == 0:
            return f"{name} is empty {tuple(t.shape)}"
        if t.stride(1) != 1:
            return f"{name}'s rows are not contiguous (strides {t.stride()})"
        if (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            return (
                f"{name}'s row stride ({t.stride(0)} elements of {t.element_size()} bytes) or "
                "start address is not a multiple of 16 bytes"
            )
    return None


@dataclass(frozen=True)
class Plan:
    """What :func:`matmul_fast` will run, and why."""

    path: str  # "persistent_tma" or "grouped"
    config: Config
    reason: str

    def __str__(self) -> str:
        return f"{self.path} kernel, {self.config}: {self.reason}"


PATHS = ("persistent_tma", "grouped")

# Chosen from a sweep on an H200 (python -m tmm_course.bench sweep; results/sweep_h200.json)
INTERPRETER_CONFIG = Config(32, 32, 32, group_m=4)
LARGE_TMA = Config(128, 256, 64, num_warps=8, num_stages=3)
MEDIUM_TMA = Config(128, 128, 64, num_warps=8, num_stages=4)
GROUPED = Config(128, 128, 64, num_warps=8, num_stages=3)
SMALL_M = Config(16, 32, 128, num_warps=4, num_stages=4)


def plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> Plan:
    """Choose a kernel and a configuration for ``a @ b`` (into ``out``) on this backend."""
    m, n = a.shape[0], b.shape[1]
    if tmm_course.BACKEND != GPU:
        return Plan("grouped", INTERPRETER_CONFIG, "the interpreter: small tiles run fastest")
    if m <= 64:
        return Plan("grouped", SMALL_M, f"M = {m} is small: thin tiles keep every SM busy")
    why_not = tma_problem(a, b, *([] if out is None else [out]))
    if why_not is None:
        if m * n >= 4096 * 4096:
            return Plan("persistent_tma", LARGE_TMA, "large and 16-byte aligned")
        return Plan("persistent_tma", MEDIUM_TMA, "16-byte aligned")
    return Plan("grouped", GROUPED, f"no tensor descriptors: {why_not}")


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
    choice; the other arguments are lesson 4's :func:`~tmm_course.kernels.matmul`'s."""
    check_operands(a, b, precision)
    out = output_for(a, b, out)
    chosen = plan(a, b, out)
    if path is not None and path != chosen.path:
        if path not in PATHS:
            raise validate.KernelInputError(
                f"path={path!r}: expected one of {', '.join(PATHS)}, or None to let plan() choose."
            )
        reason = tma_problem(a, b, out) if path == "persistent_tma" else None
        if reason is not None:
            raise validate.KernelInputError(
                f"path='persistent_tma' cannot run here: {reason}. Expected row-contiguous "
                "tensors with 16-byte aligned rows on a Hopper GPU or the interpreter. "
                "Fix: path='grouped', or a.contiguous() with a K that is a multiple of 8."
            )
        fallback = MEDIUM_TMA if path == "persistent_tma" else GROUPED
        chosen = Plan(path, fallback if tmm_course.BACKEND == GPU else chosen.config, "asked for")
    config = config or chosen.config
    check_blocks((config.block_m, config.block_n, config.block_k))
    if a.shape[0] == 0 or b.shape[1] == 0:
        return out
    if a.shape[1] == 0:
        return out.zero_()
    launch = launch_persistent_tma if chosen.path == "persistent_tma" else launch_grouped
    return launch(a, b, out, config, precision)
