"""Lesson 8: fill the machine. The learner launches the capstone's grouped kernel on a deep
float16 ``512 x 512 x 16384`` product with a configuration of their own (``my_split``: tile,
warps, stages, ``SPLIT_K``), after saying why (``my_reasoning``). Judged by the compiler for an
A100 and an H200 and by the launch's arithmetic (:func:`tmm_course.perf.split_k.compiler_goals`)
and, with ``clock``, by this GPU's clock against lesson 4's kernel on the same product."""

from __future__ import annotations

from collections.abc import Mapping

from tmm_course.exercises.faster import REASONING_WORDS, as_goal
from tmm_course.exercises.spec import Answer, Cells, Goal
from tmm_course.perf import faster, split_k


def judge(launch: Mapping[str, object], reasoning: object = "", clock: bool = False) -> list[Goal]:
    """The goals ``launch`` (knob name -> value) meets; nothing is compiled until
    ``reasoning`` (at least :data:`REASONING_WORDS` words) says what the knobs change."""
    config = split_k.config_of(launch)
    if config == split_k.config_of(split_k.LESSON_4):
        return [Goal("your launch", False, "still lesson 4's own knobs", "not_implemented",
                     "Change my_split's knobs (it still holds lesson 4's), write my_reasoning, "
                     "then run the check.")]  # fmt: skip
    if not (isinstance(reasoning, str) and len(reasoning.split()) >= REASONING_WORDS):
        words = len(reasoning.split()) if isinstance(reasoning, str) else 0
        seen = f"{words} words, at least {REASONING_WORDS} asked" if words else "not written yet"
        return [Goal("your reasoning", False, seen, "not_implemented",
                     f"First say in my_reasoning (at least {REASONING_WORDS} words) how many "
                     "programs lesson 4's launch gives 132 SMs and what your knobs change; the "
                     "check shows the compiler's figures after that.")]  # fmt: skip
    goals = split_k.compiler_goals(config, split_k.compiled(config))
    if clock:
        import torch

        name = torch.cuda.get_device_name(0)
        goals.append(split_k.clock_goal(split_k.race(config), name, faster.missed_knob(goals)))
    return [as_goal(g) for g in goals]


EXERCISE = Answer(
    name="split_k",
    lesson=8,
    names=("my_split", "my_reasoning"),
    judge=judge,
    cells=Cells("08_racing_cublas", "rc22", "rc23", "rc24"),
)
