"""Lesson 6: ``grouped_tiles(tiles, grid_m, grid_n, group_m)`` launches one program per tile,
and program ``pid`` stores its tile in grouped order, ``(pid_m, pid_n)``, into row ``pid`` of
the int32 ``tiles``: groups of ``group_m`` rows of tiles one after the other, each walked
column by column, the last group possibly shorter. The whole map is judged, on grids whose
last group is full and grids whose last group is short."""

from __future__ import annotations

from functools import partial

import torch

from tmm_course.exercises import spec
from tmm_course.exercises.spec import Case, Cells, Exercise, Mistake, Output, Resize, same

# (grid_m, grid_n, GROUP_M): square, a short last group, a group taller than the grid,
# row-major (GROUP_M = 1), one tile, a group as tall as the grid; and last a grid whose map
# (the answer depends on the shape alone) is more than the launch's scalars could carry
# (:func:`~tmm_course.exercises.spec.beyond_scalars`), also when a grader draws its sizes
GRIDS = [(4, 4, 2), (6, 5, 4), (7, 3, 2), (3, 8, 1), (5, 6, 8), (1, 1, 1), (9, 4, 3),
         (24, 20, 5)]  # fmt: skip


def beyond_scalars(grid_m: int, grid_n: int, group_m: int = 1) -> bool:
    """Whether the map of a ``grid_m x grid_n`` grid (a pid_m and a pid_n per tile) is more
    than a launch's scalars could carry."""
    return spec.beyond_scalars(2 * grid_m * grid_n, max(grid_m, grid_n))


def grouped(pid: int, grid_m: int, grid_n: int, group_m: int) -> tuple[int, int]:
    """Grouped order: groups of ``group_m`` rows of tiles, each walked column by column."""
    per_group = group_m * grid_n
    first_m = (pid // per_group) * group_m
    rows = min(grid_m - first_m, group_m)
    return first_m + (pid % per_group) % rows, (pid % per_group) // rows


def _map(order, grid_m: int, grid_n: int, group_m: int) -> torch.Tensor:
    tiles = [order(pid, grid_m, grid_n, group_m) for pid in range(grid_m * grid_n)]
    return torch.tensor(tiles, dtype=torch.float64).reshape(-1, 2)


def _full_groups_only(pid: int, grid_m: int, grid_n: int, group_m: int) -> tuple[int, int]:
    """The slip: every group taken as ``group_m`` rows tall, the last one too."""
    per_group = group_m * grid_n
    first_m = (pid // per_group) * group_m
    return first_m + (pid % per_group) % group_m, (pid % per_group) // group_m


def _row_major(pid: int, grid_m: int, grid_n: int, group_m: int) -> tuple[int, int]:
    return pid // grid_n, pid % grid_n


def _column_major(pid: int, grid_m: int, grid_n: int, group_m: int) -> tuple[int, int]:
    return pid % grid_m, pid // grid_m


SHORT_GROUP = (
    "right when GROUP_M divides grid_m, wrong otherwise: the last group is shorter than "
    "GROUP_M rows of tiles, yet its programs were placed as if it were full. How many rows "
    "does the last group have, and where do the % and // that place a program in its group "
    "need that count?"
)

# a 2-D grid's program_id(axis=0) counts only grid_m programs: the rows beyond stay poisoned
UNSTORED = (
    "some cells of `tiles` were never stored. Row pid holds pid_m then pid_n, both stored by "
    "program pid, and every tile needs its program: launch a 1-D grid, (grid_m * grid_n,) "
    "(on a 2-D grid, program_id(axis=0) stops at grid_m - 1)."
)


def case(grid_m: int, grid_n: int, group_m: int, gen: torch.Generator | None = None) -> Case:
    short = grid_m % group_m != 0 and group_m < grid_m
    expected = _map(grouped, grid_m, grid_n, group_m)
    mistakes = [
        Mistake("ragged_edge", _map(_full_groups_only, grid_m, grid_n, group_m), SHORT_GROUP),
        Mistake("wrong_values", _map(_row_major, grid_m, grid_n, group_m),
                "the map is plain row-major order (pid // grid_n, pid % grid_n), as if "
                "GROUP_M were 1: inside a group, programs go along a row of tiles, not down "
                "the group's column. Place each program in its group first, then go down "
                "the group's column before moving to its next one."),
        Mistake("wrong_values", _map(_column_major, grid_m, grid_n, group_m),
                "the map walks down whole columns of tiles (pid % grid_m, pid // grid_m), as "
                "a 2-D grid does: the groups are missing. Walk GROUP_M rows of tiles at a "
                "time."),
    ]  # fmt: skip
    mistakes = [m for m in mistakes if not torch.equal(m.value, expected)]
    note = " (the last group is short)" if short else ""
    return Case(
        f"{grid_m} x {grid_n} tiles, GROUP_M={group_m}{note}",
        (grid_m, grid_n),
        (grid_m, grid_n, group_m),
        Output((grid_m * grid_n, 2), torch.int32),
        expected,
        mistakes=mistakes,
        ragged=("M",) if short else (),
        redraw=partial(case, grid_m, grid_n, group_m),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    *grids, big = GRIDS
    drawn = resize(big)
    return [case(*resize(grid)) for grid in grids] + [
        case(*(drawn if beyond_scalars(*drawn) else big))
    ]


EXERCISE = Exercise(
    name="grouped_tile",
    lesson=6,
    function="grouped_tiles",
    signature="grouped_tiles(tiles, grid_m, grid_n, group_m)",
    tensors=("tiles",),
    cases=cases,
    cells=Cells("06_making_it_fast", "mf31", "mf32", "mf33"),
    call=(3, 0, 1, 2),
    messages={"ragged_edge": SHORT_GROUP, "unwritten": UNSTORED},
)
