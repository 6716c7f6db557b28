"""Lessons 6 and 7: the order in which programs take their tiles, by rows or in groups of rows."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import validate
from tmm_course.kernels.making_fast import grouped_tile


@triton.jit
def launch_order_kernel(order_ptr, grid_m, grid_n, GROUP_M: tl.constexpr, BLOCK: tl.constexpr):
    # BLOCK program ids at once (a 1-D launch: programs start roughly in pid order)
    pid = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    inside = pid < grid_m * grid_n
    pid = tl.where(inside, pid, 0)  # lanes past the last program compute tile 0, unstored
    pid_m, pid_n = grouped_tile(pid, grid_m, grid_n, GROUP_M)  # lesson 6's grouped order
    # which program took tile (pid_m, pid_n)
    tl.store(order_ptr + pid_m * grid_n + pid_n, pid, mask=inside)


def launch_order(grid_m: int, grid_n: int, group_m: int = 1) -> np.ndarray:
    """A ``grid_m x grid_n`` array: the program id that owns each tile. ``group_m=1`` is plain
    row-major order."""
    validate.positive("grid_m", grid_m)
    validate.positive("grid_n", grid_n)
    validate.positive("group_m", group_m)
    order = torch.full((grid_m, grid_n), -1, dtype=torch.int32, device=tmm_course.DEVICE)
    block = 256
    launch_order_kernel[(triton.cdiv(grid_m * grid_n, block),)](
        order, grid_m, grid_n, GROUP_M=group_m, BLOCK=block
    )
    return order.cpu().numpy()


def wave_strips(order: np.ndarray, in_flight: int) -> list[tuple[int, int]]:
    """For each wave of ``in_flight`` programs (in pid order): how many distinct row-blocks of A
    and column-blocks of B it needs."""
    validate.positive("in_flight", in_flight)
    tile_of = np.argsort(order, axis=None)  # pid -> flat tile index
    grid_n = order.shape[1]
    waves = []
    for start in range(0, order.size, in_flight):
        wave = tile_of[start : start + in_flight]
        waves.append((len(set((wave // grid_n).tolist())), len(set((wave % grid_n).tolist()))))
    return waves


def tiles_fetched(order: np.ndarray, in_flight: int) -> tuple[int, int]:
    """Row-blocks of A and column-blocks of B fetched from memory if the programs run in
    waves of ``in_flight`` (in pid order) and each wave shares what it loads (through L2)."""
    waves = wave_strips(order, in_flight)
    return sum(a for a, _ in waves), sum(b for _, b in waves)
