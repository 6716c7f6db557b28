"""Lesson 3: ``flip_rows(x, out)`` sets ``out[i, j] = x[M - 1 - i, j]``: ``x`` upside down, for
any strides of ``x`` and ``out``. The page prints a copy; this kernel's addresses come from the
formula ``offset + i * stride_0 + j * stride_1`` with ``i`` counted from the last row."""

from __future__ import annotations

from functools import partial

import torch

from tmm_course.exercises.layouts import LAYOUTS, laid_out
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

SHAPES = [(64, 64), (1, 1), (33, 17), (5, 70)]
PADDED_OUTPUT_SHAPES = [(64, 64), (33, 17)]
OUT_ROW_GAP = 5  # the padded output's rows are N + 5 apart
MASKS = "mask the load and the store with (offs_m[:, None] < M) & (offs_n[None, :] < N)."
NOT_FLIPPED = (
    "out holds x as it is, not upside down: row i of out must come from row M - 1 - i of x. "
    "Load x at (M - 1 - offs_m)[:, None] * stride_xm + offs_n[None, :] * stride_xn."
)
COLUMNS_FLIPPED = (
    "out holds x mirrored left to right: the column index was counted from the end. Count the "
    "row index from the end, M - 1 - offs_m, and keep offs_n as it is."
)
BOTH_FLIPPED = (
    "out holds x turned half a circle: both indices were counted from the end. Only the row "
    "index is, M - 1 - offs_m; offs_n stays as it is."
)
PAIRED_WRONG = (
    "out holds a transpose of the answer: out's strides are paired with the wrong indices. "
    "Store at offs_m[:, None] * stride_om + offs_n[None, :] * stride_on."
)
LOAD_PAIRED_WRONG = (
    "out holds x turned a quarter circle (x's transpose, upside down): x's strides are paired "
    "with the wrong indices. Load x at (M - 1 - offs_m)[:, None] * stride_xm + "
    "offs_n[None, :] * stride_xn: the row index with stride 0, the column index with stride 1."
)

TILE_BLOCKS = (8, 16, 32)  # tile heights a flip inside each tile is tried with
FLIPPED_IN_TILES = (
    "out holds x upside down inside each tile of {block} rows, not across the whole of x: the "
    "row was counted back from the tile's own last row. Count it from x's last row, M - 1 - "
    "offs_m, with offs_m the row's index in x (program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))."
)


def flipped_in_tiles(x64: torch.Tensor, block: int) -> torch.Tensor:
    """``x64`` with the rows of each ``block``-row tile reversed (M a multiple of ``block``)."""
    rows = torch.arange(x64.shape[0])
    return x64[rows // block * block + block - 1 - rows % block]


def case(m: int, n: int, layout: str, row_gap: int, gen: torch.Generator) -> Case:
    x = laid_out(gen, m, n, layout)
    x64 = x.double()
    strided = ("out",) if row_gap else () if layout == "contiguous" else ("x",)
    mistakes = []
    if m > 1:
        mistakes.append(Mistake("wrong_values", x64, NOT_FLIPPED))
    if n > 1:
        mistakes.append(Mistake("wrong_values", x64.flip(1), COLUMNS_FLIPPED))
        if m > 1:
            mistakes.append(Mistake("wrong_values", x64.flip(0).flip(1), BOTH_FLIPPED))
    for block in TILE_BLOCKS:  # on shapes the tiles divide, apart from the whole flip
        if m % block == 0 and m > block:
            value = flipped_in_tiles(x64, block)
            mistakes.append(Mistake("wrong_values", value, FLIPPED_IN_TILES.format(block=block)))
    if layout == "contiguous" and not row_gap and m == n > 1:
        mistakes.append(Mistake("transposed", x64.flip(0).t(), PAIRED_WRONG))
        mistakes.append(Mistake("transposed", x64.t().flip(0), LOAD_PAIRED_WRONG))
    return Case(
        label((m, n), "output with padded rows" if row_gap else layout),
        (m, n),
        (x,),
        Output((m, n), torch.float32, row_gap),
        x64.flip(0),
        mistakes=mistakes,
        ragged=ragged(M=m, N=n),
        strided=strided,
        redraw=partial(case, m, n, layout, row_gap),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    found = [case(m, n, layout, 0, gen) for m, n in map(resize, SHAPES) for layout in LAYOUTS]
    padded = map(resize, PADDED_OUTPUT_SHAPES)
    return found + [case(m, n, "contiguous", OUT_ROW_GAP, gen) for m, n in padded]


EXERCISE = Exercise(
    name="flip_rows",
    lesson=3,
    function="flip_rows",
    signature="flip_rows(x, out)",
    tensors=("x", "out"),
    cases=cases,
    cells=Cells("03_strides", "g01", "g02", "g03"),
    messages={"ragged_edge": MASKS},
    solution_kernels=("tmm_course.kernels.strides.strided_copy_kernel",),  # the page's copy
)
