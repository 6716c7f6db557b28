"""Lesson 2: a column plus a row makes a tile, drawn from the broadcast kernel's own output."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from tmm_course.kernels.broadcast import COLUMN, ROW, SUM, broadcast, element_offsets
from tmm_course.viz.draw import label_cells, new_figure


def broadcast_tiles(col: torch.Tensor, row: torch.Tensor) -> dict[str, np.ndarray]:
    """The three tiles the kernel builds: column stretched, row stretched, and their sum."""
    return {
        "col[:, None]": broadcast(col, row, COLUMN).cpu().numpy(),
        "row[None, :]": broadcast(col, row, ROW).cpu().numpy(),
        "col[:, None] + row[None, :]": broadcast(col, row, SUM).cpu().numpy(),
    }


def broadcast_figure(col: torch.Tensor, row: torch.Tensor) -> Figure:
    """Three panels, each a tile the kernel stored, with the input vectors on the margins."""
    tiles = broadcast_tiles(col, row)
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


def offsets_figure(m: int, n: int, stride_0: int, stride_1: int) -> Figure:
    """The tile of element offsets ``i*stride_0 + j*stride_1`` the kernel built."""
    offsets = element_offsets(m, n, stride_0, stride_1).cpu().numpy()
    fig, (ax,) = new_figure(1.5 + 0.5 * n, 1.2 + 0.45 * m)
    ax.imshow(offsets, cmap="cividis")
    label_cells(ax, offsets, "{:d}")
    ax.set_title(
        f"offs_m[:, None]*{stride_0} + offs_n[None, :]*{stride_1}", fontsize=10, family="monospace"
    )
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")
    return fig
