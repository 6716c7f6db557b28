"""Lesson 2: ``outer_product(x, y, out)`` sets ``out[i, j] = x[i] * y[j]`` by broadcasting."""

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
from tmm_course.numerics import allowed

SHAPES = [(64, 64), (64, 128), (1, 1), (5, 7), (33, 17), (70, 3), (3, 70)]  # aligned, ragged
SWAPPED = (
    "out[i, j] holds x[j] * y[i]: x was loaded along the columns and y along the rows. Load x "
    "at offs_m and y at offs_n, then x[:, None] * y[None, :]."
)
TILE_BLOCKS = (8, 16, 32)  # square tiles a swapped broadcast transposes


def tiles_transposed(value: torch.Tensor, block: int) -> torch.Tensor:
    """``value`` with every ``block x block`` tile transposed in place (square tiles)."""
    m, n = value.shape
    out = value.clone()
    for i in range(0, m, block):
        for j in range(0, n, block):
            out[i : i + block, j : j + block] = value[i : i + block, j : j + block].t()
    return out


def case(m: int, n: int, backend: str, gen: torch.Generator) -> Case:
    x, y = torch.randn(m, generator=gen), torch.randn(n, generator=gen)
    x64, y64 = x.double(), y.double()
    right = x64[:, None] * y64[None, :]
    mistakes = []
    if m == n > 1:
        mistakes.append(Mistake("transposed", y64[:, None] * x64[None, :], SWAPPED))
        for block in TILE_BLOCKS:  # swapped [:, None] and [None, :] in square tiles
            mistakes.append(
                Mistake(
                    "transposed",
                    tiles_transposed(right, block),
                    f"each {block}x{block} tile holds the transpose of the right tile: "
                    "[:, None] and [None, :] are swapped, so x runs along the tile's columns. "
                    "Use x[:, None] (a column, down the rows) times y[None, :] (a row, along "
                    "the columns).",
                )
            )
    return Case(
        label((m, n)),
        (m, n),
        (x, y),
        Output((m, n), torch.float32),
        right,
        # one bound for every cell (the largest product's), so that a swapped x and y, whose
        # cells are other products, is told by its values
        atol=float(allowed(right.abs().amax(), torch.float32, backend, "ieee")),
        mistakes=mistakes,
        ragged=ragged(M=m, N=n),
        redraw=partial(case, m, n, backend),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    return [case(m, n, backend, gen) for m, n in map(resize, SHAPES)]


EXERCISE = Exercise(
    name="outer_product",
    lesson=2,
    function="outer_product",
    signature="outer_product(x, y, out)",
    tensors=("x", "y", "out"),
    cases=cases,
    cells=Cells("02_broadcasting", "c16", "c17", "c18"),
    messages={
        "ragged_edge": "mask the loads of x (offs_m < M) and y (offs_n < N), and the store "
        "with both."
    },
)
