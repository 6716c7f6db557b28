"""The checks the lessons call. Each takes the learner's launcher and returns a
:class:`~tmm_course.check.result.CheckResult`: a verdict, the cases tried and diagnoses, the
first of which names the cause.

Every exercise is defined once, in :mod:`tmm_course.exercises` (its cases, reference,
tolerance and known mistakes); a check draws fresh cases of it on every call and runs them
through the engine (:func:`~tmm_course.check.engine.run_exercise`): the launcher is called once
per case with an output the check poisons and surrounds with canaries, its launches are
recorded (on the interpreter, not run), and the recorded kernels are launched by the check on
fresh inputs, every buffer the launcher made refilled with poison; what they store is the
verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

import tmm_course
from tmm_course.backend import GPU
from tmm_course.check.compiled import at_scale_goals, requirement_case
from tmm_course.check.engine import run_exercise
from tmm_course.check.result import Case, CheckResult, Diagnosis, from_goals
from tmm_course.exercises import (
    column_order_fill,
    descriptor_matmul,
    faster,
    five_gpus,
    flip_rows,
    grouped_tile,
    matmul,
    outer_product,
    scaled_matmul,
    split_k,
    transpose,
    vector_add,
)
from tmm_course.exercises.products import accumulator_precision
from tmm_course.exercises.spec import label, ragged

__all__ = [
    "CheckResult",
    "accumulator_precision",
    "check_column_order_fill",
    "check_descriptor_matmul",
    "check_faster",
    "check_five_gpus",
    "check_flip_rows",
    "check_grouped_tile",
    "check_matmul",
    "check_outer_product",
    "check_scaled_matmul",
    "check_split_k",
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


def check_column_order_fill(
    fn: Callable[[torch.Tensor], object], *, allow_course_kernels: bool = False
) -> CheckResult:
    """Lesson 1: ``fn(out)`` must store, in each cell, the number of the program that owns it:
    8 x 4 tiles on a 1-D grid, numbered down the columns of tiles."""
    return run_exercise(column_order_fill.EXERCISE, fn, allow_course_kernels=allow_course_kernels)


def check_outer_product(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 2: ``fn(x, y, out)`` must set ``out[i, j] = x[i] * y[j]`` by broadcasting."""
    return run_exercise(outer_product.EXERCISE, fn, allow_course_kernels=allow_course_kernels)


