"""Lesson 10's exercise, the block-scaled float8 matmul: its check (the exercise itself is
:mod:`tmm_course.exercises.fp8_matmul`)."""

from __future__ import annotations

from collections.abc import Callable

from tmm_course.check.engine import run_exercise
from tmm_course.check.result import CheckResult
from tmm_course.exercises import fp8_matmul


def check_fp8_matmul(fn: Callable[..., object]) -> CheckResult:
    """Lesson 10: ``fn(a, a_scale, b, b_scale, c)`` must store ``(a * a_scale) @ (b * b_scale)``
    into ``c`` (float32): float8 ``a`` (M, K) with a scale per row and 128-wide K block, float8
    ``b`` (K, N) with one per 128 x 128 block, applied in the K loop, summed in float32; any
    shapes and strides, outlier blocks included."""
    return run_exercise(fp8_matmul.EXERCISE, fn)
