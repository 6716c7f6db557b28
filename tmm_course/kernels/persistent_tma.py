"""Lesson 7: a persistent matmul that loads and stores its tiles through tensor descriptors.

A **tensor descriptor** knows a tensor's base address, shape, strides and the block shape the
kernel moves; ``desc.load([row, col])`` brings a whole block, filling rows and columns outside
the tensor with zeros, and ``desc.store([row, col], tile)`` writes a block, dropping what lies
outside. On Hopper (compute capability 9.0+) the copying is done by the TMA unit; no masks and
no pointer tiles are left in the kernel. On a T4 or an A100 the same kernel compiles to ordinary
loads (no TMA, not pipelined). The descriptors here are built on the host,
``TensorDescriptor.from_tensor(x, block_shape)``; ``tl.make_tensor_descriptor`` builds one inside
a kernel instead. :func:`one_block` shows what a load and a store do at a tensor's edge.

A **persistent** kernel launches one program per SM and lets each loop over the tiles, taking
every ``NUM_PROGRAMS``-th one, instead of one program per tile."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import gpu, gpus, validate
from tmm_course.backend import INTERPRETER
from tmm_course.kernels.making_fast import grouped_tile
from tmm_course.kernels.matmul import check_operands, output_for


@triton.jit
def persistent_matmul_kernel(a_desc, b_desc, c_desc, M, N, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr):
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    # persistent: this program takes tiles pid, pid + NUM_PROGRAMS, pid + 2*NUM_PROGRAMS, ...
    for tile in tl.range(tl.program_id(axis=0), grid_m * grid_n, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile, grid_m, grid_n, GROUP_M)  # lesson 6's grouped order
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])  # a BLOCK_M x BLOCK_K block of A
            b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])  # a BLOCK_K x BLOCK_N block of B
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@triton.jit
def one_block_kernel(x_desc, block_desc, y_desc, row, col):
    block = x_desc.load([row, col])  # the block whose corner is (row, col): zeros outside x
    block_desc.store([0, 0], block)  # kept whole, to look at
    y_desc.store([row, col], block)  # put back where it came from: what lies outside x is dropped


def one_block(
    x: torch.Tensor, row: int, col: int, shape: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(block, y): the ``shape`` block of ``x`` whose corner is ``(row, col)`` as one descriptor
    load returned it, and a tensor like ``x``, full of -1, after the same block was stored into
    it at the same corner (:func:`one_block_kernel`)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    why_not = descriptors_unavailable()
    if why_not is not None:
        raise validate.KernelInputError(f"one_block cannot run here: {why_not}.")
    aligned_rows(x=x)
    block = torch.empty(shape, dtype=x.dtype, device=x.device)
    y = torch.full_like(x, -1)
    descs = [TensorDescriptor.from_tensor(t, list(shape)) for t in (x, block, y)]
    one_block_kernel[(1,)](*descs, row, col)
    return block, y


@dataclass(frozen=True)
class PersistentConfig:
    """Tile sizes, group size and launch options of :func:`persistent_matmul`."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3


H200_CONFIG = PersistentConfig()  # the lesson's choice for large float16/bfloat16 products
# where a program may use less shared memory than on an H200 (an RTX 50: 99 KB): 96 KB of
# float16 tiles on sm_120 (tests/test_gpus.py compiles it), where H200_CONFIG asks 160 KB
FITTING_CONFIG = PersistentConfig(128, 128, 64, num_warps=8, num_stages=2)
SMALL_CONFIG = PersistentConfig(32, 32, 16, group_m=2, num_warps=4, num_stages=2)  # interpreter
INTERPRETER_PROGRAMS = 4  # "SMs" on the interpreter, so that the persistent loop turns


def config_for(here: gpu.Gpu | None) -> PersistentConfig:
    """The configuration :func:`persistent_matmul` picks: small tiles on the interpreter, the
    H200's where a program has as much shared memory as there, else tiles that fit 99 KB (an
    RTX 50's per-program share; the compute capability says nothing about it)."""
    if here is None:
        return SMALL_CONFIG
    roomy = here.shared_memory >= gpus.CARDS["H200"].shared_per_block
    return H200_CONFIG if roomy else FITTING_CONFIG


def descriptors_unavailable() -> str | None:
    """Why tensor descriptors cannot run here, or None if they can: the interpreter, or a GPU
    of compute capability 7.5 or newer. Triton compiles them for a T4 (``sm_75``) and an A100
    (``sm_80``) too (:mod:`tmm_course.compile_ahead` shows it on any machine): there its
    launcher unpacks each host ``TensorDescriptor`` into pointer, shape and strides, and the
    kernel loads with ordinary loads: no TMA, and no pipelining of those loads. The TMA copies
    need compute capability 9.0 or newer."""
    if tmm_course.BACKEND == INTERPRETER:
        return None
    here = gpu.current()
    if here is None or here.capability >= DESCRIPTORS:
        return None
    c = f"{here.capability[0]}.{here.capability[1]}"
    return (
        f"{here.name} is compute capability {c}; Triton compiles tensor descriptors for 7.5 "
        "and newer"
    )


DESCRIPTORS = (7, 5)  # the oldest GPU Triton compiles tensor descriptors for


