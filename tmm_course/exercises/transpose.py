"""Lesson 5's homework, parts 1 to 3: ``transpose(x, out)`` stores ``x.T`` into ``out`` (``x``
is M x N, ``out`` N x M). Part 1 (``transpose_v1``) runs on contiguous, aligned cases only,
part 2 (``transpose_v2``) adds strided inputs and a padded output, part 3 (``transpose``)
ragged shapes too."""

from __future__ import annotations

import math
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

ALIGNED = [(64, 64), (64, 128)]
RAGGED = [(1, 1), (33, 17), (70, 3), (3, 70)]
OUT_ROW_GAP = 5
COPY_NOT_TRANSPOSE = (
    "out holds a copy of x, not its transpose: x[i, j] must land at out[j, i]. Either the "
    "store's offsets are not swapped, or the load reads x column-major (offs_m paired with x's "
    "column stride). Load with offs_m[:, None] * x.stride(0) + offs_n[None, :] * x.stride(1); "
    "store with offs_n[None, :] * out.stride(0) + offs_m[:, None] * out.stride(1)."
)
STORE_NOT_SWAPPED = (
    "out holds a copy of x, not its transpose: x[i, j] must land at out[j, i]. The load is "
    "right: keep it as it is and swap the store's offsets: offs_n[None, :] with out's row "
    "stride, offs_m[:, None] with its column stride."
)
LOAD_COLUMN_MAJOR = (
    "out holds a copy of x, not its transpose: the load reads x column-major (offs_m paired with "
    "x.stride(1), offs_n with x.stride(0)), so each program loads the transposed tile and its "
    "transposing store turns it back. The store is right; load with offs_m[:, None] * "
    "x.stride(0) + offs_n[None, :] * x.stride(1)."
)
WRONG_OUT_ROW_STRIDE = (
    "out's row stride is wrong: out is N x M, so its rows are M apart (out.stride(0) == M), "
    "but the kernel stepped N, x's row stride, between them; when M != N its stores run past "
    "out's end. Build out's pointers from out.stride(0) and out.stride(1)."
)
MESSAGES = {
    "ragged_edge": "mask the load with (offs_m[:, None] < M) & (offs_n[None, :] < N) and the "
    "store with that same mask: the store's pointer tile is BLOCK_M x BLOCK_N like the load's, "
    "only its strides are swapped, so its mask keeps offs_m < M and offs_n < N.",
    "ignores_strides": "take x's and out's strides as kernel arguments and build both pointer "
    "tiles from them; out is N x M, so its row stride goes with offs_n.",
    "out_of_bounds_write when M != N": "Stores land outside out, and only when M != N: the store "
    "mask compares with the wrong sizes. out is N x M, so the stored tile's mask is "
    "(offs_m[:, None] < M) & (offs_n[None, :] < N), the same as the load's.",
}


def copy_or_column_major_load(trace, m: int, n: int) -> str | None:
    """Which of the two mistakes made out a copy of x, from the x cells program (0, 1) loaded
    (``trace``: a check's record of loads and stores): rows of its own row block (the load is
    right) or of its column block (the load reads x column-major). None when it cannot say."""
    rows = [
        a.cells // n
        for a in trace.accesses
        if a.kind == "load" and a.tensor == "x" and a.program[:2] == (0, 1) and a.cells.size
    ]
    if not rows:
        return None
    first = min(int(r.min()) for r in rows)
    return STORE_NOT_SWAPPED if first == 0 else LOAD_COLUMN_MAJOR


def stored_with_row_stride(x: torch.Tensor, row_stride: int) -> torch.Tensor:
    """What a transpose stores into a contiguous N x M out whose rows it steps ``row_stride``
    apart: x[i, j] at flat j * row_stride + i, NaN where nothing lands."""
    m, n = x.shape
    flat = torch.full((n * m,), math.nan, dtype=torch.float64)
    i = torch.arange(m)[:, None]
    j = torch.arange(n)[None, :]
    where = (j * row_stride + i).flatten()
    inside = where < n * m
    flat[where[inside]] = x.double().flatten()[inside]
    return flat.view(n, m)


def case(m: int, n: int, layout: str, row_gap: int, gen: torch.Generator) -> Case:
    x = laid_out(gen, m, n, layout)
    mistakes = []
    plain = layout == "contiguous" and not row_gap
    if m == n > 1 and plain:  # on a view, a copy is a strides slip
        mistakes.append(
            Mistake(
                "transposed",
                x.double(),
                COPY_NOT_TRANSPOSE,
                ambiguous=True,
                refine=partial(copy_or_column_major_load, m=m, n=n),
            )
        )
    if m < n and plain:
        mistakes.append(
            Mistake(
                "out_of_bounds_write",
                stored_with_row_stride(x, n),
                WRONG_OUT_ROW_STRIDE,
                explains=("unwritten", "wrong_values", "ragged_edge"),
            )
        )
    strided = ("out",) if row_gap else () if layout == "contiguous" else ("x",)
    return Case(
        label((m, n), "output with padded rows" if row_gap else layout),
        (m, n),
        (x,),
        Output((n, m), torch.float32, row_gap),
        x.t().double(),
        mistakes=mistakes,
        ragged=ragged(M=m, N=n),
        strided=strided,
        redraw=partial(case, m, n, layout, row_gap),
    )


def family(strided: bool, ragged_shapes: bool):
    """The cases of one part: strided inputs and a padded output, ragged shapes, or neither."""

    def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
        shapes = list(map(resize, ALIGNED + (RAGGED if ragged_shapes else [])))
        layouts = LAYOUTS if strided else LAYOUTS[:1]
        found = [case(m, n, layout, 0, gen) for m, n in shapes for layout in layouts]
        if strided:
            padded = map(resize, [(64, 64), (33, 17)] if ragged_shapes else [(64, 64)])
            found += [case(m, n, "contiguous", OUT_ROW_GAP, gen) for m, n in padded]
        return found

    return cases


def _exercise(name: str, strided: bool, ragged_shapes: bool, cells: tuple[str, str, str]):
    return Exercise(
        name=name,
        lesson=5,
        function=name,
        signature=f"{name}(x, out)",
        tensors=("x", "out"),
        cases=family(strided, ragged_shapes),
        cells=Cells("05_homework_transpose", *cells),
        messages=MESSAGES,
    )


PART_1 = _exercise("transpose_v1", False, False, ("c04", "c05", "c06"))
PART_2 = _exercise("transpose_v2", True, False, ("c08", "c09", "c10"))
EXERCISE = _exercise("transpose", True, True, ("c12", "c13", "c14"))
PARTS = {(False, False): PART_1, (True, False): PART_2, (True, True): EXERCISE}
