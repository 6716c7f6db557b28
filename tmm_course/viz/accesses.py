"""Where a learner's kernel read and wrote, drawn from the interpreter's record of every load
and store lane (:class:`~tmm_course.check.memory_guard.Trace`): each input's cells coloured by
the program that loaded them, the output's by the program that stored them, cells never
written hatched, and lanes that fell outside a view marked in red. A 1-D tensor is drawn in
rows, as text wraps (element ``i`` at row ``i // width``, column ``i % width``), so that a
thousand elements make cells one can see, not a strip a pixel high; a lane past its end is
marked where the element it reached would be, after the last one."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Polygon, Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from tmm_course.viz.draw import new_figure, program_colours


class Trace(Protocol):
    """What these pictures read from a record of loads and stores: the views by name, and
    every access (its ``kind``, ``tensor``, ``program`` and ``cells``)."""

    views: dict[str, Any]
    accesses: list[Any]


def row_width(n: int) -> int:
    """How many elements of a 1-D tensor of ``n`` one row of its picture holds: a power of two
    near the square root (at least 8), so that the picture is about square."""
    return max(8, 2 ** round(np.log2(max(n, 1)) / 2))


def access_maps(trace: Trace) -> dict[str, dict]:
    """Per view: its shape as drawn, which program touched each cell (-1: none; -2: past the
    end of a 1-D view's last row), the lanes outside it and whether it is the output (stores)
    or an input (loads). A 1-D view of ``n`` elements is drawn in rows of ``width``."""
    programs: dict[tuple[int, int, int], int] = {}
    names = list(trace.views)
    output = names[-1]
    maps = {}
    for name, view in trace.views.items():
        n = view.numel()
        width = row_width(n) if view.dim() == 1 else None
        shape = tuple(view.shape) if width is None else (max(-(-n // width), 1), width)
        kind = "store" if name == output else "load"
        owner = np.full(shape[0] * shape[1], -1)
        owner[n:] = -2
        strays: list[tuple[int, int]] = []
        lanes_outside = 0
        for access in trace.accesses:
            if access.tensor != name or access.kind != kind:
                continue
            program = programs.setdefault(access.program, len(programs))
            owner[access.cells] = program
            # a 1-D view's lanes come as (0, element): drawn where that element would wrap to
            strays += [divmod(c, width) for _, c in access.strays] if width else access.strays
            lanes_outside += access.stray_lanes
        maps[name] = {
            "shape": shape,
            "width": width,  # None: a 2-D view, drawn as it is
            "numel": n,
            "owner": owner.reshape(shape),
            "strays": strays,
            "outside": lanes_outside,
            "kind": kind,
        }
    for entry in maps.values():
        entry["programs"] = len(programs)
    return maps


def accesses_figure(trace: Trace, label: str = "") -> Figure:
    """One panel per tensor: the cells each program loaded (inputs) or stored (output)."""
    maps = access_maps(trace)
    count = max(next(iter(maps.values()))["programs"], 1) if maps else 1
    colours = program_colours(count)
    fig, axes = new_figure(3.6 * len(maps), 3.9, ncols=len(maps))
    for ax, (name, entry) in zip(axes, maps.items(), strict=True):
        rows, cols = entry["shape"]
        owner = np.ma.masked_less(entry["owner"], 0)
        ax.imshow(owner, cmap=colours, vmin=-0.5, vmax=count - 0.5, interpolation="nearest")
        last = entry["numel"] - (rows - 1) * cols  # cells of the last row (a 1-D view's)
        if last < cols:
            ax.add_patch(Rectangle((last - 0.5, rows - 1.5), cols - last, 1, fill=False,
                                   hatch="....", lw=0, ec="0.75"))  # fmt: skip
        ax.add_patch(_outline(rows, cols, last))
        if entry["kind"] == "store":
            for r, c in zip(*np.nonzero(entry["owner"] == -1), strict=True):
                ax.add_patch(
                    Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="////", lw=0, ec="0.5")
                )
        if entry["strays"]:
            ys, xs = zip(*entry["strays"], strict=True)
            ax.scatter(xs, ys, marker="x", s=18, color="red", lw=1.2, zorder=3)
        low_r = min([0, *(r for r, _ in entry["strays"])])
        low_c = min([0, *(c for _, c in entry["strays"])])
        high_r = max([rows - 1, *(r for r, _ in entry["strays"])])
        high_c = max([cols - 1, *(c for _, c in entry["strays"])])
        ax.set_xlim(low_c - 0.5, high_c + 0.5)
        ax.set_ylim(high_r + 0.5, low_r - 0.5)
        verb = "stored" if entry["kind"] == "store" else "loaded"
        size = f"{rows}x{cols}" if entry["width"] is None else f"{entry['numel']}, {cols} a row"
        title = f"{name} ({size}): cells {verb}"
        if entry["outside"]:
            marked = "red x, " if entry["strays"] else ""  # a 1-D view's lanes have no cell
            title += f"\n{entry['outside']} lane(s) outside {name} ({marked}not performed)"
        elif entry["kind"] == "store" and (entry["owner"] == -1).any():
            title += f"\n{int((entry['owner'] == -1).sum())} cell(s) never written (hatched)"
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))  # room for two digits
        ax.yaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
        if entry["width"] is not None:  # rows labelled by the index of their first element
            ax.set_yticks(range(0, rows, 2 ** int(np.ceil(np.log2(max(rows / 8, 1))))))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _, w=cols: f"{round(y) * w}"))
            ax.set_ylabel("row starts at", fontsize=7)
            ax.set_xlabel("+ column", fontsize=7)
    fig.suptitle(
        f"where the kernel read and wrote: {label}\ncolour = program ({count} in all)", fontsize=9
    )
    _key(fig, maps, axes[0].get_facecolor())
    return fig


def _outline(rows: int, cols: int, last: int) -> Polygon:
    """The frame of a view drawn ``rows`` x ``cols``, whose last row holds ``last`` cells (a
    1-D view's may be short: the frame steps in where it ends)."""
    last = min(max(last, 0), cols)
    x0, y0, x1, y1 = -0.5, -0.5, cols - 0.5, rows - 0.5
    corners = [(x0, y0), (x1, y0), (x1, y1 - 1), (last - 0.5, y1 - 1), (last - 0.5, y1), (x0, y1)]
    if last == cols or rows == 0:
        corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    return Polygon(corners, closed=True, fill=False, lw=1.5, ec="black")


def _key(fig: Figure, maps: dict[str, dict], blank: object) -> None:
    """What each mark that is not a program's colour means, for the marks drawn."""
    handles = []
    if any((m["owner"] == -2).any() for m in maps.values()):
        handles.append(Patch(facecolor=blank, edgecolor="0.75", hatch="....", lw=0,
                             label="past the end: no element"))  # fmt: skip
    if any((m["owner"] == -1).any() for m in maps.values() if m["kind"] == "load"):
        handles.append(Patch(facecolor=blank, edgecolor="black", lw=0.5, label="not loaded"))
    if any((m["owner"] == -1).any() for m in maps.values() if m["kind"] == "store"):
        handles.append(Patch(facecolor=blank, edgecolor="0.5", hatch="////", lw=0,
                             label="never written"))  # fmt: skip
    if any(m["strays"] for m in maps.values()):
        handles.append(Line2D([], [], ls="none", marker="x", color="red",
                              label="lane outside the tensor (not performed)"))  # fmt: skip
    if handles:
        fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncols=len(handles))