def aligned_rows(**tensors: torch.Tensor) -> None:
    """Raise KernelInputError unless each of ``tensors`` (by name) is 2-D with contiguous rows
    that start on 16-byte boundaries, as a tensor descriptor (and the TMA unit) needs."""
    for name, x in tensors.items():
        row_bytes = x.stride(0) * x.element_size() if x.dim() == 2 else 0
        if x.dim() != 2 or x.stride(1) != 1 or row_bytes % 16 or x.data_ptr() % 16:
            raise validate.KernelInputError(
                f"{name} has shape {tuple(x.shape)}, strides {tuple(x.stride())} "
                f"({x.element_size()}-byte elements) and starts at an address "
                f"{'' if x.data_ptr() % 16 == 0 else 'not '}divisible by 16; a tensor "
                "descriptor needs a 2-D tensor with contiguous rows (stride 1 along them) that "
                f"start every 16 bytes. Fix: {name} = {name}.contiguous(), with a multiple of "
                f"{16 // x.element_size()} columns for {x.dtype}."
            )


def persistent_matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    config: PersistentConfig | None = None,
    out: torch.Tensor | None = None,
    num_programs: int | None = None,
) -> torch.Tensor:
    """C = A @ B with :func:`persistent_matmul_kernel`: one program per SM (``num_programs``),
    tiles in grouped order, loaded and stored through tensor descriptors. Needs 16-byte aligned
    rows; float32 inputs are multiplied in TF32 on a GPU."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    why_not = descriptors_unavailable()
    if why_not is not None:
        raise validate.KernelInputError(f"persistent_matmul cannot run here: {why_not}.")
    check_operands(a, b, "tf32")
    out = output_for(a, b, out)
    aligned_rows(a=a, b=b, out=out)
    (m, k), n = a.shape, b.shape[1]
    if m == 0 or n == 0:
        return out
    here = gpu.current()
    cfg = config or config_for(here)
    programs = num_programs or (here.sms if here else INTERPRETER_PROGRAMS)
    validate.positive("num_programs", programs)
    tiles = triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n)
    persistent_matmul_kernel[(min(programs, tiles),)](
        TensorDescriptor.from_tensor(a, [cfg.block_m, cfg.block_k]),
        TensorDescriptor.from_tensor(b, [cfg.block_k, cfg.block_n]),
        TensorDescriptor.from_tensor(out, [cfg.block_m, cfg.block_n]),
        m, n, k,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        NUM_PROGRAMS=min(programs, tiles), num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return out


def compiler_view(
    config: PersistentConfig = H200_CONFIG,
    dtype: torch.dtype = torch.float16,
    programs: int = gpus.CARDS["H200"].sms,
):
    """What the compiler is told about a launch of :func:`persistent_matmul_kernel` (for
    :func:`tmm_course.compile_ahead.compile_for`): three descriptors and the sizes (multiples
    of 16, as a real large launch tells it)."""
    from tmm_course.compile_ahead import Specialization

    t = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype]
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    signature = {
        "a_desc": f"tensordesc<{t}[{bm}, {bk}]>",
        "b_desc": f"tensordesc<{t}[{bk}, {bn}]>",
        "c_desc": f"tensordesc<{t}[{bm}, {bn}]>",
        "M": "i32", "N": "i32", "K": "i32",
        **dict.fromkeys(("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_PROGRAMS"), "constexpr"),
    }  # fmt: skip
    constexprs = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": config.group_m,
                  "NUM_PROGRAMS": programs}  # fmt: skip
    return Specialization(signature, constexprs, divisible_by_16=(3, 4, 5))


@triton.jit
def persistent_owner_kernel(
    owner_ptr, turn_ptr, grid_m, grid_n, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr
):
    # persistent_matmul_kernel's loop, storing who takes each tile and on which turn
    for tile in tl.range(tl.program_id(axis=0), grid_m * grid_n, NUM_PROGRAMS):
        pid_m, pid_n = grouped_tile(tile, grid_m, grid_n, GROUP_M)
        tl.store(owner_ptr + pid_m * grid_n + pid_n, tl.program_id(axis=0))
        tl.store(turn_ptr + pid_m * grid_n + pid_n, tile // NUM_PROGRAMS)  # its loop's turn


def persistent_owners(grid_m: int, grid_n: int, programs: int, group_m: int = 1):
    """(owner, turn): for each tile of a ``grid_m x grid_n`` grid, the persistent program that
    takes it and on which turn of its loop, as the kernel's own loop computes them."""
    for name, value in (("grid_m", grid_m), ("grid_n", grid_n), ("programs", programs),
                        ("group_m", group_m)):  # fmt: skip
        validate.positive(name, value)
    owner = torch.full((grid_m, grid_n), -1, dtype=torch.int32, device=tmm_course.DEVICE)
    turn = torch.full_like(owner, -1)
    launched = min(programs, grid_m * grid_n)
    persistent_owner_kernel[(launched,)](owner, turn, grid_m, grid_n, GROUP_M=group_m,
                                         NUM_PROGRAMS=launched)  # fmt: skip
    return owner.cpu().numpy(), turn.cpu().numpy()