def check_flip_rows(
    fn: Callable[[torch.Tensor, torch.Tensor], object],
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 3: ``fn(x, out)`` must store ``x[M - 1 - i, j]`` into ``out[i, j]`` for any
    strides of ``x`` and ``out`` (transposed, sliced, every other column, padded rows)."""
    return run_exercise(flip_rows.EXERCISE, fn, allow_course_kernels=allow_course_kernels)


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
    """Lesson 4's product, judged in lessons 8 and 9: ``fn(a, b, c)`` must store ``a @ b`` into
    ``c`` (float16; the last case also float32), for any shapes and strides, with a float32
    accumulator. ``allow_course_kernels``
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


def check_grouped_tile(fn: Callable[..., object]) -> CheckResult:
    """Lesson 6: ``fn(tiles, grid_m, grid_n, group_m)`` must launch one program per tile, each
    storing its tile in grouped order into its row of the int32 ``tiles``."""
    return run_exercise(grouped_tile.EXERCISE, fn)


# findings after which nothing more is judged: no kernel of the learner's ran or compiles, or
# (lesson 7) one reads otherwise than the exercise asks
NOTHING_MORE = {"not_implemented", "crashed", "timed_out", "course_kernel", "no_triton_kernel",
                "gpu_would_reject", "no_descriptor", "host_copy"}  # fmt: skip


def _also(result: CheckResult, more: CheckResult) -> CheckResult:
    """``result`` with ``more``'s cases after its own; its first diagnosis, when ``result``'s
    values passed, first."""
    result.cases += more.cases
    if not more.passed:
        if result.passed:
            result.diagnoses = more.diagnoses + result.diagnoses
        else:
            result.diagnoses += more.diagnoses
        result.passed = False
    return result


def _clocked(name: str, ms: dict[str, float], lab) -> CheckResult:
    """The clock's goal on this GPU from ``ms`` (a race against lesson 4's kernel and
    ``torch.matmul``; ``lab``: :mod:`tmm_course.perf.faster` or
    :mod:`~tmm_course.perf.split_k`)."""
    goal = lab.clock_goal(ms, torch.cuda.get_device_name(0))
    return from_goals(name, [faster.as_goal(goal)])


def check_descriptor_matmul(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
) -> CheckResult:
    """Lesson 7: ``fn(a, w, c)`` must store ``a @ w.T`` into ``c`` through tensor descriptors,
    ``w`` (N x K) read where it lies, on contiguous float16 (and one float32) operands whose
    rows start every 16 bytes, ragged edges included, with a float32 accumulator; compiled for
    an H200, its kernels must load and store through descriptors alone (TMA copies), and at
    float16 ``4096^3`` start no more programs than tiles and reach a 128x128 tile's reuse
    without spills, on ``wgmma``, with a ring of 3 slabs
    (:func:`tmm_course.perf.faster.descriptor_goals`). On a GPU it is raced against lesson 4's
    kernel too."""
    from tmm_course.perf import faster as clock

    a = torch.randn(128, 128, device=tmm_course.DEVICE).half()
    b = torch.randn(128, 128, device=tmm_course.DEVICE).half()
    c = torch.empty(128, 128, device=tmm_course.DEVICE, dtype=torch.float16)
    race = lambda: clock.race(clock.filled(fn))  # square: w as N x K
    return _at_scale(descriptor_matmul.EXERCISE, fn, race, clock, reads=lambda: fn(a, b, c))


def _at_scale(exercise, fn: Callable[..., object], race: Callable[[], dict], lab,
              reads: Callable[[], object] | None = None) -> CheckResult:  # fmt: skip
    """``fn``'s values on the exercise's cases, then, unless nothing more can be judged: the
    kernels ``reads()`` launches judged by ``exercise.requires`` (lesson 7), the goals of its
    launches at scale (:func:`~tmm_course.check.compiled.at_scale_goals`) and, on a GPU once
    those pass, the clock (``race()`` timed, judged by ``lab.clock_goal``)."""
    result = run_exercise(exercise, fn)
    if set(result.codes) & NOTHING_MORE:
        return result
    if reads is not None:
        requirement = exercise.requires
        assert requirement is not None
        shown = requirement_case(requirement, reads)
        result.cases.append(shown)
        if not shown.passed:  # every code it gives is one of NOTHING_MORE
            result.passed = False
            result.diagnoses.insert(0, Diagnosis(shown.code or requirement.code, shown.problem))
            return result
    result = _also(result, from_goals(exercise.name, at_scale_goals(exercise, fn)))
    if result.passed and tmm_course.BACKEND == GPU:
        result = _also(result, _clocked(exercise.name, race(), lab))
    return result


def check_faster(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object]) -> CheckResult:
    """Lesson 6: ``fn(a, b, c)`` must store ``a @ b`` into ``c`` as lesson 4's ``matmul``
    does (the same cases), through a kernel of its own. Its launches on a float16 ``4096^3``
    product, noted and not run, are compiled for the five GPUs the course names and judged:
    FLOPs per byte, no spills, ``mma``/``wgmma``, a ring of 4 slabs on an H200 that fits an
    A100, an RTX 50 and a T4 (:func:`tmm_course.perf.faster.compiler_goals`). On a GPU it is
    raced against lesson 4's kernel at that size too."""
    from tmm_course.perf import faster as lab

    return _at_scale(faster.EXERCISE, fn, lambda: lab.race(lab.filled(fn)), lab)


def check_five_gpus(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
) -> CheckResult:
    """Lesson 4: ``fn(a, b, c)`` must store ``a @ b`` into ``c`` as the lesson's ``matmul`` does
    (the same cases), through a kernel of its own; its launches on a float16 ``4096^3`` product,
    noted and not run, are compiled for the five GPUs the course names and judged there: within
    each GPU's limits, no spills, a program per SM (:func:`tmm_course.exercises.five_gpus.judge`).
    Judged by the compiler alone, on any machine."""
    result = run_exercise(five_gpus.EXERCISE, fn)
    if set(result.codes) & NOTHING_MORE:
        return result
    return _also(result, from_goals(five_gpus.EXERCISE.name,
                                    at_scale_goals(five_gpus.EXERCISE, fn)))  # fmt: skip


def check_split_k(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object]) -> CheckResult:
    """Lesson 8: ``fn(a, b, c)`` must store ``a @ b`` into ``c`` as lesson 4's ``matmul``
    does (the same cases), through split-K kernels of its own, each slice of a tile loading
    only its share of ``K`` (read from the record of the loads). Its launches on a float16
    512 x 512 x 16384 product, noted and not run, are compiled for an A100 and an H200 and
    judged: no spills, ``wgmma``, a program for every SM of an H200 yet one wave, loads in
    flight, slices deep enough to pipeline. On a GPU it is raced against lesson 4's kernel on
    that product too."""
    from tmm_course.perf import split_k as lab

    return _at_scale(split_k.EXERCISE, fn, lambda: lab.race(fn), lab)
