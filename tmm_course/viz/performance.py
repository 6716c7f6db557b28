"""Lesson 6 pictures: launch order, and benchmark results as ratios to torch (the roofline is
:func:`tmm_course.viz.making_fast.roofline_figure`)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

from tmm_course.perf import results
from tmm_course.perf.results import Race, SweepRow
from tmm_course.viz.draw import (
    fitted_title,
    fitting_font,
    index_ticks,
    ink,
    new_figure,
    plain_log_ticks,
)

# Okabe-Ito blue and vermillion: told apart with any colour vision (and by hatch or marker)
BLUE, VERMILLION = "#0072B2", "#D55E00"
FLIGHT = "#F0E442"  # Okabe-Ito yellow
FITTED_STYLE = {"color": BLUE, "marker": "o", "label": "fitted on"}
HELD_OUT_STYLE = {"color": VERMILLION, "marker": "^", "label": "held out"}
RATIO_TICKS = (0.25, 0.5, 0.7, 0.85, 1, 1.5, 2, 3, 4, 6)


def launch_order_figure(
    orders: dict[str, np.ndarray], in_flight: int, fetched: dict[str, tuple[int, int]]
) -> Figure:
    """Each order as a grid of program ids; the first ``in_flight`` programs (one wave) are
    outlined, and the title counts the A and B tiles fetched over all waves."""
    fig, axes = new_figure(4.2 * len(orders), 4.4, ncols=len(orders))
    for ax, (name, order) in zip(axes, orders.items(), strict=True):
        image = ax.imshow(order, cmap="cividis")
        colours = image.to_rgba(np.asarray(order, dtype=float))
        size = min(7.0, fitting_font(ax, *order.shape, len(str(order.max()))))
        for (i, j), pid in np.ndenumerate(order):
            first_wave = pid < in_flight
            if first_wave:  # outlined, not only coloured: yellow on a black rim reads on any cell
                for edge, width in (("black", 3.0), (FLIGHT, 1.5)):
                    ax.add_patch(Rectangle((j - 0.42, i - 0.42), 0.84, 0.84, fill=False,
                                           edgecolor=edge, linewidth=width))  # fmt: skip
            weight = "bold" if first_wave else "normal"
            ax.text(j, i, str(pid), ha="center", va="center", fontsize=size,
                    color=ink(colours[i, j]), fontweight=weight)  # fmt: skip
        a_tiles, b_tiles = fetched[name]
        ax.set_title(f"{name}\nA tiles fetched {a_tiles}, B tiles {b_tiles}", fontsize=9)
        ax.set_xlabel("pid_n")
        ax.set_ylabel("pid_m")
        index_ticks(ax)
    fig.suptitle(f"program ids; outlined in yellow, bold: the first {in_flight} programs in flight",
                 fontsize=10)  # fmt: skip
    return fig


def ratio_figure(
    ratios: dict[str, float], where: str, goals: dict[str, float] | None = None, title: str = ""
) -> Figure:
    """Horizontal bars: each contender's speed as torch.matmul time / its time (1 = parity)."""
    names = list(ratios)
    fig, (ax,) = new_figure(6.4, 0.42 * len(names) + 1.2)
    values = [ratios[n] for n in names]
    goals = goals or {}
    met = [ratios[n] >= goals.get(n, 1.0) for n in names]
    colors = [BLUE if ok else VERMILLION for ok in met]
    cap = _scale_end(values)
    ax.barh(names, [min(v, cap) for v in values], color=colors,
            hatch=["" if ok else "//" for ok in met])  # fmt: skip
    for y, (n, v) in enumerate(zip(names, values, strict=True)):
        beyond = " (off the scale)" if v > cap else ""
        ax.text(_label_at(min(v, cap), goals.get(n)), y, f" {v:.3f}{beyond}", va="center",
                fontsize=8)  # fmt: skip
    for y, n in enumerate(names):
        if n in goals:
            ax.plot([goals[n]] * 2, [y - 0.4, y + 0.4], color="black", lw=2)
    ax.axvline(1.0, color="grey", ls=":")
    ax.invert_yaxis()
    handles = [
        Patch(color=BLUE, label="meets its goal" if goals else "at least parity"),
        Patch(facecolor=VERMILLION, hatch="//",
              label="below its goal" if goals else "below parity"),
        *([Line2D([], [], color="black", lw=2, label="goal")] if goals else []),
    ]  # fmt: skip
    _legend_below(fig, handles)
    _room_for_values(ax, [min(v, cap) for v in [*values, *goals.values()]], room=1.35)
    ax.set_xlabel("speed relative to torch.matmul (torch time / our time)")
    text = f"{title}\nmeasured on {where}" if title else f"measured on {where}"
    fig.suptitle(fitted_title(ax, text, 9), fontsize=9)  # over the figure: long bar names
    return fig


