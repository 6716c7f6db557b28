"""Lesson 2: ``outer_product(x, y, out)`` adds ``x[i] * y[j]`` to ``out[i, j]`` by broadcasting:
out arrives holding values (some cases with a gap between its rows), so the kernel loads a 2-D
tile of it through its strides, the one thing the lesson's kernels do not print."""

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

# aligned, then ragged: (100, 70) is ragged on both axes yet larger than any block a learner
# picks, so a grid rounded down (M // BLOCK) still launches programs and the check names it
SHAPES = [(64, 64), (64, 128), (1, 1), (5, 7), (33, 17), (70, 3), (3, 70), (100, 70)]
ROW_GAPS = {(64, 128): 5, (33, 17): 3, (100, 70): 7}  # out with a gap between its rows
SWAPPED = (
    "out[i, j] gained x[j] * y[i]: x was loaded along the columns and y along the rows. Load x "
    "at offs_m and y at offs_n, then add x[:, None] * y[None, :]."
)
TILE_BLOCKS = (8, 16, 32)  # square tiles a swapped broadcast transposes
TILES_SWAPPED = (
    "{} holds the transpose of the right tile: [:, None] and [None, :] are swapped, so x runs "
    "along the tile's columns. Add x[:, None] (a column, down the rows) times y[None, :] (a row, "
    "along the columns)."
)
OVERWRITTEN = (
    "out holds x[i] * y[j] without what it held before: the kernel stored the product over out "
    "instead of adding to it. Load out's tile (at offs_m[:, None] * stride_0 + offs_n[None, :] "
    "* stride_1, masked), add the product, store the sum."
)


def tiles_swapped(x64: torch.Tensor, y64: torch.Tensor, block: int) -> torch.Tensor:
    """What ``x[None, :] * y[:, None]`` stores in ``block x block`` tiles: cell (r, c) of tile
    (i, j) holds x[i * block + c] * y[j * block + r], a lane past an end loading 0 (its mask).
    On square outputs that tiles divide, each tile of the product transposed in place."""
    m, n = len(x64), len(y64)
    rows, cols = torch.arange(m)[:, None], torch.arange(n)[None, :]
    xi = rows // block * block + cols % block
    yj = cols // block * block + rows % block
    xs = torch.cat([x64, x64.new_zeros(block)])  # a masked lane's 0, past the last element
    ys = torch.cat([y64, y64.new_zeros(block)])
    return xs[xi] * ys[yj]


def case(m: int, n: int, backend: str, gen: torch.Generator) -> Case:
    x, y = torch.randn(m, generator=gen), torch.randn(n, generator=gen)
    before = torch.randn(m, n, generator=gen)
    x64, y64, before64 = x.double(), y.double(), before.double()
    product = x64[:, None] * y64[None, :]
    right = before64 + product
    summed = before64.abs() + product.abs()
    mistakes = [Mistake("wrong_values", product, OVERWRITTEN)]
    if m == n > 1:
        mistakes.append(Mistake("transposed", before64 + y64[:, None] * x64[None, :], SWAPPED))
    if m > 1 or n > 1:  # swapped [:, None] and [None, :] in square tiles, of a size it tells
        swapped = [tiles_swapped(x64, y64, block) for block in TILE_BLOCKS]
        for block, value in zip(TILE_BLOCKS, swapped, strict=True):
            alike = sum(bool(torch.equal(value, other)) for other in swapped)
            tile = f"each {block}x{block} tile" if alike == 1 else "each square tile"
            mistakes.append(Mistake("transposed", before64 + value, TILES_SWAPPED.format(tile)))
    return Case(
        label((m, n)),
        (m, n),
        (x, y),
        Output((m, n), torch.float32, ROW_GAPS.get((m, n), 0)),
        right,
        # one bound for every cell, from the largest magnitudes a cell sums (|before| + |x y|:
        # a 1x1 case whose two terms cancel is rounded at their size, not the sum's), so that
        # a swapped x and y, whose cells are other products, is told by its values
        atol=float(allowed(summed.amax(), torch.float32, backend, "ieee")),
        mistakes=mistakes,
        ragged=ragged(M=m, N=n),
        strided=("out",) if (m, n) in ROW_GAPS else (),
        initial=before,
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
        "ragged_edge": "mask the loads of x (offs_m < M) and y (offs_n < N), and out's load "
        "and store with both."
    },
)
