"""Lesson 6: lesson 4's kernel made faster by the learner. ``fast_matmul(a, b, c)`` stores
``a @ b`` into ``c`` as lesson 4's ``my_matmul`` does (the same cases: any shapes and strides,
float16 and float32, a float32 accumulator), through a kernel of theirs launched with the tile,
warps and stages they chose. Beyond the values, its launches on a float16 ``4096^3`` product
are noted, not run, compiled for the five GPUs the course names, and judged by
:func:`tmm_course.perf.faster.launch_goals` (no program redoing another's tile, reuse,
spills, the tensor cores, a ring deep enough for an H200 that fits an A100, an RTX 50 and a
T4); on a GPU the check races it against lesson 4's kernel too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch

from tmm_course import gpus
from tmm_course.compile_ahead import Launched
from tmm_course.exercises import matmul, products
from tmm_course.exercises.spec import AtScale, Case, Cells, Exercise, Goal, Output, label
from tmm_course.perf import faster


def as_goal(goal: faster.Goal) -> Goal:
    """A goal of a performance lab's as an exercise's goal: a miss names the knob to turn."""
    fix = f"{goal.asks}: not yet ({goal.seen})." + (f" Turn {goal.knob}." if goal.knob else "")
    return Goal(goal.asks, goal.met, goal.seen, "goal_missed", "" if goal.met else fix)


def float16_product(m: int, n: int, k: int) -> Case:
    """A float16 ``m x n x k`` product a compiler judges at scale (its values unused)."""
    a = torch.zeros(m, k, dtype=torch.float16)
    b = torch.zeros(k, n, dtype=torch.float16)
    return Case(label((m, n, k), "float16"), (m, n, k), (a, b), Output((m, n), torch.float16),
                torch.zeros(0))  # fmt: skip


def compiled_at(
    shape: tuple[int, int, int],
    gpus: str,
    targets: tuple[str, ...],
    goals: Callable[[Sequence[Launched]], list[faster.Goal]],
) -> AtScale:
    """A performance exercise's :class:`AtScale`: its launches on a float16 ``shape`` product,
    compiled for ``targets`` (``gpus`` names them for the case list), judged by a lab's
    ``goals``, each miss naming the knob to turn."""

    def judge(launched: Sequence[Launched]) -> list[Goal]:
        return [as_goal(g) for g in goals(launched)]

    m, n, k = shape
    size = f"{m}^3" if m == n == k else f"{m}x{n}x{k}"
    return AtScale(f"compiled at {size} float16 for {gpus}", partial(float16_product, m, n, k),
                   targets, judge)  # fmt: skip


EXERCISE = Exercise(
    name="faster",
    lesson=6,
    function="fast_matmul",
    signature="fast_matmul(a, b, c)",
    tensors=("a", "b", "c"),
    cases=matmul.cases,
    cells=Cells("06_making_it_fast", "mf23", "mf24", "mf25"),
    messages=products.MESSAGES,
    at_scale=compiled_at(
        (faster.SIZE,) * 3,
        ", ".join(gpus.label(t) for t in faster.TARGETS),
        faster.TARGETS,
        faster.launch_goals,
    ),
)
