"""The course's Triton kernels, one module per lesson, each with a launcher that checks its
input. Import ``tmm_course`` first: it chooses the backend before these are decorated."""

import tmm_course  # noqa: F401  (backend first)
from tmm_course.kernels.vector_add import vector_add

__all__ = ["vector_add"]
