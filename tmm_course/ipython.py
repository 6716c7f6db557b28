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


def show_figures_inline() -> bool:
    """In IPython/Jupyter, display a returned matplotlib Figure as a PNG image (our figures are
    built without pyplot, so its inline backend never registers them). False outside IPython."""
    shell = current_shell()
    if shell is None:
        return False
    from IPython.core.pylabtools import select_figure_formats

    select_figure_formats(shell, {"png"}, bbox_inches="tight")
    return True
