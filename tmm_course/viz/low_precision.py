"""Lesson 10's pictures: the grid of values each low-precision format holds, the rounding error
of a tile under one scale and under a scale per block, the error as an outlier grows, and the
stored GPU race."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from tmm_course.kernels.low_precision import OutlierErrors
from tmm_course.numerics import spacing
from tmm_course.viz.draw import new_figure


def grids_figure(formats: dict[str, torch.Tensor]) -> Figure:
    """Each format's positive values (every one it holds, given per format name) against the
    gap to the next, both on log scales: the relative gap is flat over the normal range (the
    unit roundoff) and grows where the subnormals thin out."""
    fig, (ax,) = new_figure(8.5, 3.6)
    for name, values in formats.items():
        grid, gaps = spacing(values)
        keep = grid > 0
        relative = (gaps[keep] / grid[keep]).numpy()
        ax.step(grid[keep].numpy(), relative, where="post", label=f"{name} ({len(values)} values)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("value (log scale)")
    ax.set_ylabel("gap to the next value / value")
    ax.set_title("What each format holds: every positive value, and how coarse the grid is there")
    ax.legend(fontsize=8, loc="upper right")
    return fig


def tile_error_figure(tile: torch.Tensor, rounded: dict[str, torch.Tensor]) -> Figure:
    """The relative rounding error of each cell of ``tile``, once per way of quantizing it
    (``rounded``: name -> the dequantized tile), on one colour scale."""
    fig = Figure(figsize=(9.0, 1.0 + 1.3 * len(rounded)), layout="constrained")
    axes = fig.subplots(len(rounded), 1, squeeze=False)[:, 0]
    errors = {name: ((r.double() - tile.double()).abs() / tile.double().abs()).cpu().numpy()
              for name, r in rounded.items()}  # fmt: skip
    top = max(float(np.nanmax(e)) for e in errors.values())
    for ax, (name, err) in zip(axes, errors.items(), strict=True):
        image = ax.imshow(err, cmap="magma", vmin=0, vmax=top, aspect="auto",
                          interpolation="nearest")  # fmt: skip
        ax.set_title(f"{name}: median {np.median(err):.1e}, largest {err.max():.1e}", fontsize=9)
        ax.set_ylabel("row")
    axes[-1].set_xlabel("column (K)")
    fig.colorbar(image, ax=list(axes), label="|rounded - x| / |x|")
    return fig


def outlier_figure(found: OutlierErrors, budget: float) -> Figure:
    """:func:`~tmm_course.kernels.low_precision.outlier_errors`: the error of the rows without
    the outlier, one scale per tensor against one per block, and the formats' budget."""
    fig, (ax,) = new_figure(7.5, 3.4)
    ax.plot(found.outliers, found.per_tensor, "o-", label="one scale per tensor")
    ax.plot(found.outliers, found.per_block, "s-", label="one scale per 1 x 128 block")
    ax.axhline(budget, color="grey", ls="--", label=f"budget 2u + u^2 = {budget:.3f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("outlier row / typical row (magnitude)")
    ax.set_ylabel("error of the other rows")
    ax.set_title("An outlier spends one scale's range; a scale per block contains it")
    ax.legend(fontsize=8)
    return fig


def race_figure(shapes: list[dict], where: str) -> Figure:
    """The stored race: each contender's speed relative to bf16 torch.matmul, per shape, with
    its error against float64 written on its bar."""
    names = list(shapes[0]["ratio_to_bf16"])
    fig, (ax,) = new_figure(9.5, 3.8)
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        ratios = [row["ratio_to_bf16"][name] for row in shapes]
        xs = np.arange(len(shapes)) + (i - (len(names) - 1) / 2) * width
        bars = ax.bar(xs, ratios, width, label=name)
        for bar, row in zip(bars, shapes, strict=True):
            err = row["error_vs_float64"][name]
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{bar.get_height():.2f}x"
                    f"\nerr {err:.0e}", ha="center", va="bottom", fontsize=7)  # fmt: skip
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(shapes)), [row["label"] for row in shapes], fontsize=8)
    ax.set_ylabel("speed / bf16 torch.matmul")
    ax.set_ylim(0, 1.3 * max(max(row["ratio_to_bf16"].values()) for row in shapes))
    ax.set_title(f"Stored race: {where}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    return fig
