"""The exercise checks (:mod:`~tmm_course.check.exercises`), the engine that runs and judges
them (:mod:`~tmm_course.check.engine`) and, on the interpreter, the memory guard that bounds
every load and store (:mod:`~tmm_course.check.memory_guard`).

``from tmm_course.check import check_matmul`` is what a lesson imports."""

from tmm_course.check.engine import CheckResult
from tmm_course.check.exercises import (
    check_fill_column_major,
    check_matmul,
    check_outer_product,
    check_scaled_matmul,
    check_strided_copy,
    check_transpose,
)

__all__ = [
    "CheckResult",
    "check_fill_column_major",
    "check_matmul",
    "check_outer_product",
    "check_scaled_matmul",
    "check_strided_copy",
    "check_transpose",
]
