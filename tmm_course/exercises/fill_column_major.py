"""Lesson 1: ``fill_column_major(out)`` sets ``out[i, j] = j * M + i`` (the column-major
index)."""

from __future__ import annotations

from functools import partial

import torch

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

ALIGNED = [(64, 64), (64, 128)]
RAGGED = [(1, 1), (5, 7), (33, 17), (70, 3), (3, 70)]
SHAPES = ALIGNED + RAGGED
STORE_MASK = "mask the store with (offs_m[:, None] < M) & (offs_n[None, :] < N)."
ROW_MAJOR = (
    "stores the row-major index i * N + j; the exercise asks for the column-major one, "
    "j * M + i: swap the roles of offs_m and offs_n in the value you store (the pointer stays "
    "offs_m[:, None] * N + offs_n[None, :])."
)

COLUMN_MAJOR_ADDRESS = (
    "stores the right value at the wrong address: the store's pointer is the column-major "
    "offset offs_n * M + offs_m, but out is row-major (its stride is (N, 1)), so each value "
    "lands where the row-major index belongs. Keep the value j * M + i and store it at "
    "out_ptr + offs_m[:, None] * N + offs_n[None, :]."
)


def value_or_address(trace) -> str | None:
    """The row-major index in the output comes from the value (each program stores its own
    tile) or from the address (a program past the first along axis 0 stores into row 0: its
    pointer walks the columns): the sentence for the address, None for the value."""
    out = list(trace.views)[-1]
    columns = trace.views[out].shape[1]
    for access in trace.accesses:
        program = access.program
        if access.kind != "store" or access.tensor != out or not access.cells.size:
            continue
        if program[0] > 0 and program[1] == 0 and int(access.cells.min()) < columns:
            return COLUMN_MAJOR_ADDRESS
    return None


def case(m: int, n: int, gen: torch.Generator) -> Case:
    i = torch.arange(m, dtype=torch.float64)[:, None]
    j = torch.arange(n, dtype=torch.float64)[None, :]
    mistakes = (
        [Mistake("transposed", i * n + j, ROW_MAJOR, refine=value_or_address)]
        if m > 1 and n > 1
        else []
    )
    return Case(
        label((m, n)),
        (m, n),
        (),
        Output((m, n), torch.float32),
        j * m + i,
        mistakes=mistakes,
        ragged=ragged(M=m, N=n),
        redraw=partial(case, m, n),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    return [case(m, n, gen) for m, n in map(resize, SHAPES)]


EXERCISE = Exercise(
    name="fill_column_major",
    lesson=1,
    function="fill_column_major",
    signature="fill_column_major(out)",
    tensors=("out",),
    cases=cases,
    cells=Cells("01_tile_fill", "c17", "c18", "c19"),
    messages={"ragged_edge": STORE_MASK},
)
