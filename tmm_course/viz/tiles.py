"""Lesson 1: who owns each cell of the output, drawn from the tile-fill kernels' own output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tmm_course.kernels import tile_fill
from tmm_course.viz.draw import grid_lines, label_cells, matrix_axes, new_figure


@dataclass(frozen=True)
class TileFill:
    """What the three lesson-1 kernels wrote for one launch configuration."""

    m: int
    n: int
    block_m: int
    block_n: int
    index: np.ndarray  # (m, n): i*n + j as stored by fill_index_kernel (-1: never stored)
    owner: np.ndarray  # (m, n): program number that stored the cell (-1: never stored)
    lanes: np.ndarray  # (grid_m*block_m, grid_n*block_n): 1 stored lane, 0 masked off

    @property
    def grid(self) -> tuple[int, int]:
        return tile_fill.grid_shape(self.m, self.n, self.block_m, self.block_n)

    @property
    def masked_lanes(self) -> int:
        return int((self.lanes == 0).sum())


def run_tile_fill(m: int, n: int, block_m: int, block_n: int) -> TileFill:
    """Launch the three kernels on the current backend and collect what they stored."""

    def host(t):
        return t.cpu().numpy()

    return TileFill(
        m,
        n,
        block_m,
        block_n,
        index=host(tile_fill.fill_index(m, n, block_m, block_n)),
        owner=host(tile_fill.fill_owner(m, n, block_m, block_n)),
        lanes=host(tile_fill.lane_mask(m, n, block_m, block_n)),
    )


def _owner_colours(count: int) -> ListedColormap:
    base = np.array(
        [
            "#4e79a7",
            "#f28e2b",
            "#59a14f",
            "#e15759",
            "#76b7b2",
            "#edc948",
            "#b07aa1",
            "#ff9da7",
            "#9c755f",
            "#86bcb6",
            "#d4a6c8",
            "#a0cbe8",
        ]
    )
    return ListedColormap(base[np.arange(count) % len(base)])


def ownership_figure(data: TileFill, labels: str = "index") -> Figure:
    """The padded lane grid of every program: cells coloured by owner, masked-off lanes hatched,
    tile borders, and the output's edge in red. ``labels``: "index", "owner" or "none"."""
    gm, gn = data.grid
    rows, cols = data.lanes.shape
    owner = np.full((rows, cols), np.nan)
    owner[: data.m, : data.n] = data.owner
    fig, (ax,) = new_figure(min(11, 2.5 + 0.32 * cols), min(9, 1.8 + 0.32 * rows))
    ax.imshow(
        owner, cmap=_owner_colours(gm * gn), vmin=-0.5, vmax=gm * gn - 0.5, interpolation="nearest"
    )
    masked_i, masked_j = np.nonzero(data.lanes == 0)
    for i, j in zip(masked_i, masked_j, strict=True):
        ax.add_patch(
            Rectangle(
                (j - 0.5, i - 0.5),
                1,
                1,
                facecolor="#eeeeee",
                hatch="///",
                edgecolor="#999999",
                linewidth=0,
            )
        )
    grid_lines(ax, rows, cols, data.block_m, data.block_n)
    ax.add_patch(
        Rectangle((-0.5, -0.5), data.n, data.m, fill=False, edgecolor="red", linewidth=2.5)
    )
    if labels != "none":
        values = data.index if labels == "index" else data.owner
        label_cells(ax, values, "{:d}")
    matrix_axes(
        ax,
        f"C is {data.m}x{data.n}; grid {gm}x{gn} programs of {data.block_m}x"
        f"{data.block_n}; {data.masked_lanes} lanes masked off (hatched)",
    )
    return fig
