"""Lesson 4: the K-loop frame by frame, drawn from the snapshots matmul_kloop_kernel stored."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tmm_course.kernels.matmul import KLoopFrames
from tmm_course.viz.draw import new_figure


def _host(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _hot(ax: Axes, row0: int, col0: int, rows: int, cols: int, colour: str = "red") -> None:
    ax.add_patch(
        Rectangle((col0 - 0.5, row0 - 0.5), cols, rows, fill=False, edgecolor=colour, linewidth=2.5)
    )


def _slab_bounds(frames: KLoopFrames, step: int, k: int) -> tuple[int, int]:
    block_k = frames.blocks[2]
    start = step * block_k
    return start, max(0, min(block_k, k - start))


def _operand(
    ax: Axes, values: np.ndarray, slab: np.ndarray, row0: int, col0: int, title: str
) -> None:
    """The operand dimmed, with the slab the kernel loaded painted in at its place."""
    style = {"cmap": "coolwarm", "vmin": -3, "vmax": 3, "interpolation": "nearest"}
    ax.imshow(values, alpha=0.25, **style)
    painted = np.full(values.shape, np.nan)
    rows = min(slab.shape[0], values.shape[0] - row0)
    cols = min(slab.shape[1], values.shape[1] - col0)
    painted[row0 : row0 + rows, col0 : col0 + cols] = slab[:rows, :cols]
    ax.imshow(painted, **style)
    _hot(ax, row0, col0, rows, cols)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def draw_frame(
    axes: list[Axes], a: torch.Tensor, b: torch.Tensor, frames: KLoopFrames, step: int, limit: float
) -> None:
    """Four panels for one step: the A and B slabs the kernel loaded (painted into the dimmed
    operands), the product it added, and its accumulator afterwards."""
    bm, bn, _ = frames.blocks
    pid_m, pid_n = frames.tile
    start, width = _slab_bounds(frames, step, a.shape[1])
    last = start + width - 1
    _operand(
        axes[0],
        _host(a),
        _host(frames.a_slabs[step]),
        pid_m * bm,
        start,
        f"A: rows {pid_m * bm}.., K {start}..{last}",
    )
    _operand(
        axes[1],
        _host(b),
        _host(frames.b_slabs[step]),
        start,
        pid_n * bn,
        f"B: K {start}..{last}, cols {pid_n * bn}..",
    )
    acc = _host(frames.acc)
    before = acc[step - 1] if step else np.zeros_like(acc[0])
    for ax, values, title in (
        (axes[2], acc[step] - before, f"step {step}: a_slab @ b_slab"),
        (axes[3], acc[step], f"acc after step {step}"),
    ):
        ax.imshow(values, cmap="PiYG", vmin=-limit, vmax=limit, interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])


def _limit(frames: KLoopFrames) -> float:
    return float(frames.acc.abs().max().clamp_min(1e-6))


def frame_figure(a: torch.Tensor, b: torch.Tensor, frames: KLoopFrames, step: int) -> Figure:
    """One frame of the K-loop (for the player widget)."""
    fig, axes = new_figure(12, 3.4, ncols=4)
    draw_frame(axes, a, b, frames, step, _limit(frames))
    fig.suptitle(f"program {frames.tile}, K step {step + 1} of {frames.steps}", fontsize=10)
    return fig


def frames_figure(a: torch.Tensor, b: torch.Tensor, frames: KLoopFrames) -> Figure:
    """Every frame as a row of small multiples, for readers without a live kernel."""
    fig = Figure(figsize=(12, 2.6 * frames.steps), layout="constrained")
    axes = fig.subplots(frames.steps, 4, squeeze=False)
    limit = _limit(frames)
    for step in range(frames.steps):
        draw_frame(list(axes[step]), a, b, frames, step, limit)
    fig.suptitle(
        f"The K-loop of program {frames.tile}: red boxes are the slabs loaded at each step",
        fontsize=11,
    )
    return fig
