"""Lesson 8: graded predictions: what the capstone's own plan does on the H200, worked out
before the lesson shows it (which kernel a problem gets, how many waves its tiles make, where
``matmul_fast`` loses), checked against the plan and the grid the stored H200 run raced
(:func:`tmm_course.perf.results.grid`). A wrong answer gets a hint at the way and, for a known
slip, its name; never the answer."""

from __future__ import annotations

import functools
import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from tmm_course.exercises.spec import Answer, Cells, Goal
from tmm_course.perf import results, waves

PLANNED = "1536^3 float16"  # a problem whose plan lesson 8 does not print before the question
H200_SMS = 132


@dataclass(frozen=True)
class Question:
    """One prediction: what is asked, its answer, a hint at the way (never the answer), and
    the slips a learner makes, as factors between their number and the answer."""

    asks: str
    answer: Callable[[], float | bool | str]
    how: str
    rel_tol: float = 0.01
    slips: Mapping[float, str] = field(default_factory=dict)
    choices: tuple[str, ...] = ()  # a named answer: one of these


@functools.cache
def _grid() -> results.Grid:
    return results.grid("grid_h200.json")


def planned(label: str) -> tuple[str, tuple[int, int, int]]:
    """(kernel path, (BLOCK_M, BLOCK_N, BLOCK_K)) of the plan the stored H200 run raced for
    ``label``, read from the plan it recorded."""
    row = next(r for r in _grid().rows if r.label == label)
    found = re.match(r"(\w+) kernel, (\d+)x(\d+)x(\d+)", row.plan or "")
    if found is None:
        raise ValueError(f"the stored plan of {label} does not name a kernel: {row.plan!r}")
    return found.group(1), tuple(int(found.group(i)) for i in (2, 3, 4))


def _waves() -> float:
    _, (bm, bn, _) = planned(PLANNED)
    problem = next(r.problem for r in _grid().rows if r.label == PLANNED)
    return waves.waves(problem.m, problem.n, bm, bn, sms=H200_SMS).waves


def _loses_most() -> str:
    """The family whose held-out problems ran furthest behind torch.matmul, host included."""
    families = _grid().families()
    return min(families, key=lambda name: families[name][1])


FAMILIES = (
    "square", "few rows or columns", "small K", "odd sizes", "B column-major", "rectangular",
    "A column-major",
)  # fmt: skip

LESSON_8 = {
    "path": Question(
        f"which kernel matmul_fast's plan runs for {PLANNED} on the H200: 'grouped' or "
        "'persistent_tma'",
        lambda: planned(PLANNED)[0],
        "count the tiles a 128x256 persistent program would take on 132 SMs, and ask what a "
        "persistent loop buys when there are fewer tiles than SMs to loop over",
        choices=("grouped", "persistent_tma"),
    ),
    "waves": Question(
        f"how many waves of tiles that plan's tile makes for {PLANNED} on the H200's 132 SMs "
        "(tiles / 132, to two decimals); the tile is in the plan: plan_tile, printed above",
        _waves,
        "cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) tiles, divided by the SMs (lesson 7)",
        slips={
            2.0: "that counts tiles of half the size along one side",
            0.5: "that counts tiles twice the size along one side",
        },
    ),
    "loses_most": Question(
        "the family of problems where matmul_fast, host time included, is furthest behind "
        f"torch.matmul in the grid (one of: {', '.join(FAMILIES)})",
        _loses_most,
        "think of where cuBLAS is tuned hardest, and where the plan's tiles leave a last wave "
        "part empty (lesson 7's quantisation)",
        choices=FAMILIES,
    ),
}


def _kind(value: object) -> str:
    if isinstance(value, list | tuple):
        return "a list or tuple"  # a tuple reaches the judge as a list (JSON has no tuples)
    name = type(value).__name__
    return ("an " if name[0] in "aeiou" else "a ") + name


def _judge(question: Question, yours: object) -> tuple[bool, str]:
    """(right, what to tell the learner when not)."""
    right = question.answer()
    if isinstance(right, str):
        if not isinstance(yours, str):
            return (
                False,
                f"expected one of {', '.join(map(repr, question.choices))}, got {_kind(yours)}",
            )
        if yours.strip().lower() not in question.choices:
            return False, f"{yours!r} is none of {', '.join(map(repr, question.choices))}"
        return yours.strip().lower() == right, f"work it out: {question.how}"
    if isinstance(right, bool):
        if not isinstance(yours, bool | np.bool_):
            return False, f"expected True or False, got {_kind(yours)} ({yours!r})"
        return bool(yours) == right, f"work it out as {question.how}"
    if isinstance(yours, bool | np.bool_) or not isinstance(yours, numbers.Real):
        return False, f"expected a number (an int or a float), got {_kind(yours)} ({yours!r})"
    value = float(yours)
    if not math.isfinite(value):
        return False, f"expected a finite number, got {value!r}"
    if abs(value - right) <= question.rel_tol * abs(right):
        return True, ""
    for factor, slip in question.slips.items():
        if right and abs(value - factor * right) <= question.rel_tol * abs(factor * right):
            return False, f"a slip of units or factors: {slip}"
    side = "too high" if value > right else "too low"
    return False, f"{side}: work it out as {question.how}"


def judge(answers: Mapping[str, object], clock: bool = False) -> list[Goal]:
    """Each of ``answers`` (question name -> your answer, or None while unanswered) against
    what the plan and the stored grid say; a wrong one is named with a hint at the way, never
    the answer. ``clock`` changes nothing: the answers are about the stored H200 run."""
    if not isinstance(answers, Mapping):
        raise TypeError(
            f"my_predictions must be a dict of question name -> your answer, got "
            f"{_kind(answers)}. Fix: my_predictions = {{'path': ..., ...}} with the names "
            f"{', '.join(LESSON_8)}, then run the check."
        )
    unknown = [name for name in answers if name not in LESSON_8]
    if unknown:
        raise KeyError(
            f"no question named {', '.join(map(repr, unknown))}; the questions are "
            f"{', '.join(LESSON_8)}"
        )
    unanswered = [name for name in LESSON_8 if answers.get(name) is None]
    if len(unanswered) == len(LESSON_8):
        return [Goal("your predictions", False, "no answer yet", "not_implemented",
                     "Fill in my_predictions, then run the check.")]  # fmt: skip
    goals = []
    for name, question in LESSON_8.items():
        yours = answers.get(name)
        if yours is None:
            still = ", ".join(unanswered)
            goals.append(Goal(f"{name}: {question.asks}", False, "no answer yet",
                              "not_implemented", f"Still to answer: {still}."))  # fmt: skip
            continue
        right, why = _judge(question, yours)
        goals.append(Goal(f"{name}: {question.asks}", right, "" if right else
                          f"you said {yours!r}: {why}", "wrong_values", "" if right else
                          f"{name}: you said {yours!r}, which is not it ({why}); then run "
                          "the check again."))  # fmt: skip
    return goals


EXERCISE = Answer(
    name="predictions",
    lesson=8,
    names=("my_predictions",),
    judge=judge,
    cells=Cells("08_racing_cublas", "rc15", "rc16", "rc17"),
)
