"""The checks the lessons call. Each takes the learner's launcher and returns a
:class:`~tmm_course.check.result.CheckResult`: a verdict, the cases tried and diagnoses, the
first of which names the cause.

Every exercise is defined once, in :mod:`tmm_course.exercises` (its cases, reference,
tolerance and known mistakes); a check draws fresh cases of it on every call and runs them
through the engine (:func:`~tmm_course.check.engine.run_exercise`): the launcher runs once per
case into an output the check poisons and surrounds with canaries, its launches are recorded,
and the recorded kernels are launched again on fresh inputs, every buffer the launcher made
refilled with poison; what they store is the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from tmm_course.check.engine import run_exercise
from tmm_course.check.result import Case, CheckResult
from tmm_course.exercises import (
    fill_column_major,
    matmul,
    outer_product,
    scaled_matmul,
    strided_copy,
    transpose,
    vector_add,
)
from tmm_course.exercises.products import accumulator_precision
from tmm_course.exercises.spec import label, ragged

__all__ = [
    "CheckResult",
    "accumulator_precision",
    "check_fill_column_major",
    "check_matmul",
    "check_outer_product",
    "check_scaled_matmul",
    "check_strided_copy",
    "check_transpose",
    "check_vector_add",
    "labelled_case",
]


def labelled_case(shape: tuple[int, ...], note: str = "", strided: tuple[str, ...] = ()) -> Case:
    """A check's record of one case, labelled by its shape (for exercises outside the wing)."""
    axes = ragged(**dict(zip("MNK", shape, strict=False)))
    return Case(label(shape, note), shape, ragged=axes, strided=strided)


def check_vector_add(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 0: ``fn(x, y, out)`` must launch a kernel that stores ``x + y`` into ``out``, for
    any length, a multiple of the block or not."""
    return run_exercise(vector_add.EXERCISE, fn, allow_course_kernels=allow_course_kernels)


def check_fill_column_major(
    fn: Callable[[torch.Tensor], object], *, allow_course_kernels: bool = False
) -> CheckResult:
    """Lesson 1: ``fn(out)`` must set ``out[i, j] = j * M + i`` (the column-major index)."""
    return run_exercise(fill_column_major.EXERCISE, fn, allow_course_kernels=allow_course_kernels)


def check_outer_product(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 2: ``fn(x, y, out)`` must set ``out[i, j] = x[i] * y[j]`` by broadcasting."""
    return run_exercise(outer_product.EXERCISE, fn, allow_course_kernels=allow_course_kernels)


def check_strided_copy(
    fn: Callable[[torch.Tensor, torch.Tensor], object], *, allow_course_kernels: bool = False
) -> CheckResult:
    """Lesson 3: ``fn(x, out)`` must copy ``x`` into ``out`` for any strides of either."""
    return run_exercise(strided_copy.EXERCISE, fn, allow_course_kernels=allow_course_kernels)


def check_transpose(
    fn: Callable[[torch.Tensor, torch.Tensor], object],
    *,
    strided: bool = True,
    ragged: bool = True,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 5: ``fn(x, out)`` must store ``x.T`` into ``out`` (``x`` is M x N, ``out`` N x M).

    ``strided=False`` or ``ragged=False`` leave out the non-contiguous or the ragged cases, for
    the first parts of the homework.
    """
    exercise = transpose.PARTS.get((strided, ragged)) or replace(
        transpose.EXERCISE, cases=transpose.family(strided, ragged)
    )
    return run_exercise(exercise, fn, allow_course_kernels=allow_course_kernels, name="transpose")


def check_matmul(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 4: ``fn(a, b, c)`` must store ``a @ b`` into ``c`` (float16; the last case also
    float32), for any shapes and strides, with a float32 accumulator. ``allow_course_kernels``
    accepts the course's own kernels (lesson 9 checks its broken ones)."""
    return run_exercise(matmul.EXERCISE, fn, allow_course_kernels=allow_course_kernels)


def check_scaled_matmul(
    fn: Callable[..., object],
    alpha: float = scaled_matmul.ALPHA,
    beta: float = scaled_matmul.BETA,
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 5: ``fn(a, b, c, alpha, beta)`` must update ``c`` to ``alpha * a @ b + beta * c``.

    One case has ``beta = 0`` and ``c`` full of NaN: as in BLAS, ``c`` must then not be read.
    """
    exercise = replace(scaled_matmul.EXERCISE, cases=scaled_matmul.family(alpha, beta))
    return run_exercise(exercise, fn, allow_course_kernels=allow_course_kernels)
