"""Lesson 8: split-K written by the learner. ``split_k_matmul(a, b, c)`` stores ``a @ b`` into
``c`` as lesson 4's ``my_matmul`` does (the same cases: any shapes and strides, float16 and
float32, a float32 accumulator), with ``K`` cut into slices, one program per (tile, slice), the
slices' float32 partials added by a kernel of theirs (``tl.atomic_add`` into a buffer of zeros,
say) and a kernel storing ``c``. Beyond the values, its launches on a float16
``512 x 512 x 16384`` product (64 tiles of 64x64 for an H200's 132 SMs) are noted, not run,
compiled for an A100 and an H200, and judged by :func:`tmm_course.perf.split_k.launch_goals`;
on a GPU the check races it against lesson 4's kernel too."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import torch

from tmm_course.compile_ahead import Launched
from tmm_course.exercises import matmul, products
from tmm_course.exercises.faster import as_goal, float16_product
from tmm_course.exercises.spec import (
    AtScale,
    Case,
    Cells,
    Exercise,
    Goal,
    Mistake,
    Resize,
    same,
)
from tmm_course.perf import split_k

SPLIT_GUESSES = (2, 3, 4, 8, 16)  # the SPLIT_K a slice mistake is tried with
ONE_SLICE = (
    "c holds one K-slice's share of a @ b, not the sum of all of them: each slice's partial "
    "replaced the others' (tl.store where tl.atomic_add adds into the buffer), so only the "
    "last to arrive is left."
)
EVERY_SLICE_ALL_OF_K = (
    "c holds {} times a @ b: every slice walked all of K. A slice starts at its own share of K "
    "(program_id(2) times the steps in a slice, times BLOCK_K): add that start to the K offsets."
)


def slice_mistakes(case: Case) -> list[Mistake]:
    """What c holds when every slice walks all of ``K`` (``SPLIT_K`` times the product), or
    when only the last slice's partial survives, for each ``BLOCK_K`` and ``SPLIT_K`` a learner
    may have chosen (slices of whole ``BLOCK_K`` steps; on the interpreter the slices run in
    order, the last one last)."""
    a, b = (x.double() for x in case.tensors[:2])
    k = a.shape[1]
    seen, wrong = set(), []
    exact = a @ b
    for split in SPLIT_GUESSES:  # every slice walked all of K
        wrong.append(Mistake("wrong_values", split * exact, EVERY_SLICE_ALL_OF_K.format(split)))
    for block in products.BLOCK_K_GUESSES:
        for split in SPLIT_GUESSES:
            steps = math.ceil(math.ceil(k / block) / split)  # BLOCK_K steps in one slice
            start = (split - 1) * steps * block  # where the last slice begins
            if start in seen or not start > 0:
                continue
            seen.add(start)
            value = a[:, start:] @ b[start:] if start < k else a[:, :0] @ b[:0]
            wrong.append(Mistake("wrong_values", value, ONE_SLICE))
    return wrong


def case_of(drawn: Case) -> Case:
    """``drawn`` (a case of :mod:`~tmm_course.exercises.matmul`) with split-K's own mistakes
    first (a redraw keeps them)."""
    redraw = drawn.redraw
    return replace(
        drawn,
        mistakes=slice_mistakes(drawn) + drawn.mistakes,
        redraw=None if redraw is None else lambda gen: case_of(redraw(gen)),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    """Lesson 4's cases (:func:`tmm_course.exercises.matmul.cases`), each with
    :func:`slice_mistakes`."""
    return [case_of(c) for c in matmul.cases(gen, backend, resize)]


def problem() -> Case:
    """The float16 ``512 x 512 x 16384`` product the compiler judges."""
    return float16_product(split_k.M, split_k.N, split_k.K)


def judge(launched: Sequence[Launched]) -> list[Goal]:
    """The goals the launches on :func:`problem` meet, each miss naming what to change."""
    return [as_goal(g) for g in split_k.launch_goals(launched)]


AT_SCALE = AtScale(
    asks=f"compiled at {split_k.M}x{split_k.N}x{split_k.K} float16 for an A100 and an H200",
    problem=problem,
    targets=split_k.TARGETS,
    judge=judge,
)

EXERCISE = Exercise(
    name="split_k",
    lesson=8,
    function="split_k_matmul",
    signature="split_k_matmul(a, b, c)",
    tensors=("a", "b", "c"),
    cases=cases,
    cells=Cells("08_racing_cublas", "rc22", "rc23", "rc24"),
    messages=products.MESSAGES,
    at_scale=AT_SCALE,
)
