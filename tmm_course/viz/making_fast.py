"""Lessons 6 and 7 pictures: measured DRAM bytes on the roofline, the pipeline's ring buffer,
the stage and GROUP_M sweeps, a wave of tiles and their strips of A and B, waves on the SMs,
and split-K. Every figure of stored data carries the run's ``where`` (device, versions, date,
code version) in its title."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tmm_course.perf import pipeline, roofline
from tmm_course.perf.waves import Waves
from tmm_course.viz.draw import (
    fitted_title,
    index_ticks,
    new_figure,
    plain_log_ticks,
    whole_number_ticks,
)

BLUE, VERMILLION, GREEN, GREY = "#0072B2", "#D55E00", "#009E73", "#999999"


def roofline_figure(
    peak: float,
    bandwidth: float,
    tile_points: dict[str, tuple[float, float]],
    measured_points: dict[str, tuple[float, float]] | None = None,
    title: str = "",
    unit: str = "TFLOP/s",
) -> Figure:
    """min(peak, I x B) on log axes (``peak`` in ``unit``, ``bandwidth`` in its bytes per
    second: TFLOP/s with TB/s, GFLOP/s with GB/s); each kernel as a hollow marker at its tile
    intensity and, if measured, a filled one at FLOPs per DRAM byte measured, joined by a line.
    Kernels with the same tile sit on one spot: each hollow marker there is drawn larger than the
    last, so all show as rings; a filled marker near another is drawn larger and behind it, so
    it shows as a rim. The key, the ridge's among them, sits beside the axes. Lesson 6's
    measured roofline and its roofline lab (one point, its sliders') both draw this."""
    fig, (ax,) = new_figure(7.4, 4.0)
    ridge = roofline.ridge(bandwidth, peak)
    xs_all = [x for x, _ in tile_points.values()] + [x for x, _ in (measured_points or {}).values()]
    xs = np.geomspace(min([ridge / 16, *xs_all]) / 1.5, max([ridge * 8, *xs_all]) * 1.5, 200)
    ax.loglog(xs, np.minimum(peak, xs * bandwidth), color="black", label="attainable")
    ax.axvline(ridge, color=GREY, ls=":", label=f"ridge {ridge:.3g} FLOP/B")
    markers = "osD^v<>P*X"
    colours = ["C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7"]
    drawn: list[tuple[float, float]] = []
    filled: list[tuple[float, float]] = []

    def near(x: float, rate: float, points: list[tuple[float, float]]) -> int:
        close = [abs(np.log(x / px)) < 0.12 and abs(np.log(rate / pr)) < 0.12 for px, pr in points]
        points.append((x, rate))
        return sum(close)

    for i, (name, (x, rate)) in enumerate(tile_points.items()):
        style = {"marker": markers[i % 10], "color": colours[i % 8]}
        ring = near(x, rate, drawn)
        ax.plot([x], [rate], ls="none", mfc="none", ms=7 * 1.5**ring, label=name, **style)
        if measured_points and name in measured_points:
            mx, mrate = measured_points[name]
            rim = near(mx, mrate, filled)
            ax.plot([mx], [mrate], ls="none", ms=7 * 1.6**rim, zorder=2.5 - 0.1 * rim, **style)
            ax.plot([x, mx], [rate, mrate], color=colours[i % 8], lw=0.8, alpha=0.6, zorder=1)
    key = "hollow: tile intensity\nfilled: measured DRAM" if measured_points else None
    fig.legend(fontsize=7, loc="outside right upper", title_fontsize=7, title=key)
    plain_log_ticks(ax.xaxis)
    plain_log_ticks(ax.yaxis)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=9)
    return fig


def dram_figure(rows: dict[str, tuple[float, float]], ideal: tuple[float, float], where: str,
                title: str = "") -> Figure:  # fmt: skip
    """Horizontal bars: MB read from and written to DRAM per kernel (Nsight Compute), and the
    ideal single-read traffic as a dotted line."""
    names = list(rows)
    fig, (ax,) = new_figure(6.6, 0.38 * len(names) + 1.4)
    y = np.arange(len(names))
    read = [rows[n][0] / 1e6 for n in names]
    written = [rows[n][1] / 1e6 for n in names]
    ax.barh(y, read, color=BLUE, label="read")
    ax.barh(y, written, left=read, color=VERMILLION, hatch="//", label="written")
    for i, (r, w) in enumerate(zip(read, written, strict=True)):
        ax.text(r + w, i, f" {r:,.0f} + {w:,.0f}", va="center", fontsize=7)
    ideal_label = "ideal: A, B read once, C written once"
    ax.axvline(sum(ideal) / 1e6, color="black", ls=":", label=ideal_label)
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("MB moved to and from DRAM (Nsight Compute)")
    fig.legend(fontsize=7, loc="outside lower center", ncols=3)  # below: it covers no bar
    ax.set_title((title + "\n" if title else "") + where, fontsize=9)
    return fig


