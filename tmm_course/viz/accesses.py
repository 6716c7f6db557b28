"""Where a learner's kernel read and wrote, drawn from the interpreter's record of every load
and store lane (:class:`~tmm_course.check.memory_guard.Trace`): each input's cells coloured by
the program that loaded them, the output's by the program that stored them, cells never
written hatched, and lanes that fell outside a view marked in red."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from tmm_course.viz.draw import new_figure, program_colours


class Trace(Protocol):
    """What these pictures read from a record of loads and stores: the views by name, and
    every access (its ``kind``, ``tensor``, ``program`` and ``cells``)."""

    views: dict[str, Any]
    accesses: list[Any]


def access_maps(trace: Trace) -> dict[str, dict]:
    """Per view: its shape, which program touched each cell (-1: none), the lanes outside it
    and whether it is the output (stores) or an input (loads)."""
    programs: dict[tuple[int, int, int], int] = {}
    names = list(trace.views)
    output = names[-1]
    maps = {}
    for name, view in trace.views.items():
        shape = tuple(view.shape) if view.dim() == 2 else (1, view.numel())
        kind = "store" if name == output else "load"
        owner = np.full(shape[0] * shape[1], -1)
        strays: list[tuple[int, int]] = []
        lanes_outside = 0
        for access in trace.accesses:
            if access.tensor != name or access.kind != kind:
                continue
            program = programs.setdefault(access.program, len(programs))
            owner[access.cells] = program
            strays += access.strays
            lanes_outside += access.stray_lanes
        maps[name] = {
            "shape": shape,
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
        ax.add_patch(Rectangle((-0.5, -0.5), cols, rows, fill=False, lw=1.5, ec="black"))
        if entry["kind"] == "store":
            for r, c in zip(*np.nonzero(entry["owner"] < 0), strict=True):
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
        title = f"{name} ({rows}x{cols}): cells {verb}"
        if entry["outside"]:
            title += f"\n{entry['outside']} lane(s) outside {name} (red x, not performed)"
        elif entry["kind"] == "store" and (entry["owner"] < 0).any():
            title += f"\n{int((entry['owner'] < 0).sum())} cell(s) never written (hatched)"
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))  # room for two digits
        ax.yaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
    fig.suptitle(
        f"where the kernel read and wrote: {label}\ncolour = program ({count} in all)", fontsize=9
    )
    _key(fig, maps, axes[0].get_facecolor())
    return fig


def _key(fig: Figure, maps: dict[str, dict], blank: object) -> None:
    """What each mark that is not a program's colour means, for the marks drawn."""
    handles = []
    if any((m["owner"] < 0).any() for m in maps.values() if m["kind"] == "load"):
        handles.append(Patch(facecolor=blank, edgecolor="black", lw=0.5, label="not loaded"))
    if any((m["owner"] < 0).any() for m in maps.values() if m["kind"] == "store"):
        handles.append(Patch(facecolor=blank, edgecolor="0.5", hatch="////", lw=0,
                             label="never written"))  # fmt: skip
    if any(m["strays"] for m in maps.values()):
        handles.append(Line2D([], [], ls="none", marker="x", color="red",
                              label="lane outside the tensor (not performed)"))  # fmt: skip
    if handles:
        fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncols=len(handles))
