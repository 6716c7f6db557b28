"""Lesson 8: fill the machine. The learner launches the capstone's grouped kernel on a deep
float16 ``512 x 512 x 16384`` product with a configuration of their own (``my_split``: tile,
warps, stages, ``SPLIT_K``), after saying why (``my_reasoning``). Judged by the compiler for an
A100 and an H200 and by the launch's arithmetic (:func:`tmm_course.perf.split_k.compiler_goals`)
and, with ``clock``, by this GPU's clock against lesson 4's kernel on the same product."""

from __future__ import annotations

from collections.abc import Mapping

from tmm_course.exercises.faster import judged
from tmm_course.exercises.spec import Answer, Cells, Goal
from tmm_course.perf import split_k


def judge(launch: Mapping[str, object], reasoning: object = "", clock: bool = False) -> list[Goal]:
    """The goals ``launch`` (knob name -> value) meets; nothing is compiled until
    ``reasoning`` says what the knobs change (:func:`~tmm_course.exercises.faster.judged`)."""
    config = split_k.config_of(launch)
    return judged(split_k, config, config == split_k.config_of(split_k.LESSON_4), "my_split",
                  reasoning, "how many programs lesson 4's launch gives 132 SMs and what your "
                  "knobs change", clock)  # fmt: skip


EXERCISE = Answer(
    name="split_k",
    lesson=8,
    names=("my_split", "my_reasoning"),
    judge=judge,
    quoted="my_reasoning",
    cells=Cells("08_racing_cublas", "rc22", "rc23", "rc24"),
)
