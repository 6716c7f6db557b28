"""Lesson 6: make lesson 4's kernel faster by choosing its knobs (``my_launch``: tile, warps,
stages, launch order), after saying why (``my_reasoning``). Judged by the compiler for a T4,
an A100 and an H200 (:func:`tmm_course.perf.faster.compiler_goals`: reuse, spills, the tensor
cores, programs per SM) and, with ``clock``, by this GPU's clock against lesson 4's launch."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

from tmm_course.exercises.spec import Answer, Cells, Goal
from tmm_course.perf import faster

REASONING_WORDS = 12  # a sentence or two: what limits lesson 4's launch, what yours changes


def as_goal(goal: faster.Goal) -> Goal:
    """A goal of the performance lab's as an answer's goal: a miss names the knob to turn."""
    fix = f"{goal.asks}: not yet ({goal.seen})." + (f" Turn {goal.knob}." if goal.knob else "")
    return Goal(goal.asks, goal.met, goal.seen, "goal_missed", "" if goal.met else fix)


def before_the_figures(untouched: bool, variable: str, reasoning: object,
                       asks: str) -> list[Goal] | None:  # fmt: skip
    """The one goal an answer of knobs gets before the compiler's figures are shown: its
    knobs still lesson 4's, or ``reasoning`` (saying ``asks``) under :data:`REASONING_WORDS`
    words; None when neither."""
    if untouched:
        return [Goal("your launch", False, "still lesson 4's own knobs", "not_implemented",
                     f"Change {variable}'s knobs (it still holds lesson 4's), write "
                     "my_reasoning, then run the check.")]  # fmt: skip
    if not (isinstance(reasoning, str) and len(reasoning.split()) >= REASONING_WORDS):
        words = len(reasoning.split()) if isinstance(reasoning, str) else 0
        seen = f"{words} words, at least {REASONING_WORDS} asked" if words else "not written yet"
        return [Goal("your reasoning", False, seen, "not_implemented",
                     f"First say in my_reasoning (at least {REASONING_WORDS} words) {asks}; the "
                     "check shows the compiler's figures after that, and the grader's report "
                     "quotes it for your instructor.")]  # fmt: skip
    return None


def judged(lab: ModuleType, knobs: object, untouched: bool, variable: str, reasoning: object,
           asks: str, clock: bool) -> list[Goal]:  # fmt: skip
    """The goals a launch's ``knobs`` meet in a performance lab (:mod:`tmm_course.perf.faster`
    or :mod:`~tmm_course.perf.split_k`: its ``compiled``, ``compiler_goals``, ``race`` and
    ``clock_goal``), after :func:`before_the_figures`; with ``clock``, on this GPU's clock
    too."""
    first = before_the_figures(untouched, variable, reasoning, asks)
    if first:
        return first
    goals = lab.compiler_goals(knobs, lab.compiled(knobs))
    if clock:
        import torch

        name = torch.cuda.get_device_name(0)
        goals.append(lab.clock_goal(lab.race(knobs), name, faster.missed_knob(goals)))
    return [as_goal(g) for g in goals]


def judge(launch: Mapping[str, object], reasoning: object = "", clock: bool = False) -> list[Goal]:
    """The goals ``launch`` (knob name -> value) meets; nothing is compiled until
    ``reasoning`` (at least :data:`REASONING_WORDS` words) says what the knobs change."""
    knobs = faster.knobs_of(launch)
    return judged(faster, knobs, knobs == faster.BASELINE, "my_launch", reasoning,
                  "what limits lesson 4's launch and what each knob you turned changes",
                  clock)  # fmt: skip


EXERCISE = Answer(
    name="faster",
    lesson=6,
    names=("my_launch", "my_reasoning"),
    judge=judge,
    quoted="my_reasoning",
    cells=Cells("06_making_it_fast", "mf23", "mf24", "mf25"),
)
