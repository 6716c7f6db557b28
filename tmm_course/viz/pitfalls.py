"""Lesson 9: the error of a float16 against a float32 accumulator as K grows."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

from tmm_course.viz.draw import new_figure, plain_log_ticks


def accumulator_figure(curve: dict[str, list[float]], where: str) -> Figure:
    """rms error against float64 per K, one line per accumulator (from accumulator_error_curve)."""
    fig, (ax,) = new_figure(6.5, 3.6)
    for name, marker in (("float32 accumulator", "o"), ("float16 accumulator", "s")):
        ax.plot(curve["K"], curve[name], marker=marker, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(curve["K"]))  # each K measured, in plain numbers
    ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
    ax.xaxis.set_minor_locator(NullLocator())
    plain_log_ticks(ax.yaxis)
    ax.set_xlabel("K (length of every dot product)")
    ax.set_ylabel("rms error / rms of exact C")
    ax.set_title(f"float16 inputs and output, measured on {where}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig
