"""Lesson 4's exercise, a linear layer, ``out = relu(x @ w^T + bias)``: its check (the
exercise itself is :mod:`tmm_course.exercises.linear_relu`)."""

from __future__ import annotations

from collections.abc import Callable

from tmm_course.check.engine import run_exercise
from tmm_course.check.result import CheckResult
from tmm_course.exercises import linear_relu


def check_linear_relu(fn: Callable[..., object]) -> CheckResult:
    """Lesson 4: ``fn(x, w, bias, out)`` must store ``relu(x @ w.T + bias)`` into
    ``out`` (x (M, K), w (N, K), bias (N,), all float16), for any shapes and strides, with a
    float32 accumulator."""
    return run_exercise(linear_relu.EXERCISE, fn)
