"""Lesson 1: a 2-D grid of programs, each filling one BLOCK_M x BLOCK_N tile of an M x N output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import validate


@triton.jit
def fill_index_kernel(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(axis=0)  # which row-block of the output am I?
    pid_n = tl.program_id(axis=1)  # which column-block?
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # my rows    (BLOCK_M,)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # my columns (BLOCK_N,)
    index = offs_m[:, None] * N + offs_n[None, :]  # (BLOCK_M, BLOCK_N): i*N + j
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)  # lanes inside the output
    tl.store(out_ptr + index, index, mask=mask)


@triton.jit
def fill_owner_kernel(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    owner = pid_m * tl.num_programs(axis=1) + pid_n  # this program's number, row by row
    tile = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32) + owner
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], tile, mask=mask)


@triton.jit
def lane_mask_kernel(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # out is the padded grid of every lane of every program: cdiv(M,BM)*BM x cdiv(N,BN)*BN
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    width = tl.num_programs(axis=1) * BLOCK_N
    tl.store(out_ptr + offs_m[:, None] * width + offs_n[None, :], mask.to(tl.int32))


def _check(m: int, n: int, block_m: int, block_n: int) -> tuple[int, int]:
    validate.positive("M", m)
    validate.positive("N", n)
    validate.power_of_two("block_m", block_m)
    validate.power_of_two("block_n", block_n)
    return triton.cdiv(m, block_m), triton.cdiv(n, block_n)


def grid_shape(m: int, n: int, block_m: int, block_n: int) -> tuple[int, int]:
    """The launch grid: ``(cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))`` programs."""
    return _check(m, n, block_m, block_n)


def fill_index(m: int, n: int, block_m: int = 16, block_n: int = 16) -> torch.Tensor:
    """An ``m x n`` int32 tensor whose cell (i, j) the kernel set to ``i*n + j``.

    Cells no program writes keep the poison value -1.
    """
    grid = _check(m, n, block_m, block_n)
    out = torch.full((m, n), -1, dtype=torch.int32, device=tmm_course.DEVICE)
    fill_index_kernel[grid](out, m, n, BLOCK_M=block_m, BLOCK_N=block_n)
    return out


def fill_owner(m: int, n: int, block_m: int = 16, block_n: int = 16) -> torch.Tensor:
    """An ``m x n`` int32 tensor: the number of the program that stored each cell (-1: none)."""
    grid = _check(m, n, block_m, block_n)
    out = torch.full((m, n), -1, dtype=torch.int32, device=tmm_course.DEVICE)
    fill_owner_kernel[grid](out, m, n, BLOCK_M=block_m, BLOCK_N=block_n)
    return out


def lane_mask(m: int, n: int, block_m: int = 16, block_n: int = 16) -> torch.Tensor:
    """Every lane of every program (a padded ``grid*block`` array): 1 stored, 0 masked off."""
    gm, gn = _check(m, n, block_m, block_n)
    out = torch.full((gm * block_m, gn * block_n), -1, dtype=torch.int32, device=tmm_course.DEVICE)
    lane_mask_kernel[(gm, gn)](out, m, n, BLOCK_M=block_m, BLOCK_N=block_n)
    return out


@dataclass(frozen=True)
class TileFill:
    """What the three lesson-1 kernels wrote for one launch configuration."""

    m: int
    n: int
    block_m: int
    block_n: int
    index: np.ndarray  # (m, n): i*n + j as stored by fill_index_kernel (-1: never stored)
    owner: np.ndarray  # (m, n): program number that stored the cell (-1: never stored)
    lanes: np.ndarray  # (grid_m*block_m, grid_n*block_n): 1 stored lane, 0 masked off

    @property
    def grid(self) -> tuple[int, int]:
        return grid_shape(self.m, self.n, self.block_m, self.block_n)

    @property
    def masked_lanes(self) -> int:
        return int((self.lanes == 0).sum())


def run_tile_fill(m: int, n: int, block_m: int, block_n: int) -> TileFill:
    """Launch the three kernels on the current backend and collect what they stored."""

    def host(t):
        return t.cpu().numpy()

    return TileFill(
        m,
        n,
        block_m,
        block_n,
        index=host(fill_index(m, n, block_m, block_n)),
        owner=host(fill_owner(m, n, block_m, block_n)),
        lanes=host(lane_mask(m, n, block_m, block_n)),
    )


@triton.jit
def overlapping_fill_kernel(owner_ptr, writers_ptr, M, N, STEP_M: tl.constexpr,
                            STEP_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # the bug: tiles start STEP apart but are BLOCK wide (STEP < BLOCK), so neighbours overlap;
    # each program stores its number, and counts itself as one more writer of every cell
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * STEP_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * STEP_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    cells = offs_m[:, None] * N + offs_n[None, :]
    tile = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32) + pid_m * tl.num_programs(axis=1) + pid_n
    tl.store(owner_ptr + cells, tile, mask=mask)
    tl.atomic_add(writers_ptr + cells, tl.full((BLOCK_M, BLOCK_N), 1, tl.int32), mask=mask)


@dataclass(frozen=True)
class Overlap:
    """What overlapping tiles left behind: the program whose store each cell kept, and how
    many programs stored to it."""

    owner: np.ndarray  # (m, n): the program number that ended up in the cell
    writers: np.ndarray  # (m, n): how many programs stored to the cell

    def cells_written(self, times: int) -> int:
        return int((self.writers == times).sum())


def overlapping_fill(m: int, n: int, block_m: int = 4, block_n: int = 4) -> Overlap:
    """Launch :func:`overlapping_fill_kernel` with tiles that start half a block apart."""
    _check(m, n, block_m, block_n)
    step_m, step_n = max(1, block_m // 2), max(1, block_n // 2)
    owner = torch.full((m, n), -1, dtype=torch.int32, device=tmm_course.DEVICE)
    writers = torch.zeros((m, n), dtype=torch.int32, device=tmm_course.DEVICE)
    grid = (triton.cdiv(m, step_m), triton.cdiv(n, step_n))
    overlapping_fill_kernel[grid](owner, writers, m, n, STEP_M=step_m, STEP_N=step_n,
                                  BLOCK_M=block_m, BLOCK_N=block_n)  # fmt: skip
    return Overlap(owner.cpu().numpy(), writers.cpu().numpy())