def pipeline_figure(buffers: int, steps: int = 8, load_time: float = 3.0) -> Figure:
    """The K-loop as a timeline: one lane per ring-buffer slot (a load fills it, the slot is
    held until its tl.dot is done), and the tensor cores' lane below (a model)."""
    slabs = pipeline.schedule(buffers, steps, load_time)
    end = max(s.dot[1] for s in slabs)
    fig, (ax,) = new_figure(7.0, 0.45 * (buffers + 1) + 1.3)
    for s in slabs:
        lane = s.slot
        ax.add_patch(Rectangle((s.load[0], lane + 0.1), s.load[1] - s.load[0], 0.8, color=BLUE,
                               alpha=0.85))  # fmt: skip
        ax.add_patch(Rectangle((s.load[1], lane + 0.1), s.dot[1] - s.load[1], 0.8, color=BLUE,
                               alpha=0.25))  # fmt: skip
        ax.text(s.load[0] + 0.1, lane + 0.5, f"load {s.step}", va="center", fontsize=7,
                color="white")  # fmt: skip
        ax.add_patch(Rectangle((s.dot[0], buffers + 0.1), 1.0, 0.8, color=VERMILLION))
        ax.text(s.dot[0] + 0.5, buffers + 0.5, str(s.step), ha="center", va="center", fontsize=7,
                color="white")  # fmt: skip
    ax.set_xlim(0, end + 0.5)
    ax.set_ylim(buffers + 1, 0)
    ax.set_yticks([i + 0.5 for i in range(buffers + 1)],
                  [f"slot {i}" for i in range(buffers)] + ["tl.dot"], fontsize=8)  # fmt: skip
    ax.set_xlabel(f"time (one tl.dot = 1; one load = {load_time:g})")
    title = (f"{buffers} buffer{'s' if buffers > 1 else ''} in the ring: tensor cores busy "
             f"{pipeline.busy(slabs):.0%} of the time (a model: dark = loading, "
             "light = held until its tl.dot ends)")  # fmt: skip
    ax.set_title(fitted_title(ax, title, 9), fontsize=9)
    return fig


