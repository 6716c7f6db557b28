"""Lesson 8: split-K written by the learner. ``split_k_matmul(a, b, c)`` stores ``a @ b`` into
``c`` as lesson 4's ``matmul`` does (the same cases: any shapes and strides, float16 and
float32, a float32 accumulator), with ``K`` cut into slices, one program per (tile, slice), the
slices' float32 partials added by a kernel of theirs (``tl.atomic_add`` into a buffer of zeros,
say) and a kernel storing ``c``. Once the values are right, the record of its loads must show
each slice of a tile walking only its share of ``K`` (:func:`shares_k`). Its launches on a float16
``512 x 512 x 16384`` product (64 tiles of 64x64 for an H200's 132 SMs) are noted, not run,
compiled for an A100 and an H200, and judged by :func:`tmm_course.perf.split_k.launch_goals`;
on a GPU the check races it against lesson 4's kernel too."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from tmm_course.exercises import matmul, products
from tmm_course.exercises.faster import compiled_at
from tmm_course.exercises.spec import (
    Case,
    Cells,
    Exercise,
    Mistake,
    Reads,
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


UNSHARED = (
    "the right values, but the K-slices do not share the work: a program loaded {loaded} of "
    "a's {k} columns for its tile, where {slices} slices of whole BLOCK_K={block_k} steps, "
    "sharing K evenly, load at most {share} each (the other slices of its tile idle). Each "
    "slice's loop must walk its own share of K, not all of it."
)


def shares_k(reads: Reads) -> str | None:
    """Whether the slices of each tile shared ``K``: the programs that load the same rows of
    ``a`` and columns of ``b`` (one tile) count as its slices, the grid's programs over those
    tiles; none may load more columns of ``a`` than an even split into whole ``BLOCK_K`` steps
    gives. None when they did (or when the launch names no ``BLOCK_K``)."""
    block_k = reads.constants.get("BLOCK_K")
    if not block_k or "a" not in reads.cells or "b" not in reads.cells:
        return None
    k, n = reads.shapes["a"][1], reads.shapes["b"][1]
    tiles: set[tuple[frozenset[int], frozenset[int]]] = set()
    columns: list[int] = []
    for program, cells in reads.cells["a"].items():
        rows = frozenset(int(c) // k for c in cells)
        tiles.add((rows, frozenset(int(c) % n for c in reads.cells["b"].get(program, ()))))
        columns.append(len({int(c) % k for c in cells}))
    if not tiles:
        return None
    slices = max(1, reads.programs // len(tiles))
    steps = math.ceil(k / block_k)
    share = math.ceil(steps / slices) * block_k  # whole BLOCK_K steps per slice
    loaded = max(columns)
    if loaded <= share:
        return None
    return UNSHARED.format(loaded=loaded, k=k, slices=slices, block_k=block_k, share=share)


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


# the K the compiled figures are judged at, on a small tile: the values of the launches made
# for that K are judged too (a launcher that splits only for a long K cannot hide the split)
AT_SCALE_K = products.Product("K as compiled at scale", 16, 16, split_k.K, "contiguous")


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    """Lesson 4's cases (:func:`tmm_course.exercises.matmul.cases`) and one at the K of
    :data:`AT_SCALE_K`, each with :func:`slice_mistakes`."""
    found = [case_of(c) for c in matmul.cases(gen, backend, resize)]
    long_k = replace(matmul.case(AT_SCALE_K, torch.float16, backend, gen), only_if_all_passed=True)
    return [*found, case_of(long_k)]


EXERCISE = Exercise(
    name="split_k",
    lesson=8,
    function="split_k_matmul",
    signature="split_k_matmul(a, b, c)",
    tensors=("a", "b", "c"),
    cases=cases,
    cells=Cells("08_racing_cublas", "rc22", "rc23", "rc24"),
    messages=products.MESSAGES,
    work=shares_k,
    at_scale=compiled_at(
        (split_k.M, split_k.N, split_k.K),
        "an A100 and an H200",
        split_k.TARGETS,
        split_k.launch_goals,
    ),
)
