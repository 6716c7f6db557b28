"""The course's Triton kernels, one module per lesson, each with a launcher that checks its
input. Import ``tmm_course`` first: it chooses the backend before these are decorated.

The launchers learners call most are importable from here: ``vector_add`` (lesson 0) and
``matmul`` (lesson 4). The capstone's ``matmul_fast`` lives in its own wing,
:mod:`tmm_course.capstone`."""

import tmm_course  # noqa: F401  (backend first)
from tmm_course.kernels.matmul import matmul
from tmm_course.kernels.vector_add import vector_add

__all__ = ["matmul", "vector_add"]