def stage_sweep_figure(
    ratios: dict[str, dict[int, float]],
    shared_kb: dict[str, dict[int, float]],
    limits_kb: dict[str, float],
    where: str,
    shared_tile: str,
) -> Figure:
    """Left: speed relative to torch.matmul against num_stages, one line per tile (stored
    run). Right: shared memory the compiler gives each num_stages to the ``shared_tile`` (one
    of the tiles on the left, in its colour), per GPU, each point labelled, on a scale that
    fits them; a GPU's limit drawn where it is on that scale, else named in the title."""
    fig, (left, right) = new_figure(9.0, 3.6, ncols=2)
    colour_of = {name: c for name, c in zip(ratios, [BLUE, VERMILLION, GREEN], strict=False)}
    for name, by_stage in ratios.items():
        stages = sorted(by_stage)
        left.plot(stages, [by_stage[s] for s in stages], "o-", label=name,
                  color=colour_of.get(name))  # fmt: skip
        for i, s in enumerate(stages):
            neighbours = [by_stage[t] for t in stages[max(i - 1, 0) : i + 2] if t != s]
            below = all(n > by_stage[s] for n in neighbours)  # the line leaves it upwards
            left.annotate(f"{by_stage[s]:.2f}", (s, by_stage[s]), textcoords="offset points",
                          xytext=(0, -6 if below else 5), fontsize=7, ha="center",
                          va="top" if below else "baseline")  # fmt: skip
    left.set_xlabel("num_stages")
    left.set_ylabel("torch.matmul time / kernel time")
    left.margins(y=0.12)  # room above the top value for its label
    left.legend(fontsize=7)
    left.set_title(f"float16 4096^3\n{where}", fontsize=8)
    styles = {"sm_80": ("s", "--"), "sm_90": ("o", "-")}
    colour = colour_of.get(shared_tile, "black")
    top = 1.35 * max(kb for by_stage in shared_kb.values() for kb in by_stage.values())
    far = []  # limits above the points' scale: named, not drawn
    for i, (gpu, by_stage) in enumerate(shared_kb.items()):
        stages = sorted(by_stage)
        marker, line = styles.get(gpu, ("^", "-."))
        right.plot(stages, [by_stage[s] for s in stages], marker=marker, ls=line, color=colour,
                   label=gpu)  # fmt: skip
        for s in stages:  # the first GPU's figures below its points, the next one's above
            right.annotate(f"{by_stage[s]:.0f}", (s, by_stage[s]), textcoords="offset points",
                           xytext=(0, 5 if i else -6), fontsize=7, ha="center",
                           va="baseline" if i else "top")  # fmt: skip
        if limits_kb[gpu] <= top:
            right.axhline(limits_kb[gpu], color="black", ls=line, lw=0.8)
            right.annotate(f"{gpu} limit {limits_kb[gpu]:.0f} KB", (stages[0], limits_kb[gpu]),
                           textcoords="offset points", xytext=(0, 3), fontsize=7)  # fmt: skip
        else:
            far.append(f"{gpu} {limits_kb[gpu]:.0f} KB")
    right.set_ylim(0 - 0.08 * top, top)
    right.set_xlabel("num_stages")
    right.set_ylabel("shared memory per program (KB)")
    right.legend(fontsize=7, loc="upper left")
    limits = f"\nlimits, far above: {', '.join(far)}" if far else ""
    right.set_title(f"{shared_tile}: shared memory, compiled here for each GPU{limits}", fontsize=8)
    for ax in (left, right):
        whole_number_ticks(ax.xaxis)
    return fig


def group_sweep_figure(
    ratios: dict[str, dict[str, float]], read_gb: dict[str, dict[str, float]], where: str
) -> Figure:
    """Per launch order (x): speed relative to torch.matmul (left) and GB read from DRAM
    (right), one line per tile."""
    fig, (left, right) = new_figure(9.0, 3.6, ncols=2)
    for name in ratios:
        orders = list(ratios[name])
        left.plot(orders, [ratios[name][o] for o in orders], "o-", label=name)
        right.plot(orders, [read_gb[name][o] for o in orders], "s-", label=name)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=7, rotation=30)
        ax.legend(fontsize=7)
    left.set_ylabel("torch.matmul time / kernel time")
    right.set_ylabel("GB read from DRAM (Nsight Compute)")
    right.set_yscale("log")
    plain_log_ticks(right.yaxis)
    left.set_title(f"float16 8192^3, launch order\n{where}", fontsize=8)
    right.set_title("A and B are 0.27 GB: everything above is re-reading", fontsize=8)
    return fig


