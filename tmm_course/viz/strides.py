"""Lesson 3: memory is a 1-D strip. Where does element (i, j) of a view live?

The storage holds 0, 1, 2, ... so a value *is* its address; the strided-copy kernel reads
the view through its strides, and what it returns is the address of every (i, j).
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tmm_course.kernels.strides import StridePicture
from tmm_course.viz.draw import label_cells


def strides_figure(pic: StridePicture, i: int, j: int) -> Figure:
    """The matrix with (i, j) marked beside the storage strip with its address marked."""
    m = pic.shape[0]
    address = int(pic.addresses[i, j])
    fig = Figure(figsize=(10, 2.4 + 0.35 * m), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[2.2 + 0.35 * m, 1.2])
    ax = top.subplots()
    ax.imshow(pic.addresses, cmap="Blues", vmin=0, vmax=pic.storage_size)
    label_cells(ax, pic.addresses, "{:d}")
    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=3))
    ax.set_title(
        f"{pic.name}: shape {pic.shape}, stride {pic.strides}, offset {pic.offset}; "
        f"({i}, {j}) -> {pic.offset} + {i}*{pic.strides[0]} + {j}*{pic.strides[1]} "
        f"= {address}",
        fontsize=10,
    )
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")
    strip_ax = bottom.subplots()
    used = np.zeros(pic.storage_size)
    used[pic.addresses.ravel()] = 1
    strip_ax.imshow(used[None, :], cmap="Blues", vmin=0, vmax=2.5, aspect="auto")
    strip_ax.add_patch(
        Rectangle((address - 0.5, -0.5), 1, 1, fill=False, edgecolor="red", linewidth=3)
    )
    if pic.storage_size <= 96:  # number each used cell by the (i, j) that lives there
        for (row, col), where in np.ndenumerate(pic.addresses):
            strip_ax.text(int(where), 0, f"{row},{col}", rotation=90, fontsize=7,
                          ha="center", va="center")  # fmt: skip
    strip_ax.set_yticks([])
    strip_ax.set_xlabel("address in the 1-D storage (shaded: used by this view; i,j: the "
                        "element there)")  # fmt: skip
    if pic.storage_size <= 64:
        strip_ax.set_xticks(range(pic.storage_size))
        strip_ax.tick_params(labelsize=7)
    return fig
