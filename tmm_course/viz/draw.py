"""Small drawing helpers shared by the lesson pictures."""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

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
    """Write each value in its cell, in black or white, whichever reads better on the cell's
    colour. The font shrinks to fit the widest label in a cell; where even the smallest legible
    font does not fit (small cells, long numbers), no cell is labelled rather than overprinted."""
    rows, cols = values.shape
    if rows * cols > MAX_LABELLED_CELLS or rows * cols == 0:
        return
    texts = [[fmt.format(values[i, j]) for j in range(cols)] for i in range(rows)]
    widest = max(len(t) for line in texts for t in line)
    size = min(size or 10.0, fitting_font(ax, rows, cols, widest))
    if size < MIN_LABEL_POINTS:
        return
    background = _cell_colours(ax, rows, cols)
    for i in range(rows):
        for j in range(cols):
            if skip is not None and skip[i, j]:
                continue
            colour = "black" if background is None else ink(background[i, j])
            ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=size, color=colour)


MIN_LABEL_POINTS = 5.0


def fitting_font(ax: Axes, rows: int, cols: int, chars: int) -> float:
    """The largest font size (points) at which ``chars`` characters fit in one cell."""
    cell = cell_points(ax, rows, cols)
    return min(0.75 * cell / (0.62 * chars), 0.6 * cell)


def cell_points(ax: Axes, rows: int, cols: int) -> float:
    """The side of one cell in points (square cells, as ``imshow`` draws them), from the space
    the axes get in the figure; constrained layout takes some of it, hence the margin."""
    box = ax.get_position()
    fig = ax.figure  # a Figure or a SubFigure
    width = box.width * fig.bbox.width / fig.dpi * 72 * 0.8
    height = box.height * fig.bbox.height / fig.dpi * 72 * 0.8
    return min(width / cols, height / rows)


def _cell_colours(ax: Axes, rows: int, cols: int) -> np.ndarray | None:
    """The RGBA colour of each cell of the last image on ``ax`` (None if there is none, or it
    has fewer cells than the labels)."""
    images = [im for im in ax.get_images() if im.get_array() is not None]
    if not images:
        return None
    image = images[-1]
    data = np.ma.masked_invalid(np.asarray(image.get_array(), dtype=float))
    if data.ndim != 2 or data.shape[0] < rows or data.shape[1] < cols:
        return None
    return image.to_rgba(data[:rows, :cols])  # the labels cover the image's top-left corner


def ink(rgba: np.ndarray) -> str:
    """Black on light colours, white on dark ones (relative luminance, WCAG)."""
    if rgba[3] == 0:
        return "black"
    return "black" if relative_luminance(rgba[:3]) > 0.179 else "white"


def relative_luminance(rgb: np.ndarray) -> float:
    """WCAG 2 relative luminance of an sRGB colour (components 0..1)."""
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return float(linear @ np.array([0.2126, 0.7152, 0.0722]))


def contrast_ratio(first: np.ndarray, second: np.ndarray) -> float:
    """WCAG 2 contrast ratio of two sRGB colours: 1 (none) to 21 (black on white)."""
    light, dark = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def grid_lines(ax: Axes, rows: int, cols: int, every_row: int, every_col: int, **style) -> None:
    """Lines between blocks of ``every_row`` x ``every_col`` cells."""
    style = {"color": "black", "linewidth": 1.5, **style}
    for r in range(0, rows + 1, every_row):
        ax.axhline(r - 0.5, **style)
    for c in range(0, cols + 1, every_col):
        ax.axvline(c - 0.5, **style)


def matrix_axes(ax: Axes, title: str) -> None:
    ax.set_title(fitted_title(ax, title, 10), fontsize=10)
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")
    index_ticks(ax)


def fitted_title(ax: Axes, title: str, fontsize: float, share: float = 1.0) -> str:
    """``title`` broken into lines no wider than the figure (``share`` of it: one panel's)."""
    fig = ax.figure
    inches = fig.bbox.width / fig.dpi * share
    chars = max(12, int(inches * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) for line in title.split("\n"))


def index_ticks(ax: Axes) -> None:
    """Whole-number ticks only: the axes count rows and columns."""
    whole_number_ticks(ax.xaxis)
    whole_number_ticks(ax.yaxis)


def whole_number_ticks(axis: Axis) -> None:
    """Ticks only at whole numbers: the axis counts something (stages, waves, rows)."""
    axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def plain_log_ticks(axis: Axis, subs: tuple[float, ...] = (1.0, 2.0, 5.0)) -> None:
    """A log axis labelled with plain numbers (50, 100, 200, 500) at ``subs`` times the powers
    of ten (only 1 where the axis spans many decades), the other ticks unlabelled: never
    "6x10^2"."""
    axis.set_major_locator(LogLocator(subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.0f}" if value >= 1
                                           else f"{value:.3g}"))  # fmt: skip
    axis.set_minor_formatter(NullFormatter())


# Okabe and Ito's colour-blind safe qualitative palette without its vermillion and black: no
# tile is red (the edge of C is drawn in red) and none grey (grey means a cell nobody touched),
# and black or white text reads on all
PROGRAM_PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#CC79A7")


def program_colours(count: int, columns: int | None = None) -> ListedColormap:
    """One colour per program ``0 .. count-1`` from :data:`PROGRAM_PALETTE`. With more programs
    than colours, colours repeat; given the grid's ``columns``, programs that touch (left, right,
    above, below, diagonally) never share one."""
    k = len(PROGRAM_PALETTE)
    colours = []
    for program in range(max(count, 1)):
        if columns:
            pid_m, pid_n = divmod(program, columns)
            colours.append(PROGRAM_PALETTE[(pid_n + 2 * pid_m) % k])
        else:
            colours.append(PROGRAM_PALETTE[program % k])
    return ListedColormap(colours)
