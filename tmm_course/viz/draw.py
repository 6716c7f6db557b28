"""Small drawing helpers shared by the lesson pictures."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

MAX_LABELLED_CELLS = 24 * 24


def new_figure(width: float, height: float, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    """A Figure that does not touch pyplot's global state, and its axes."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def label_cells(
    ax: Axes,
    values: np.ndarray,
    fmt: str = "{:g}",
    size: float | None = None,
    skip: np.ndarray | None = None,
) -> None:
    """Write each value in its cell (only on grids small enough to read)."""
    rows, cols = values.shape
    if rows * cols > MAX_LABELLED_CELLS:
        return
    size = size or max(5.0, min(10.0, 160 / max(rows, cols)))
    for i in range(rows):
        for j in range(cols):
            if skip is not None and skip[i, j]:
                continue
            ax.text(j, i, fmt.format(values[i, j]), ha="center", va="center", fontsize=size)


def grid_lines(ax: Axes, rows: int, cols: int, every_row: int, every_col: int, **style) -> None:
    """Lines between blocks of ``every_row`` x ``every_col`` cells."""
    style = {"color": "black", "linewidth": 1.5, **style}
    for r in range(0, rows + 1, every_row):
        ax.axhline(r - 0.5, **style)
    for c in range(0, cols + 1, every_col):
        ax.axvline(c - 0.5, **style)


def matrix_axes(ax: Axes, title: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")


def program_colours(count: int) -> ListedColormap:
    """``count`` distinct colours, one per program: tab20 up to 20, then evenly spaced hues
    (no colour repeats, however many programs)."""
    if count <= 20:
        return ListedColormap(colormaps["tab20"].colors[: max(count, 1)])
    return ListedColormap(colormaps["turbo"](np.linspace(0.05, 0.95, count)))
