"""Lesson 1: who owns each cell of the output, drawn from what the tile-fill kernels stored
(:func:`tmm_course.kernels.tile_fill.run_tile_fill`), and what overlapping tiles leave behind
(:func:`tmm_course.kernels.tile_fill.overlapping_fill`)."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tmm_course.kernels.tile_fill import Overlap, TileFill
from tmm_course.viz.draw import (
    cell_points,
    grid_lines,
    label_cells,
    matrix_axes,
    new_figure,
    program_colours,
)


def ownership_figure(data: TileFill, labels: str = "index") -> Figure:
    """The padded lane grid of every program: cells coloured by owner, masked-off lanes hatched,
    tile borders, and the output's edge in red. ``labels``: "index", "owner" or "none"."""
    gm, gn = data.grid
    rows, cols = data.lanes.shape
    owner = np.full((rows, cols), np.nan)
    owner[: data.m, : data.n] = data.owner
    fig, (ax,) = new_figure(min(11, 2.5 + 0.32 * cols), min(9, 1.8 + 0.32 * rows))
    colours = program_colours(gm * gn, gn)
    ax.imshow(owner, cmap=colours, vmin=-0.5, vmax=gm * gn - 0.5, interpolation="nearest")
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
    _label_tiles(ax, gm, gn, data.block_m, data.block_n)
    return fig


def _label_tiles(ax, grid_m: int, grid_n: int, block_m: int, block_n: int) -> None:
    """pid_n along the top and pid_m down the right, at each tile's centre: tile (pid_m,
    pid_n) is where they cross. Where tiles are narrower than their labels, every few tiles."""
    cols, rows = grid_n * block_n, grid_m * block_m
    cell = cell_points(ax, rows, cols)
    across = max(1, math.ceil(len(f"pid_n={grid_n - 1}") * 0.62 * 7 / (0.8 * cell * block_n)))
    down = max(1, math.ceil(7 * 1.4 / (0.8 * cell * block_m)))
    top = ax.secondary_xaxis("top")
    top.set_xticks([pn * block_n + (block_n - 1) / 2 for pn in range(0, grid_n, across)],
                   [f"pid_n={pn}" for pn in range(0, grid_n, across)], fontsize=7)  # fmt: skip
    right = ax.secondary_yaxis("right")
    right.set_yticks([pm * block_m + (block_m - 1) / 2 for pm in range(0, grid_m, down)],
                     [f"pid_m={pm}" for pm in range(0, grid_m, down)], fontsize=7)  # fmt: skip


def overlap_figure(data: Overlap, where: str = "") -> Figure:
    """Left: how many programs stored to each cell. Right: whose store the cell kept."""
    fig, (left, right) = new_figure(9.0, 4.2, ncols=2)
    most = int(data.writers.max())
    image = left.imshow(data.writers, cmap="Blues", vmin=0, vmax=2 * max(most, 1))
    label_cells(left, data.writers, fmt="{:d}")
    fig.colorbar(image, ax=left, shrink=0.8, label="programs that stored here")
    matrix_axes(left, "stores per cell")
    programs = int(data.owner.max()) + 1
    right.imshow(data.owner, cmap=program_colours(programs), vmin=-0.5, vmax=programs - 0.5)
    label_cells(right, data.owner, fmt="{:d}")
    matrix_axes(right, "the program whose value the cell kept")
    if where:
        fig.suptitle(where, fontsize=9)
    return fig
