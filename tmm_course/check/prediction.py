"""Lesson 6's predict_knob, judged against the compiler: an exercise whose answer is data
(:class:`~tmm_course.exercises.spec.Prediction`). Both launches of lesson 4's ``matmul()`` it
names are made on a float16 product of its size with every launch noted and not run
(:func:`~tmm_course.check.launches.recording`), and compiled through the check's compile gate
(:func:`~tmm_course.check.compiled.launched`, cached per launch), once the exercise's judge
finds a value it can judge and asks for them. The check and the batch grader both judge with
:func:`goals`."""

from __future__ import annotations

import torch

import tmm_course
from tmm_course.check.compiled import launched
from tmm_course.check.launches import grid_of, recording
from tmm_course.check.result import CheckResult, from_goals
from tmm_course.compile_ahead import Compiled
from tmm_course.exercises import predict_knob
from tmm_course.exercises.spec import Exercise, Goal
from tmm_course.perf.knobs import Knobs


def compiled(knobs: Knobs, size: int, target: str) -> Compiled:
    """What lesson 4's ``matmul()`` with ``knobs`` compiles to for ``target`` on a float16
    ``size^3`` product: its launch noted (not run) and compiled through the compile gate."""
    a = torch.empty(size, size, dtype=torch.float16, device=tmm_course.DEVICE)
    with recording(dry=True) as seen:
        knobs.launcher()(a, a)
    (x,) = [x for x in seen.seen if x.jit is not None]
    return launched(x.jit, x.kernel, x.args, x.kwargs, grid_of(x), (target,)).compiled[target]


def goals(exercise: Exercise, answer: object) -> list[Goal]:
    """The goals of ``exercise``'s prediction on ``answer``: one per figure it predicts."""
    at = exercise.predicts
    assert at is not None
    return at.judge(answer, lambda knobs: compiled(knobs, at.size, at.target))


def check_predict_knob(prediction: object) -> CheckResult:
    """Lesson 6: ``prediction`` (a dict) says which way each of the compiler's figures goes
    for an H100 when lesson 4's launch at 128x128x64, 4 warps, 3 stages doubles ``BLOCK_N``:
    registers per thread, spills, shared memory, FLOPs per byte loaded, programs per SM. Each
    is compared with what the compiler makes of both launches; a wrong one is named with the
    figure that shows it."""
    exercise = predict_knob.EXERCISE
    return from_goals(exercise.name, goals(exercise, prediction))
