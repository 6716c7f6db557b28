"""Plain-words explanations for errors that Triton reports cryptically."""

from __future__ import annotations

from typing import Any

from tmm_course.backend import INTERPRETER
from tmm_course.ipython import current_shell

_NO_DRIVER = "active drivers"


def explain(error: BaseException, backend: str) -> str | None:
    """A sentence or two for a learner about ``error``, or None if we have nothing to add."""
    text = str(error)
    if _NO_DRIVER in text and backend == INTERPRETER:
        return (
            "This kernel was compiled for a GPU, but this machine has none. Triton decides "
            "between the GPU and its CPU interpreter when `@triton.jit` runs, and this kernel "
            "was decorated before `import tmm_course` chose the interpreter. Fix: restart the "
            "kernel and run the cells from the top, so that `import tmm_course` comes before "
            "any `@triton.jit`."
        )
    if "outside of the scope of a kernel" in text and backend == INTERPRETER:
        return (
            "Triton was imported before `import tmm_course`, so its helpers (tl.zeros, ...) were "
            "set up for a GPU while your kernels run on the interpreter. Fix: restart the kernel "
            "and make `import tmm_course` the first import."
        )
    if "only 0-dimensional arrays can be converted" in text and backend == INTERPRETER:
        return (
            "This Triton interpreter does not work with numpy >= 2.4 when a loop bound is a "
            "runtime integer. Fix: pip install 'numpy<2.4' (or 'triton>=3.7') and restart."
        )
    return None


def install_ipython_hint(backend: str) -> bool:
    """Inside IPython/Jupyter, append :func:`explain`'s words to matching tracebacks."""
    shell = current_shell()
    if shell is None:
        return False

    def handler(self: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None):
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)
        hint = explain(value, backend)
        if hint:
            print(f"\ntmm_course: {hint}")

    shell.set_custom_exc((RuntimeError, TypeError), handler)
    return True
