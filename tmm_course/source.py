"""Show a kernel's real source in a notebook, so the text a learner reads is the code that runs."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any


def source_of(kernel: Any) -> str:
    """The source of a ``@triton.jit`` kernel (compiled or interpreted) or plain function."""
    fn = getattr(kernel, "fn", kernel)
    return textwrap.dedent(inspect.getsource(fn))


def show(kernel: Any) -> Any:
    """Syntax-highlighted source of ``kernel`` for Jupyter (plain text elsewhere)."""
    from IPython.display import Code

    return Code(source_of(kernel), language="python")
