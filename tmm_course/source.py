"""Show a kernel's real source in a notebook, so the text a learner reads is the code that runs;
and parse source text safely from several threads (the grader's)."""

from __future__ import annotations

import ast
import inspect
import textwrap
import threading
from typing import Any

_PARSING = threading.Lock()


def parse(text: str) -> ast.Module:
    """``ast.parse(text)``, one thread at a time: CPython 3.11 keeps an AST's construction
    depth in state its threads share, and two parses at once can raise ``SystemError: AST
    constructor recursion depth mismatch`` (python/cpython#106905)."""
    with _PARSING:
        return ast.parse(text)


def source_of(kernel: Any) -> str:
    """The source of a ``@triton.jit`` kernel (compiled or interpreted) or plain function."""
    fn = getattr(kernel, "fn", kernel)
    return textwrap.dedent(inspect.getsource(fn))


def show(kernel: Any) -> Any:
    """Syntax-highlighted source of ``kernel`` for Jupyter (plain text elsewhere)."""
    from IPython.display import Code

    return Code(source_of(kernel), language="python")


def _name(kernel: Any) -> str:
    return getattr(getattr(kernel, "fn", kernel), "__name__", "kernel")


def _comparable(kernel: Any) -> list[str]:
    """Source lines with the function renamed ``kernel`` and its signature re-indented, so
    that two kernels differ only where their code does."""
    lines = source_of(kernel).replace(f"def {_name(kernel)}(", "def kernel(", 1).splitlines()
    in_signature = False
    for i, line in enumerate(lines):
        if line.startswith("def kernel("):
            in_signature = True
        elif in_signature:
            lines[i] = " " * len("def kernel(") + line.strip()
        if in_signature and line.split("#")[0].rstrip().endswith(":"):
            in_signature = False
    return lines


def diff(reference: Any, variant: Any) -> str:
    """The lines where ``variant``'s source differs from ``reference``'s, as a unified diff."""
    import difflib

    lines = difflib.unified_diff(
        _comparable(reference),
        _comparable(variant),
        fromfile=_name(reference),
        tofile=_name(variant),
        lineterm="",
        n=1,
    )
    return "\n".join(lines)


def show_diff(reference: Any, variant: Any) -> Any:
    """:func:`diff`, highlighted for Jupyter."""
    from IPython.display import Code

    return Code(diff(reference, variant), language="diff")
