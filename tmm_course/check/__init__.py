"""The exercise checks (:mod:`~tmm_course.check.exercises`; each exercise itself is defined in
:mod:`tmm_course.exercises`), the engine that runs and judges them
(:mod:`~tmm_course.check.engine`), the one judge that decides each case and the verdict for
the check, the grader and nbgrader alike (:mod:`~tmm_course.check.verdict`), what a check says
(:mod:`~tmm_course.check.result`), the
memory it hands out (:mod:`~tmm_course.check.buffers`), the kernels a launcher started
(:mod:`~tmm_course.check.launches`), those launches as plain data and their replay on inputs the
check owns, the verdict (:mod:`~tmm_course.check.record`) and, on the interpreter, the memory
guard that judges every load and store per view (:mod:`~tmm_course.check.memory_guard`; on a
GPU each case is replayed through it, :mod:`~tmm_course.check.replay`), whether the learner's
kernel did the work (:mod:`~tmm_course.check.work`), a time limit per case
(:mod:`~tmm_course.check.time_limit`) and what a GPU's compiler makes of every learner kernel
(:mod:`~tmm_course.check.gpu_rules`).

What compiled kernels must show (lesson 7's descriptor loads, lessons 6 and 8's figures on a
problem too large to run) is judged by :mod:`~tmm_course.check.compiled`; lesson 4's exercise, a
linear layer, lesson 6's predict_knob (a knob's figures), lesson 10's block-scaled
float8 matmul and lesson 9's "find the bug" have modules of their own
(:mod:`~tmm_course.check.linear`, :mod:`~tmm_course.check.prediction`,
:mod:`~tmm_course.check.low_precision`, :mod:`~tmm_course.check.fixes`).
``from tmm_course.check import check_matmul`` is what a lesson imports."""

from tmm_course.check.exercises import (
    check_column_order_fill,
    check_descriptor_matmul,
    check_faster,
    check_five_gpus,
    check_flip_rows,
    check_grouped_tile,
    check_matmul,
    check_outer_product,
    check_scaled_matmul,
    check_split_k,
    check_transpose,
    check_vector_add,
)
from tmm_course.check.fixes import check_fix
from tmm_course.check.linear import check_linear_relu
from tmm_course.check.low_precision import check_fp8_matmul
from tmm_course.check.prediction import check_predict_knob
from tmm_course.check.result import CheckResult

__all__ = [
    "CheckResult",
    "check_column_order_fill",
    "check_descriptor_matmul",
    "check_faster",
    "check_five_gpus",
    "check_fix",
    "check_flip_rows",
    "check_fp8_matmul",
    "check_grouped_tile",
    "check_linear_relu",
    "check_matmul",
    "check_outer_product",
    "check_predict_knob",
    "check_scaled_matmul",
    "check_split_k",
    "check_transpose",
    "check_vector_add",
]
