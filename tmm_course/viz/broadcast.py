"""Lesson 2: a column plus a row makes a tile, drawn from what the broadcast kernel stored
(:func:`tmm_course.kernels.broadcast.broadcast_tiles`)."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from tmm_course.viz.draw import label_cells, new_figure


def broadcast_figure(tiles: dict[str, np.ndarray], col: torch.Tensor, row: torch.Tensor) -> Figure:
    """Three panels, each a tile the kernel stored (:func:`broadcast_tiles`), with the input
    vectors on the margins."""
    m, n = len(col), len(row)
    fig, axes = new_figure(3.2 * 3, 0.9 + 0.45 * m, ncols=3)
    vmax = float(max(np.abs(t).max() for t in tiles.values())) or 1.0
    for ax, (title, tile) in zip(axes, tiles.items(), strict=True):
        ax.imshow(tile, cmap="YlGnBu", vmin=-2 * vmax, vmax=2 * vmax)  # light: labels stay legible
        label_cells(ax, tile, "{:g}")
        ax.set_title(title, fontsize=10, family="monospace")
        ax.set_xticks(range(n), [f"{v:g}" for v in row.tolist()])
        ax.set_yticks(range(m), [f"{v:g}" for v in col.tolist()])
        ax.set_xlabel("row vector (BLOCK_N,)")
    axes[0].set_ylabel("column vector (BLOCK_M,)")
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
    return fig