def wave_figure(order: np.ndarray, in_flight: int, strip_mb: float, l2_mb: float) -> Figure:
    """Left: the program id of each tile, the first wave (``in_flight`` programs) outlined.
    Right: per wave, the MB of A and B strips its programs need together, against L2."""
    fig, (left, right) = new_figure(9.0, 3.8, ncols=2)
    first = order < in_flight
    left.imshow(np.where(first, 1.0, 0.25) * (1 + order / order.max()), cmap="Blues")
    rows, cols = np.nonzero(first)
    left.scatter(cols, rows, s=6, color=VERMILLION)
    left.set_xlabel("pid_n (column of tiles)")
    left.set_ylabel("pid_m (row of tiles)")
    left.set_title(f"first wave: {in_flight} programs (dots)", fontsize=9)
    tile_of = np.argsort(order, axis=None)
    grid_n = order.shape[1]
    needs = []
    for start in range(0, order.size, in_flight):
        wave = tile_of[start : start + in_flight]
        needs.append((len(set((wave // grid_n).tolist())) + len(set((wave % grid_n).tolist())))
                     * strip_mb)  # fmt: skip
    right.bar(range(len(needs)), needs, color=[BLUE if n <= l2_mb else VERMILLION for n in needs])
    right.axhline(l2_mb, color="black", ls=":")
    right.annotate(f"L2 {l2_mb:.0f} MB", (0, l2_mb), textcoords="offset points", xytext=(0, 3),
                   fontsize=8)  # fmt: skip
    right.set_xlabel("wave")
    whole_number_ticks(right.xaxis)
    index_ticks(left)
    right.set_ylabel("MB of A and B strips the wave reads")
    right.set_title("blue: fits in L2, vermillion: does not", fontsize=9)
    return fig


def waves_figure(w: Waves, title: str = "") -> Figure:
    """One bar per wave: how many of the SMs it keeps busy."""
    rounds = -(-w.tiles // w.slots)
    shown = min(rounds, 40)
    busy = [min(w.slots, w.tiles - r * w.slots) for r in range(rounds)][-shown:]
    fig, (ax,) = new_figure(6.4, 3.0)
    ax.bar(range(rounds - shown, rounds), busy,
           color=[BLUE if b == w.slots else VERMILLION for b in busy])  # fmt: skip
    ax.axhline(w.slots, color="black", ls=":")
    ax.set_xlabel("wave" + (" (the last 40)" if rounds > shown else ""))
    whole_number_ticks(ax.xaxis)
    ax.set_ylabel("SMs busy")
    words = (
        f"{w.tiles} tiles on {w.slots} SMs: {w.waves:.2f} waves, last wave "
        f"{w.last_wave_use:.0%} full, {w.use:.0%} of SM time used"
    )
    ax.set_title(title or words, fontsize=9)
    return fig


def split_k_figure(k: int, slices: int, block_k: int = 64) -> Figure:
    """One tile of C with K cut into ``slices``: each slice a program that sums its part into a
    float32 partial; the last program to finish adds the partials and stores C."""
    per = -(-k // slices)
    fig, (ax,) = new_figure(8.0, 2.8)
    colours = [BLUE, VERMILLION, GREEN, "#E69F00", "#CC79A7", "#56B4E9", "#F0E442", GREY]
    for s in range(slices):
        lo, hi = s * per, min(k, (s + 1) * per)
        ax.add_patch(Rectangle((lo, 2), hi - lo, 0.8, color=colours[s % 8]))
        ax.text((lo + hi) / 2, 2.4, f"program {s}\nK {lo}-{hi - 1}", ha="center", va="center",
                fontsize=7, color="white")  # fmt: skip
        ax.add_patch(Rectangle((lo + 0.15 * (hi - lo), 0.9), 0.7 * (hi - lo), 0.6,
                               color=colours[s % 8], alpha=0.5))  # fmt: skip
        ax.text((lo + hi) / 2, 1.2, f"partial {s}\n(float32)", ha="center", va="center",
                fontsize=7)  # fmt: skip
        ax.annotate("", (lo + hi) / 2 * np.array([1, 0]) + [0, 1.5], ((lo + hi) / 2, 2),
                    arrowprops={"arrowstyle": "->"})  # fmt: skip
    ax.add_patch(Rectangle((k * 0.3, 0.0), k * 0.4, 0.5, color="black"))
    ax.text(k * 0.5, 0.25, "last to finish: sum of partials -> C", ha="center", va="center",
            fontsize=8, color="white")  # fmt: skip
    ax.set_xlim(0, k)
    ax.set_ylim(-0.1, 3.0)
    ax.set_yticks([])
    ax.set_xlabel(f"K ({k}); {slices} slices of {per} = {-(-per // block_k)} K-steps each")
    ax.set_title(f"split-K: {slices} programs per tile of C instead of one", fontsize=9)
    return fig


def owners_figure(owner: np.ndarray, turn: np.ndarray, programs: int) -> Figure:
    """Each tile coloured by the persistent program that takes it, labelled with its turn of
    that program's loop (as the kernel stored them)."""
    from tmm_course.viz.draw import label_cells, program_colours

    fig, (ax,) = new_figure(0.5 * owner.shape[1] + 2.0, 0.5 * owner.shape[0] + 1.2)
    ax.imshow(owner, cmap=program_colours(programs), vmin=-0.5, vmax=programs - 0.5)
    labels = np.array(
        [
            [f"p{o}\n#{t}" for o, t in zip(ro, rt, strict=True)]
            for ro, rt in zip(owner, turn, strict=True)
        ]
    )
    label_cells(ax, labels, fmt="{}", size=6)
    ax.set_xlabel("pid_n")
    ax.set_ylabel("pid_m")
    ax.set_title(f"{programs} persistent programs: p = program, # = its turn", fontsize=9)
    return fig