def _legend_below(fig: Figure, handles: list) -> None:
    """The legend under the axes, where it covers no bar and no value."""
    fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncols=len(handles))


def _room_for_values(ax, values: list[float], room: float = 1.18) -> None:
    """Space right of the longest bar for its value label."""
    ax.set_xlim(0, max(values) * room)


def _scale_end(values: list[float], most: float = 2.0) -> float:
    """Where a ratio axis ends: past ``most`` (cuBLAS slow on odd sizes) bars are cut there and
    say so, rather than squash every other bar against parity."""
    return max([1.0, *(v for v in values if v <= most)]) * 1.1


def _label_at(value: float, goal: float | None) -> float:
    """A bar's value is written right of the bar, and of the parity line and goal mark on its
    row, so that no line runs through it."""
    return max(value, 1.0, goal or 0.0) + 0.01


def sweep_figure(row: SweepRow, where: str, top: int = 14) -> Figure:
    """The ``top`` configurations tried for one problem, fastest first, as speed relative to
    torch.matmul (both timed the same way); failed ones are listed in the title's count."""
    timed = sorted((t for t in row.trials if t.ms), key=lambda t: t.ms)
    failed = len(row.trials) - len(timed)
    timed = timed[:top]
    fig, (ax,) = new_figure(6.4, 0.3 * len(timed) + 1.4)
    colors = {"persistent_tma": BLUE, "grouped": VERMILLION}
    hatches = {"persistent_tma": "", "grouped": "//"}
    labels = [f"{t.kernel} {t.config}" for t in timed]
    values = [row.torch_ms / t.ms for t in timed]
    ax.barh(labels, values, color=[colors.get(t.kernel, "grey") for t in timed],
            hatch=[hatches.get(t.kernel, "") for t in timed])  # fmt: skip
    kernels = dict.fromkeys(t.kernel for t in timed)
    _legend_below(fig, [Patch(facecolor=colors.get(k, "grey"), hatch=hatches.get(k, ""), label=k)
                        for k in kernels])  # fmt: skip
    _room_for_values(ax, values)
    for y, v in enumerate(values):
        ax.text(_label_at(v, None), y, f" {v:.2f}", va="center", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.axvline(1.0, color="grey", ls=":")
    ax.invert_yaxis()
    ax.set_xlabel("torch.matmul time / kernel time")
    text = (f"{row.problem.label}: the fastest of {len(row.trials)} configurations tried "
            f"({failed} failed)\ndevice time, {where}")  # fmt: skip
    fig.suptitle(fitted_title(ax, text, 9), fontsize=9)  # over the figure: long bar names
    return fig


def host_time_figure(host_us: dict[str, float], where: str) -> Figure:
    """Microseconds of Python work per call, before the GPU sees anything."""
    names = list(host_us)
    fig, (ax,) = new_figure(6.4, 0.38 * len(names) + 1.2)
    ax.barh(names, [host_us[n] for n in names], color="tab:purple")
    for y, n in enumerate(names):
        ax.text(host_us[n], y, f" {host_us[n]:.0f} us", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("host microseconds per call")
    ax.set_title(f"where a call's host time goes\n{where}", fontsize=9)
    return fig


def grid_figure(
    rows: list[Race], fitted: set[str] | frozenset[str], where: str, floor: float = 0.85
) -> Figure:
    """matmul_fast / torch.matmul per problem, one panel per dtype, problems ordered by their
    FLOPs (log scale); the problems the plan was fitted on apart from those held out."""
    kinds = sorted({r.problem.kind for r in rows}, key=lambda k: (k.startswith("float32"), k))
    fig, axes = new_figure(4.2 * len(kinds), 3.6, ncols=len(kinds))
    for ax in axes[1:]:
        ax.sharey(axes[0])
    ratios = [r.ratio_to_torch["matmul_fast"] for r in rows]
    high = _scale_end(ratios)  # above: on the top edge, so odd sizes squash nothing
    low = min([floor, *ratios])
    for ax, kind in zip(axes, kinds, strict=True):
        here = [r for r in rows if r.problem.kind == kind]
        for style, part in ((FITTED_STYLE, True), (HELD_OUT_STYLE, False)):
            chosen = [r for r in here if (r.label in fitted) == part]
            ax.scatter(
                [2 * r.problem.m * r.problem.n * r.problem.k / 1e9 for r in chosen],
                [min(r.ratio_to_torch["matmul_fast"], high) for r in chosen],
                s=22, facecolors=style["color"] if part else "none", clip_on=False,
                edgecolors=style["color"], marker=style["marker"], label=style["label"],
            )  # fmt: skip
        worst = min(here, key=lambda r: r.ratio_to_torch["matmul_fast"])
        ax.annotate(
            worst.label.removesuffix(f" {kind}"),
            (2 * worst.problem.m * worst.problem.n * worst.problem.k / 1e9,
             worst.ratio_to_torch["matmul_fast"]),
            textcoords="offset points", xytext=(4, -10), fontsize=7,
        )  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")  # twice as fast and half as fast sit equally far from parity
        plain_log_ticks(ax.xaxis, subs=(1.0,))  # five decades
        ticks = [t for t in RATIO_TICKS if low * 0.9 <= t <= high]
        ax.yaxis.set_major_locator(FixedLocator(ticks))
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.axhline(1.0, color="grey", ls=":")
        ax.axhline(floor, color="grey", ls="--", lw=0.8)
        ax.set_ylim(low * 0.9, high)
        above = [r.ratio_to_torch["matmul_fast"] for r in here]
        above = [v for v in above if v > high]
        note = f"\n{len(above)} above {high:.1f} (to {max(above):.1f}): top edge" if above else ""
        ax.set_title(f"{kind} ({len(here)} problems){note}", fontsize=9)
        ax.set_xlabel("GFLOP of the product (2mnk / 10^9)")
    axes[0].set_ylabel("torch.matmul time / matmul_fast time")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"matmul_fast across the grid (dotted: parity, dashed: {floor}); {where}",
                 fontsize=9)  # fmt: skip
    return fig


def size_curve_figure(rows: list[Race], where: str, kind: str = "float16") -> Figure:
    """TFLOP/s against size for the square ``kind`` problems among ``rows``: torch.matmul
    and matmul_fast, as their file raced them (its timing: ``Provenance.timed``)."""
    squares = results.squares(rows, kind)
    fig, (ax,) = new_figure(6.4, 3.6)
    sizes = [r.problem.m for r in squares]
    for name, color, marker in (("torch.matmul", BLUE, "o"), ("matmul_fast", VERMILLION, "^")):
        ax.plot(sizes, [r.tflops[name] for r in squares], marker=marker, color=color, label=name)
    ax.set_xscale("log", base=2)
    ticks: list[int] = []
    for size in sorted(set(sizes)):  # a label only where the last one is well behind
        if not ticks or size >= 1.6 * ticks[-1]:
            ticks.append(size)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(f"n, for an n x n x n {kind} product")
    ax.set_ylabel("TFLOP/s, as raced")
    ax.legend(fontsize=8)
    ax.set_title(f"rate against size; {where}", fontsize=9)
    return fig


def in_flight_figure(sweep: dict, where: str) -> Figure:
    """Each launch of a stored split-K sweep (:func:`tmm_course.perf.split_k.sweep`) at (KB of
    loads in flight per SM, its speed over the baseline's): a solid dot where it met every
    compiler goal, a hollow triangle where not, the fastest a star named in the legend with its
    program count; the goal's KB and the clock's factor on the GPU named first in ``where`` as
    lines."""
    from tmm_course.perf import split_k

    speed = lambda row: sweep["lesson 4"] / row["ms"]
    rows = [row for row in sweep["launches"] if row["in_flight"] is not None]
    fastest = max(rows, key=speed)
    points = [(row["in_flight"] / 1024, speed(row), row["compiler_goals_met"])
              for row in rows if row is not fastest]  # fmt: skip
    goal_kb, (factor, _) = split_k.MIN_IN_FLIGHT / 1024, split_k.factor_for(where)
    fig, (ax,) = new_figure(6.4, 4.0)
    for met, marker, label in ((True, "o", "meets every compiler goal"),
                               (False, "^", "misses a compiler goal")):  # fmt: skip
        xs = [kb for kb, _, ok in points if ok is met]
        ys = [y for _, y, ok in points if ok is met]
        color = BLUE if met else VERMILLION
        ax.scatter(xs, ys, s=28, marker=marker, label=label, edgecolors=color,
                   facecolors=color if met else "none")  # fmt: skip
    color = BLUE if fastest["compiler_goals_met"] else VERMILLION
    ax.scatter([fastest["in_flight"] / 1024], [speed(fastest)], s=90, marker="*",
               edgecolors=color, facecolors=color if fastest["compiler_goals_met"] else "none",
               label=f"fastest: {split_k.knobs_label(fastest['launch'])},\n"
               f"{fastest['programs']} programs for {split_k.H200_SMS} SMs")  # fmt: skip
    ax.axvline(goal_kb, color="black", ls="--", lw=1, label=f"goal: {goal_kb:.0f} KB per SM")
    ax.axhline(factor, color="grey", ls=":", lw=1.5, label=f"clock goal: {factor:.1f}x")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FormatStrFormatter("%.0f"))
    ax.set_xlabel("KB of loads in flight per SM (compiled for sm_90)")
    ax.set_ylabel("times lesson 4's speed")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(fitted_title(ax, f"split-K launches of lesson 8's solution, float16 "
                              f"512x512x16384\nmeasured on {where}", 9, share=0.9),
                 fontsize=9)  # fmt: skip
    return fig
