"""The course's exercises, one module each: what the learner's function is called with, the
cases it is judged on (drawn from a ``torch.Generator``), the float64 reference and its
tolerance, the known mistakes and the sentence each gets, and the notebook cells it lives in.
The learner's check (:mod:`tmm_course.check`) and the batch grader (:mod:`tmm_course.teach`)
both judge from these; the types are in :mod:`~tmm_course.exercises.spec`.

    from tmm_course.exercises import BY_NAME
    from tmm_course.exercises.spec import generator
    cases = BY_NAME["matmul"].draw(generator(seed), "interpreter")
"""

from __future__ import annotations

from tmm_course.exercises import (
    column_order_fill,
    descriptor_matmul,
    faster,
    five_gpus,
    fixes,
    flip_rows,
    fp8_matmul,
    grouped_tile,
    linear_relu,
    matmul,
    outer_product,
    predict_knob,
    scaled_matmul,
    split_k,
    transpose,
    vector_add,
)
from tmm_course.exercises.spec import Exercise

EXERCISES: list[Exercise] = [
    vector_add.EXERCISE,
    column_order_fill.EXERCISE,
    outer_product.EXERCISE,
    flip_rows.EXERCISE,
    matmul.EXERCISE,
    linear_relu.EXERCISE,
    five_gpus.EXERCISE,
    transpose.PART_1,
    transpose.PART_2,
    transpose.EXERCISE,
    scaled_matmul.EXERCISE,
    predict_knob.EXERCISE,
    faster.EXERCISE,
    grouped_tile.EXERCISE,
    descriptor_matmul.EXERCISE,
    split_k.EXERCISE,
    *fixes.EXERCISES,
    fp8_matmul.EXERCISE,
]
BY_NAME: dict[str, Exercise] = {e.name: e for e in EXERCISES}
BY_CELL: dict[str, Exercise] = {e.cells.exercise: e for e in EXERCISES if e.cells}

__all__ = ["BY_CELL", "BY_NAME", "EXERCISES", "Exercise"]
