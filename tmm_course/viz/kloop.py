"""Lesson 4: the K-loop frame by frame, drawn from the snapshots matmul_kloop_kernel stored."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
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


OPERANDS = {"cmap": "coolwarm", "vmin": -3, "vmax": 3}
SUMS = {"cmap": "PiYG"}


def _operand(
    ax: Axes, values: np.ndarray, slab: np.ndarray, row0: int, col0: int, title: str
) -> None:
    """The operand dimmed, with the slab the kernel loaded painted in at its place; the slab's
    lanes past the matrix's edge (loaded as zeros by the mask) hatched beyond it."""
    style = {**OPERANDS, "interpolation": "nearest"}
    ax.imshow(values, alpha=0.25, **style)
    painted = np.full(values.shape, np.nan)
    rows = min(slab.shape[0], values.shape[0] - row0)
    cols = min(slab.shape[1], values.shape[1] - col0)
    painted[row0 : row0 + rows, col0 : col0 + cols] = slab[:rows, :cols]
    ax.imshow(painted, **style)
    _hot(ax, row0, col0, rows, cols)
    past_rows, past_cols = slab.shape[0] - rows, slab.shape[1] - cols
    if past_cols > 0 and rows > 0:  # A's slab overhangs K on the right
        ax.add_patch(Rectangle((col0 + cols - 0.5, row0 - 0.5), past_cols, rows, hatch="///",
                               fill=False, edgecolor="grey", linewidth=0.5))  # fmt: skip
        ax.set_xlim(-0.5, values.shape[1] - 0.5 + past_cols)
    if past_rows > 0 and cols > 0:  # B's slab overhangs K at the bottom
        ax.add_patch(Rectangle((col0 - 0.5, row0 + rows - 0.5), cols, past_rows, hatch="///",
                               fill=False, edgecolor="grey", linewidth=0.5))  # fmt: skip
        ax.set_ylim(values.shape[0] - 0.5 + past_rows, -0.5)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def draw_frame(
    axes: list[Axes], a: torch.Tensor, b: torch.Tensor, frames: KLoopFrames, step: int, limit: float
) -> None:
    """Five panels for one step: the A and B slabs the kernel loaded (painted into the dimmed
    operands; hatched: lanes past K, loaded as zeros), the product it added, its accumulator
    afterwards (in registers, not in C), and C, which stays empty until the store after the last
    step writes the tile."""
    bm, bn, _ = frames.blocks
    pid_m, pid_n = frames.tile
    m, n = a.shape[0], b.shape[1]
    start, width = _slab_bounds(frames, step, a.shape[1])
    last = start + width - 1
    rows, cols = min(bm, m - pid_m * bm), min(bn, n - pid_n * bn)
    row_span = f"{pid_m * bm}-{pid_m * bm + rows - 1}"
    col_span = f"{pid_n * bn}-{pid_n * bn + cols - 1}"
    _operand(axes[0], _host(a), _host(frames.a_slabs[step]), pid_m * bm, start,
             f"A: rows {row_span},\nK {start}-{last}")  # fmt: skip
    _operand(axes[1], _host(b), _host(frames.b_slabs[step]), start, pid_n * bn,
             f"B: K {start}-{last},\ncolumns {col_span}")  # fmt: skip
    acc = _host(frames.acc)
    before = acc[step - 1] if step else np.zeros_like(acc[0])
    for ax, values, title in (
        (axes[2], acc[step] - before, f"step {step}:\na_slab @ b_slab"),
        (axes[3], acc[step], f"acc after step {step}\n(registers)"),
    ):
        ax.imshow(values, **SUMS, vmin=-limit, vmax=limit, interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    stored = step == frames.steps - 1
    c = np.full((m, n), np.nan)
    if stored:  # the one store, after the loop: the final acc lands in C
        c[pid_m * bm : pid_m * bm + rows, pid_n * bn : pid_n * bn + cols] = acc[step][:rows, :cols]
    axes[4].imshow(np.zeros((m, n)), cmap="Greys", vmin=0, vmax=1)
    axes[4].imshow(c, **SUMS, vmin=-limit, vmax=limit, interpolation="nearest")
    _hot(axes[4], pid_m * bm, pid_n * bn, rows, cols, colour="red" if stored else "grey")
    title = (f"C: tile {frames.tile} stored\nafter the last step" if stored
             else f"C: tile {frames.tile} still empty\n(stored after the last step)")  # fmt: skip
    axes[4].set_title(title, fontsize=9)
    axes[4].set_xticks([])
    axes[4].set_yticks([])


def _colour_bars(fig: Figure, operands: list[Axes], sums: list[Axes], limit: float) -> None:
    """One colour bar for the operands' values, one for the sums (product, acc, C)."""
    bars = (
        (operands, Normalize(OPERANDS["vmin"], OPERANDS["vmax"]), OPERANDS["cmap"], "A, B"),
        (sums, Normalize(-limit, limit), SUMS["cmap"], "product, acc, C"),
    )
    for axes, norm, cmap, label in bars:
        fig.colorbar(ScalarMappable(norm, cmap), ax=axes, shrink=0.8, label=label)


def _limit(frames: KLoopFrames) -> float:
    return float(frames.acc.abs().max().clamp_min(1e-6))


def frame_figure(a: torch.Tensor, b: torch.Tensor, frames: KLoopFrames, step: int) -> Figure:
    """One frame of the K-loop (for the player widget)."""
    fig, axes = new_figure(15, 3.4, ncols=5)
    draw_frame(axes, a, b, frames, step, _limit(frames))
    _colour_bars(fig, axes[:2], axes[2:], _limit(frames))
    fig.suptitle(f"program {frames.tile}, K step {step + 1} of {frames.steps}", fontsize=10)
    return fig


def frames_figure(a: torch.Tensor, b: torch.Tensor, frames: KLoopFrames) -> Figure:
    """Every frame as a row of small multiples, for readers without a live kernel."""
    fig = Figure(figsize=(15, 2.6 * frames.steps), layout="constrained")
    axes = fig.subplots(frames.steps, 5, squeeze=False)
    limit = _limit(frames)
    for step in range(frames.steps):
        draw_frame(list(axes[step]), a, b, frames, step, limit)
    _colour_bars(fig, list(axes[:, :2].ravel()), list(axes[:, 2:].ravel()), limit)
    fig.suptitle(
        f"The K-loop of program {frames.tile}: red boxes are the slabs loaded at each step",
        fontsize=11,
    )
    return fig
