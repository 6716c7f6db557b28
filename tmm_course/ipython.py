"""The running IPython shell, if any (Jupyter, Colab, the ipython console)."""

from __future__ import annotations

from typing import Any


def current_shell() -> Any | None:
    """The active InteractiveShell, or None in plain Python."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
