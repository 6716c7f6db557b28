"""Lesson 1: ``fill_owners(out)`` reproduces a picture of who owns each cell: ``8 x 4`` tiles
(``BLOCK_M = 8`` rows, ``BLOCK_N = 4`` columns), one program each on a **1-D** grid, numbered
down the columns of tiles, and each cell holding the number of the program that stored it:
``out[i, j] = i // 8 + (j // 4) * cdiv(M, 8)``."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch

from tmm_course.exercises import spec
from tmm_course.exercises.spec import (
    Case,
    Cells,
    Exercise,
    Mistake,
    Output,
    Resize,
    label,
    ragged,
    same,
)

BLOCK_M, BLOCK_N = 8, 4  # the picture's tiles
# last, run once the others pass, a C whose owners (the answer depends on the shape alone)
# are more than a launch's scalars could carry (spec.beyond_scalars), on a grader's sizes too
SHAPES = [(1, 1), (8, 4), (20, 10), (33, 17), (64, 64), (3, 70), (70, 3), (128, 128)]
STORE_MASK = "mask the store with (offs_m[:, None] < M) & (offs_n[None, :] < N)."
ROW_ORDER = (
    "the programs are numbered along the rows of tiles (pid_m = pid // grid_n); the picture "
    "numbers them down the columns: pid_m = pid % grid_m, pid_n = pid // grid_m, with grid_m = "
    "cdiv(M, 8)."
)
TILES_TURNED = (
    "the tiles are 4 rows by 8 columns; the picture's are 8 rows (BLOCK_M = 8) by 4 columns "
    "(BLOCK_N = 4)."
)
UNSTORED = (
    "cells were never stored: launch one program per 8 x 4 tile, triton.cdiv(M, 8) * "
    "triton.cdiv(N, 4) of them on a 1-D grid, and let each find its tile from its one "
    "program_id (program_id(1) is 0 on a 1-D grid): pid_m = pid % grid_m, pid_n = pid // grid_m, "
    "with grid_m = tl.cdiv(M, 8)."
)
ONE_AXIS = (
    "each cell holds its row of tiles, pid_m, not the program's number: a program's number is "
    "its 1-D program_id, pid = pid_m + pid_n * grid_m; store pid in every cell of its tile."
)


def owners(m: int, n: int, block_m: int = BLOCK_M, block_n: int = BLOCK_N, rows: bool = False):
    """Program numbers per cell: tiles numbered down the columns (or along the ``rows``)."""
    i = torch.arange(m, dtype=torch.float64)[:, None] // block_m
    j = torch.arange(n, dtype=torch.float64)[None, :] // block_n
    if rows:
        return i * -(-n // block_n) + j
    return i + j * -(-m // block_m)


def target(m: int, n: int):
    """The picture's data for an ``m x n`` ``C`` (lesson 1's :class:`TileFill`): lesson 1's
    kernels fill the lanes and indices; the owners come from lesson 6's launch-order kernel
    with one group as tall as the grid, which numbers tiles down the columns."""
    from tmm_course.kernels.launch_order import launch_order
    from tmm_course.kernels.tile_fill import run_tile_fill

    data = run_tile_fill(m, n, BLOCK_M, BLOCK_N)
    order = launch_order(*data.grid, group_m=data.grid[0])
    return replace(data, owner=order.repeat(BLOCK_M, 0).repeat(BLOCK_N, 1)[:m, :n])


def case(m: int, n: int, gen: torch.Generator) -> Case:
    right = owners(m, n)
    mistakes = []
    candidates = [
        (owners(m, n, rows=True), ROW_ORDER),
        (owners(m, n, BLOCK_N, BLOCK_M), TILES_TURNED),
        (owners(m, n) % -(-m // BLOCK_M), ONE_AXIS),
    ]
    for value, cause in candidates:
        if not torch.equal(value, right):
            mistakes.append(Mistake("wrong_values", value, cause))
    return Case(
        label((m, n)),
        (m, n),
        (),
        Output((m, n), torch.float32),
        right,
        mistakes=mistakes,
        ragged=ragged(M=m, N=n),
        redraw=partial(case, m, n),
    )


def beyond_scalars(m: int, n: int) -> bool:
    """Whether the owners of an ``m x n`` C, one per tile, are more than scalars could carry."""
    programs = -(-m // BLOCK_M) * -(-n // BLOCK_N)
    return spec.beyond_scalars(programs, programs - 1)


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    *shapes, big = SHAPES
    drawn = resize(big)
    big = drawn if beyond_scalars(*drawn) else big
    last = replace(case(*big, gen), only_if_all_passed=True)
    return [case(m, n, gen) for m, n in map(resize, shapes)] + [last]


EXERCISE = Exercise(
    name="column_order_fill",
    lesson=1,
    function="fill_owners",
    signature="fill_owners(out)",
    tensors=("out",),
    cases=cases,
    cells=Cells("01_tile_fill", "o01", "o02", "o03"),
    messages={"ragged_edge": STORE_MASK, "unwritten": UNSTORED},
    solution_kernels=("tmm_course.kernels.tile_fill.fill_owner_kernel",),  # the page's owners
)
