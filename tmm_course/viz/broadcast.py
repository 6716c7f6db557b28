"""Lesson 2: a column plus a row makes a tile, drawn from what the broadcast kernel stored
(:func:`tmm_course.kernels.broadcast.broadcast_tiles`)."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from tmm_course.viz.draw import index_ticks, label_cells, new_figure


def broadcast_figure(tiles: dict[str, np.ndarray], col: torch.Tensor, row: torch.Tensor) -> Figure:
    """Three panels, each a tile the kernel stored (:func:`broadcast_tiles`), with the input
    column drawn as cells on its left and the input row as cells above it."""
    m, n = len(col), len(row)
    fig, axes = new_figure(3.6 * 3, 1.6 + 0.45 * m, ncols=3)
    vmax = float(max(np.abs(t).max() for t in tiles.values())) or 1.0
    style = {"cmap": "YlGnBu", "vmin": -2 * vmax, "vmax": 2 * vmax}  # light: labels stay legible
    column, line = col.cpu().numpy()[:, None], row.cpu().numpy()[None, :]
    for ax, (title, tile) in zip(axes, tiles.items(), strict=True):
        ax.imshow(tile, **style)
        label_cells(ax, tile, "{:g}")
        ax.set_xticks([])
        ax.set_yticks([])
        left = ax.inset_axes([-1.3 / n, 0, 1 / n, 1])  # one cell wide, as tall as the tile
        left.imshow(column, **style, aspect="auto")
        label_cells(left, column, "{:g}")
        left.set_xticks([])
        left.set_yticks([])
        left.set_ylabel("column (BLOCK_M,)", fontsize=8)
        top = ax.inset_axes([0, 1 + 0.3 / m, 1, 1 / m])  # one cell tall, as wide as the tile
        top.imshow(line, **style, aspect="auto")
        label_cells(top, line, "{:g}")
        top.set_xticks([])
        top.set_yticks([])
        top.set_title(f"{title}\nrow (BLOCK_N,) above", fontsize=9, family="monospace")
    return fig


def offsets_figure(offsets: torch.Tensor, stride_0: int, stride_1: int) -> Figure:
    """The tile of element offsets ``i*stride_0 + j*stride_1`` the kernel built
    (:func:`element_offsets`)."""
    offsets = offsets.cpu().numpy()
    m, n = offsets.shape
    fig, (ax,) = new_figure(1.5 + 0.5 * n, 1.2 + 0.45 * m)
    ax.imshow(offsets, cmap="cividis")
    label_cells(ax, offsets, "{:d}")
    ax.set_title(
        f"offs_m[:, None]*{stride_0} + offs_n[None, :]*{stride_1}", fontsize=10, family="monospace"
    )
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")
    index_ticks(ax)
    return fig
