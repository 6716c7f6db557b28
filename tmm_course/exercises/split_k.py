"""Lesson 8: split-K written by the learner. ``split_k_matmul(a, b, c)`` stores ``a @ b`` into
``c`` as lesson 4's ``my_matmul`` does (the same cases: any shapes and strides, float16 and
float32, a float32 accumulator), with ``K`` cut into slices, one program per (tile, slice), the
slices' float32 partials added by a kernel of theirs (``tl.atomic_add`` into a buffer of zeros,
say) and a kernel storing ``c``. Beyond the values, its launches on a float16
``512 x 512 x 16384`` product (64 tiles of 64x64 for an H200's 132 SMs) are noted, not run,
compiled for an A100 and an H200, and judged by :func:`tmm_course.perf.split_k.launch_goals`;
on a GPU the check races it against lesson 4's kernel too."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tmm_course.compile_ahead import Launched
from tmm_course.exercises import matmul, products
from tmm_course.exercises.faster import as_goal
from tmm_course.exercises.spec import AtScale, Case, Cells, Exercise, Goal, Output, label
from tmm_course.perf import split_k


def problem() -> Case:
    """The float16 ``512 x 512 x 16384`` product the compiler judges (its values unused)."""
    m, n, k = split_k.M, split_k.N, split_k.K
    a = torch.zeros(m, k, dtype=torch.float16)
    b = torch.zeros(k, n, dtype=torch.float16)
    return Case(label((m, n, k), "float16"), (m, n, k), (a, b), Output((m, n), torch.float16),
                torch.zeros(0))  # fmt: skip


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
    cases=matmul.cases,
    cells=Cells("08_racing_cublas", "rc22", "rc23", "rc24"),
    messages=products.MESSAGES,
    at_scale=AT_SCALE,
)
