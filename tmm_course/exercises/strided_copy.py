"""Lesson 3: ``copy(x, out)`` copies ``x`` into ``out`` for any strides of either."""

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
LOAD_AND_STORE_MASKS = (
    "mask the load and the store with (offs_m[:, None] < M) & (offs_n[None, :] < N)."
)
PAIRED_WRONG = (
    "out holds x transposed: a stride is paired with the wrong offset. Pair offs_m with stride 0 "
    "and offs_n with stride 1, for x and for out."
)


def case(m: int, n: int, layout: str, row_gap: int, gen: torch.Generator) -> Case:
    x = laid_out(gen, m, n, layout)
    strided = ("out",) if row_gap else () if layout == "contiguous" else ("x",)
    mistakes = []
    if layout == "contiguous" and not row_gap and m == n > 1:
        mistakes.append(Mistake("transposed", x.t().double(), PAIRED_WRONG))
    return Case(
        label((m, n), "output with padded rows" if row_gap else layout),
        (m, n),
        (x,),
        Output((m, n), torch.float32, row_gap),
        x.double(),
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
    name="strided_copy",
    lesson=3,
    function="copy",
    signature="copy(x, out)",
    tensors=("x", "out"),
    cases=cases,
    cells=Cells("03_strides", "c18", "c19", "c20"),
    messages={"ragged_edge": LOAD_AND_STORE_MASKS},
    solution_kernels=("tmm_course.kernels.strides.strided_copy_kernel",),
)
