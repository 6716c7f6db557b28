"""Every figure the notebooks draw is legible, at the sizes the widgets allow: no two texts
overprint, no text leaves the figure or runs into another panel, no line crosses a text, legends
cover no bar, value or point, no text or point hides a point, axes that count have whole-number
ticks, log axes read as plain numbers, a quantity keeps one unit across a lesson, numbers written
on cells contrast with the cell, no program colour is grey (grey means untouched) and blank cells
have a key, and the palettes stay apart for colour-blind readers without relying on red."""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import ListedColormap, to_rgb
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from tmm_course.exercises import column_order_fill
from tmm_course.kernels.broadcast import broadcast_tiles, element_offsets
from tmm_course.kernels.launch_order import launch_order, tiles_fetched
from tmm_course.kernels.matmul import matmul_kloop_frames
from tmm_course.kernels.strides import layouts, stride_picture
from tmm_course.kernels.tile_fill import overlapping_fill, run_tile_fill
from tmm_course.perf import intensity, results, stored, waves
from tmm_course.perf.pitfalls import accumulator_error_curve
from tmm_course.viz import making_fast, performance, widgets
from tmm_course.viz.broadcast import broadcast_figure, offsets_figure
from tmm_course.viz.draw import PROGRAM_PALETTE, contrast_ratio
from tmm_course.viz.kloop import frame_figure, frames_figure
from tmm_course.viz.pitfalls import accumulator_figure
from tmm_course.viz.strides import strides_figure
from tmm_course.viz.tiles import overlap_figure, ownership_figure

SLACK_PX = 2.0  # boxes may touch (matplotlib 3.8 lays a descender out 1.3 px past the edge)


# ---------------------------------------------------------------- the figures, by lesson


def _ownership(m: int, n: int, bm: int, bn: int) -> Callable[[], Figure]:
    return lambda: ownership_figure(run_tile_fill(m, n, bm, bn))


def _kloop(step: str) -> Callable[[], Figure]:
    def draw() -> Figure:
        torch.manual_seed(0)
        a, b = torch.randn(40, 72), torch.randn(72, 40)  # lesson 4's a_small, b_small
        frames = matmul_kloop_frames(a, b, tile=(1, 0), precision="ieee")
        if step == "all":
            return frames_figure(a, b, frames)
        return frame_figure(a, b, frames, 0 if step == "first" else frames.steps - 1)

    return draw


def _strides(name: str, i: int, j: int) -> Callable[[], Figure]:
    views = layouts(4, 6)
    return lambda: strides_figure(stride_picture(name, views[name]), i, j)


def _launch_order() -> Figure:
    orders = {"row-major": launch_order(16, 16), "grouped, GROUP_M=4": launch_order(16, 16, 4)}
    fetched = {name: tiles_fetched(order, 16) for name, order in orders.items()}
    return performance.launch_order_figure(orders, 16, fetched)


def _goals() -> Figure:
    capstone = results.bench()
    goals = {row.label: row.target for row in capstone.goals}
    reached = {row.label: row.ratio_to_torch["matmul_fast"] for row in capstone.goals}
    return performance.ratio_figure(reached, capstone.provenance.where, goals, title="goals")


def _roofline_lab(intensity: float, bandwidth: float) -> Callable[[], Figure]:
    from tmm_course.perf import roofline

    def draw() -> Figure:
        rate = roofline.attainable(intensity, bandwidth)
        label = f"{rate:.0f} GFLOP/s ({roofline.bound(intensity, bandwidth)} bound)"
        return making_fast.roofline_figure(roofline.SYNTHETIC_PEAK_GFLOPS, bandwidth,
                                           {label: (intensity, rate)}, unit="GFLOP/s")  # fmt: skip

    return draw


def _grid() -> Figure:
    grid = results.grid()
    return performance.grid_figure(grid.rows, grid.fitted, grid.provenance.where)


RUN = stored.lessons_run()


def _lesson_6_roofline(part: str) -> Callable[[], Figure]:
    """Lesson 6's roofline and DRAM bars, from the stored run as the notebook draws them."""

    def draw() -> Figure:
        flops = intensity.flops(4096, 4096, 4096)
        tile_points, measured_points, dram_rows = {}, {}, {}
        for step in RUN.steps:
            name, rate = step["name"], RUN.journey["tflops"][step["name"]]
            dram = RUN.dram(f"4096^3 {name}")
            tile_points[name] = (intensity.tile_intensity(*step["tile"], element_bytes=2), rate)
            measured_points[name] = (flops / (dram["read_bytes"] + dram["written_bytes"]), rate)
            dram_rows[name] = (dram["read_bytes"], dram["written_bytes"])
        dram = RUN.dram("4096^3 torch.matmul")
        dram_rows["torch.matmul"] = (dram["read_bytes"], dram["written_bytes"])
        if part == "roofline":
            peak, bandwidth = RUN.device["peak_tflops"]["float16"], RUN.device["copy_bandwidth_gbs"]
            return making_fast.roofline_figure(peak, bandwidth / 1e3, tile_points, measured_points,
                                               title=f"float16 4096^3\n{RUN.where}")  # fmt: skip
        c_bytes = 4096 * 4096 * 2
        ideal = (intensity.ideal_traffic_bytes(4096, 4096, 4096, 2) - c_bytes, c_bytes)
        return making_fast.dram_figure(dram_rows, ideal, RUN.where, title="DRAM traffic")

    return draw


def _lesson_6_stages() -> Figure:
    from tmm_course.perf.shared_memory import SHARED_LIMITS, compiled_shared_bytes

    stages = RUN.sweep("stages")
    ratios: dict[str, dict[int, float]] = {}
    for label, config in stages["configs"].items():
        tile = f"{config['block_m']}x{config['block_n']}x{config['block_k']} w{config['num_warps']}"
        ratios.setdefault(tile, {})[config["num_stages"]] = stages["ratio_to_torch"][label]
    shared_kb = {gpu: {s: compiled_shared_bytes(gpu, s, tile=(64, 64, 32), num_warps=4) / 1024
                       for s in range(1, 6)} for gpu in ("sm_80", "sm_90")}  # fmt: skip
    limits = {gpu: SHARED_LIMITS[gpu] / 1024 for gpu in shared_kb}
    return making_fast.stage_sweep_figure(ratios, shared_kb, limits, RUN.where, "64x64x32 w4")


def _lesson_6_groups() -> Figure:
    groups = RUN.sweep("groups")
    ratio: dict[str, dict[str, float]] = {}
    read_gb: dict[str, dict[str, float]] = {}
    for label, config in groups["configs"].items():
        tile = f"{config['block_m']}x{config['block_n']}x{config['block_k']} w{config['num_warps']}"
        order = "2-D grid" if config["group_m"] is None else f"G{config['group_m']}"
        ratio.setdefault(tile, {})[order] = groups["ratio_to_torch"][label]
        read_gb.setdefault(tile, {})[order] = RUN.dram(f"8192^3 {label}")["read_bytes"] / 1e9
    return making_fast.group_sweep_figure(ratio, read_gb, RUN.where)


def _lesson_6_wave(group_m: int, in_flight: int) -> Callable[[], Figure]:
    """The group_m explorer's picture, with the lesson's strips and the stored device's L2."""
    strip_mb, l2_mb = 128 * 8192 * 2 / 1e6, RUN.device["l2_bytes"] / 1e6
    return lambda: making_fast.wave_figure(launch_order(64, 64, group_m), in_flight, strip_mb,
                                           l2_mb)  # fmt: skip


def _lesson_7_waves(m: int, n: int, block_m: int, block_n: int) -> Callable[[], Figure]:
    return lambda: making_fast.waves_figure(waves.waves(m, n, block_m, block_n, RUN.device["sms"]))


def _lesson_7_owners() -> Figure:
    from tmm_course.kernels.persistent_tma import persistent_owners

    owner, turn = persistent_owners(6, 8, programs=5, group_m=2)
    return making_fast.owners_figure(owner, turn, programs=5)


def _lesson_8(part: str) -> Callable[[], Figure]:
    def draw() -> Figure:
        from tmm_course.capstone.problems import GOALS

        grid = results.grid("grid_h200.json")
        where = grid.provenance.of(grid.rows)
        if part == "grid":
            return performance.grid_figure(grid.rows, grid.fitted, where)
        rows = {row.label: row for row in grid.rows}
        raced = [(p, target) for p, target in GOALS if p.label in rows]
        reached = {p.label: rows[p.label].ratio_to_torch["matmul_fast"] for p, _ in raced}
        goals = {p.label: t for p, t in raced}
        return performance.ratio_figure(reached, where, goals, title="matmul_fast / torch.matmul")

    return draw


def _lesson_8_in_flight() -> Figure:
    from tmm_course.perf import stored

    run = stored.exercises_run()
    return performance.in_flight_figure(run.split_k_sweep, run.where)


def _accesses() -> Figure:
    """A failing check's picture (lessons 5 and 9): lesson 4's kernel launched on six programs
    (every program colour) where a 64x48 product needs twelve, as the memory guard recorded its
    loads and stores."""
    from tmm_course.check.memory_guard import only_these_tensors
    from tmm_course.kernels import pitfalls
    from tmm_course.viz.accesses import accesses_figure

    a, b = torch.randn(64, 20), torch.randn(20, 48)
    c = torch.zeros(64, 48)
    with only_these_tensors({"a": a, "b": b, "c": c}) as trace:
        if trace is None:
            pytest.skip("the memory guard does not know this Triton's interpreter")
        strides = (*a.stride(), *b.stride(), *c.stride())
        pitfalls.correct_kernel[(3, 2)](a, b, c, 64, 48, 20, *strides,
                                          BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)  # fmt: skip
    return accesses_figure(trace, "64x48x20, six programs of twelve")


def _accesses_1d(n: int, block: int, lesson: int) -> Callable[[], Figure]:
    """The check's picture of 1-D tensors: lesson 0's vector add (``x``, ``y``, ``out``,
    ``n`` long, in blocks of ``block``, the last block's mask too loose: lanes past the end) or
    lesson 2's broadcast (``x`` down the rows, ``y`` along the columns)."""

    def draw() -> Figure:
        from tmm_course.check.memory_guard import only_these_tensors
        from tmm_course.kernels.broadcast import broadcast_kernel
        from tmm_course.kernels.vector_add import vector_add_kernel
        from tmm_course.viz.accesses import accesses_figure

        if lesson == 0:
            room = lambda t: t[:n]  # storage past the end, as the check's padding gives
            views = {"x": room(torch.randn(n + block)), "y": room(torch.randn(n + block)),
                     "out": room(torch.zeros(n + block))}  # fmt: skip
            programs = -(-n // block)  # told the grid's length, not n: the last mask lets
            launch = lambda: vector_add_kernel[(programs,)](
                *views.values(), programs * block, BLOCK=block
            )  # lanes past the end
        else:
            views = {"x": torch.randn(n), "y": torch.randn(n + 3), "out": torch.zeros(n, n + 3)}
            grid = (-(-n // block), -(-(n + 3) // block))
            launch = lambda: broadcast_kernel[grid](*views.values(), n, n + 3, WHAT=2,
                                                    BLOCK_M=block, BLOCK_N=block)  # fmt: skip
        with only_these_tensors(views) as trace:
            if trace is None:
                pytest.skip("the memory guard does not know this Triton's interpreter")
            launch()
        return accesses_figure(trace, f"lesson {lesson}, n = {n}")

    return draw


FIGURES: dict[str, Callable[[], Figure]] = {
    # lesson 1: the notebook's shape, the explorer's extremes (sliders 1..64, blocks 1..64,
    # at most widgets.MAX_PROGRAMS programs) and the 33x17 in 16x4 tiles
    "01 ownership 10x13 in 4x8": _ownership(10, 13, 4, 8),
    "01 ownership 33x17 in 16x4": _ownership(33, 17, 16, 4),
    "01 ownership 1x1 in 1x1": _ownership(1, 1, 1, 1),
    "01 ownership 64x64 in 64x64": _ownership(64, 64, 64, 64),
    "01 ownership 64x64 in 8x4 (most programs)": _ownership(64, 64, 8, 4),
    "01 ownership 64x64 in 64x1": _ownership(64, 64, 64, 1),
    "01 ownership 64x64 in 1x64": _ownership(64, 64, 1, 64),
    "01 ownership 1x64 in 1x1": _ownership(1, 64, 1, 1),
    "01 column-order exercise picture": lambda: ownership_figure(
        column_order_fill.target(20, 10), labels="owner"
    ),
    "01 overlap": lambda: overlap_figure(overlapping_fill(8, 10, block_m=4, block_n=4), "on cpu"),
    # lesson 2
    "02 broadcast": lambda: broadcast_figure(
        broadcast_tiles(torch.arange(4.0), torch.arange(6.0) * 10),
        torch.arange(4.0),
        torch.arange(6.0) * 10,
    ),
    "02 offsets row-major": lambda: offsets_figure(element_offsets(4, 6, 6, 1), 6, 1),
    "02 offsets column-major": lambda: offsets_figure(element_offsets(4, 6, 1, 4), 1, 4),
    # lesson 3: every layout of the explorer, at the corners its i and j sliders reach
    **{
        f"03 strides {name} ({i}, {j})": _strides(name, i, j)
        for name in layouts(4, 6)
        for i, j in ((0, 0), (3, 5))
    },
    # lesson 4: the small multiples and the player's first and last frames
    "04 K-loop frames": _kloop("all"),
    "04 K-loop first frame": _kloop("first"),
    "04 K-loop last frame": _kloop("last"),
    # lesson 6 (the stored H200 results) and its roofline lab's slider extremes
    "06 launch order": _launch_order,
    "06 goals": _goals,
    "06 sweep": lambda: performance.sweep_figure(
        results.sweep().rows[0], results.sweep().provenance.where
    ),
    "06 host time": lambda: performance.host_time_figure(
        results.bench().host_us, results.bench().provenance.where
    ),
    "06 grid": _grid,
    "06 size curve": lambda: performance.size_curve_figure(
        results.grid().rows, results.grid().provenance.where
    ),
    "06 roofline lab lowest": _roofline_lab(0.25, 10),
    "06 roofline lab highest": _roofline_lab(128, 400),
    # lesson 6's own figures, from the stored run, and its group_m explorer's extremes
    "06 roofline measured": _lesson_6_roofline("roofline"),
    "06 DRAM bytes": _lesson_6_roofline("dram"),
    "06 pipeline 1 buffer": lambda: making_fast.pipeline_figure(1),
    "06 pipeline 4 buffers": lambda: making_fast.pipeline_figure(4),
    "06 stage sweep": _lesson_6_stages,
    "06 group sweep": _lesson_6_groups,
    "06 wave G8, 132 in flight": _lesson_6_wave(8, 132),
    "06 wave G1, 8 in flight": _lesson_6_wave(1, 8),
    "06 wave G32, 528 in flight": _lesson_6_wave(32, 528),
    # lesson 7: the owners, split-K, and the waves explorer at its default and its extremes
    "07 owners": _lesson_7_owners,
    "07 split-K": lambda: making_fast.split_k_figure(16384, slices=8, block_k=64),
    "07 waves 4096x4096 in 128x256": _lesson_7_waves(4096, 4096, 128, 256),
    "07 waves 256x256 in 256x256": _lesson_7_waves(256, 256, 256, 256),
    "07 waves 8192x8192 in 64x64": _lesson_7_waves(8192, 8192, 64, 64),
    # lesson 8
    "08 goals": _lesson_8("goals"),
    "08 grid": _lesson_8("grid"),
    "08 loads in flight": _lesson_8_in_flight,
    # lessons 5 and 9: a failing check's picture; lessons 0 and 2's 1-D tensors in it
    "09 accesses": _accesses,
    "00 accesses 1-D, n = 1000": _accesses_1d(1000, 128, lesson=0),
    "00 accesses 1-D, n = 7": _accesses_1d(7, 128, lesson=0),
    "02 accesses 1-D, x and y": _accesses_1d(20, 8, lesson=2),
    # lesson 9
    "09 accumulator": lambda: accumulator_figure(accumulator_error_curve([16, 64]), "cpu"),
}


# ---------------------------------------------------------------- what legible means


def _texts(fig: Figure) -> list[Text]:
    """Every text the figure draws: titles, axis labels, the tick labels of the ticks drawn,
    texts on the axes, legends, the figure's own texts."""
    found: list[Text] = [*fig.texts, *_legend_texts(fig.legends)]  # fig.texts has the suptitle
    for sub in fig.subfigs:
        found += sub.texts
    for ax in _all_axes(fig):
        found += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        found += ax.texts
        found += _legend_texts([ax.get_legend()] if ax.get_legend() else [])
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():
                found += [tick.label1, tick.label2]  # the invisible ones are dropped below
    unique = {id(t): t for t in found}.values()
    return [t for t in unique if t.get_visible() and t.get_text().strip() and _shown(t)]


def _all_axes(fig: Figure) -> list[Axes]:
    seen: dict[int, Axes] = {}
    for ax in fig.axes:
        for one in (ax, *ax.child_axes):
            if one.get_visible():
                seen.setdefault(id(one), one)
    return list(seen.values())


def _legend_texts(legends: list) -> list[Text]:
    return [t for legend in legends for t in legend.get_texts()]


def _shown(text: Text) -> bool:
    """Texts placed in data coordinates outside the axes' view are clipped away."""
    axes = text.axes
    if axes is None or text.get_transform() != axes.transData or not text.get_clip_on():
        return True
    x, y = text.get_position()
    (x0, x1), (y0, y1) = sorted(axes.get_xlim()), sorted(axes.get_ylim())
    return x0 <= x <= x1 and y0 <= y <= y1


def _boxes(texts: list[Text], renderer) -> np.ndarray:
    return np.array([t.get_window_extent(renderer).extents for t in texts])


def _overlapping(boxes: np.ndarray) -> list[tuple[int, int]]:
    x0, y0, x1, y1 = (boxes[:, i][:, None] for i in range(4))
    apart = (x1 - SLACK_PX <= x0.T) | (x0 >= x1.T - SLACK_PX) | (y1 - SLACK_PX <= y0.T)
    apart |= y0 >= y1.T - SLACK_PX
    hits = np.argwhere(np.triu(~apart, 1))
    return [(int(i), int(j)) for i, j in hits]


def _family(axes: Axes | None) -> set[int]:
    """An axes and the ones drawn as part of it (secondary axes, insets) or it is part of."""
    if axes is None:
        return set()
    members = {id(axes)}
    for child in axes.child_axes:
        members.add(id(child))
    parent = getattr(axes, "_parent", None) or getattr(axes, "_axes", None)
    if parent is not None:
        members |= {id(parent), *(id(c) for c in parent.child_axes)}
    return members


@pytest.fixture(scope="module", params=list(FIGURES), ids=list(FIGURES))
def drawn(request):
    fig = FIGURES[request.param]()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return request.param, fig, canvas.get_renderer()


def test_no_two_texts_overprint(drawn):
    name, fig, renderer = drawn
    texts = _texts(fig)
    boxes = _boxes(texts, renderer)
    clashes = _overlapping(boxes) if len(texts) > 1 else []
    assert not clashes, f"{name}: " + "; ".join(
        f"{texts[i].get_text()!r} overprints {texts[j].get_text()!r}" for i, j in clashes[:5]
    )


def test_no_text_leaves_the_figure(drawn):
    name, fig, renderer = drawn
    width, height = fig.bbox.width, fig.bbox.height
    for text in _texts(fig):
        x0, y0, x1, y1 = text.get_window_extent(renderer).extents
        inside = x0 >= -SLACK_PX and y0 >= -SLACK_PX and x1 <= width + SLACK_PX
        assert inside and y1 <= height + SLACK_PX, f"{name}: {text.get_text()!r} is cut off"


def test_no_text_runs_into_another_panel(drawn):
    name, fig, renderer = drawn
    panels = [(ax, ax.get_window_extent(renderer).extents) for ax in fig.axes if ax.get_visible()]
    for text in _texts(fig):
        owner = text.axes
        if owner is None:
            continue
        box = np.array([text.get_window_extent(renderer).extents])
        for ax, extents in panels:
            if id(ax) in _family(owner):
                continue
            assert not _overlapping(np.vstack([box, extents])), (
                f"{name}: {text.get_text()!r} runs into another panel"
            )


def test_legends_cover_no_bar_and_no_value(drawn):
    name, fig, renderer = drawn
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    for legend in legends:
        box = legend.get_window_extent(renderer).extents
        own = {id(t) for t in legend.get_texts()}
        for ax in fig.axes:
            bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]
            covered = [p.get_window_extent(renderer).extents for p in bars]
            covered += [t.get_window_extent(renderer).extents for t in ax.texts if id(t) not in own]
            for extents in covered:
                assert not _overlapping(np.vstack([box, extents])), f"{name}: the legend covers"


def test_index_axes_have_whole_number_ticks(drawn):
    name, fig, _renderer = drawn
    for ax in fig.axes:
        if not ax.get_images():
            continue  # not a matrix
        drawn_ticks = [*ax.xaxis._update_ticks(), *ax.yaxis._update_ticks()]
        for label in [t.label1 for t in drawn_ticks if t.label1.get_visible()]:
            text = label.get_text().replace("\N{MINUS SIGN}", "-")
            if not text:
                continue
            try:
                value = float(text)
            except ValueError:
                continue  # a name, not a number
            assert value == int(value), f"{name}: tick {text!r} on an index axis"


def test_numbers_on_cells_contrast_with_the_cell(drawn):
    name, fig, _renderer = drawn
    for ax in fig.axes:
        images = [im for im in ax.get_images() if np.ndim(im.get_array()) == 2]
        if not images:
            continue
        image = images[-1]
        data = np.ma.masked_invalid(np.asarray(image.get_array(), dtype=float))
        for text in ax.texts:
            if text.get_transform() != ax.transData or not text.get_visible():
                continue
            x, y = text.get_position()
            i, j = round(y), round(x)
            if not (0 <= i < data.shape[0] and 0 <= j < data.shape[1]) or data.mask[i, j]:
                continue
            cell = np.array(image.to_rgba(data[i, j])[:3])
            ink = np.array(to_rgb(text.get_color()))
            ratio = contrast_ratio(ink, cell)
            assert ratio >= 4.5, f"{name}: {text.get_text()!r} contrast {ratio:.1f} on its cell"


# ---------------------------------------------------------------- palettes

# Machado, Oliveira and Fernandes (2009), severity 1.0, on linear RGB
DICHROMACY = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                   [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                     [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                   [0.004733, 0.691367, 0.303900]],
}  # fmt: skip


def _linear(rgb: np.ndarray) -> np.ndarray:
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _lab(linear: np.ndarray) -> np.ndarray:
    srgb_to_xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                            [0.0193, 0.1192, 0.9505]])  # fmt: skip
    xyz = srgb_to_xyz @ linear / np.array([0.9505, 1.0, 1.089])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _distances(colours: list[str], vision: str | None) -> list[float]:
    seen = []
    for colour in colours:
        linear = _linear(np.array(to_rgb(colour)))
        if vision:
            linear = np.clip(np.array(DICHROMACY[vision]) @ linear, 0, 1)
        seen.append(_lab(linear))
    return [float(np.linalg.norm(a - b)) for a, b in itertools.combinations(seen, 2)]


PALETTES = {
    "programs (lessons 1, 6)": list(PROGRAM_PALETTE),
    "contenders (lesson 6)": [performance.BLUE, performance.VERMILLION],
    "in flight (lesson 6)": [performance.FLIGHT, "black"],
}


@pytest.mark.parametrize("vision", [None, *DICHROMACY])
@pytest.mark.parametrize("palette", list(PALETTES))
def test_palettes_stay_apart_for_colour_blind_readers(palette, vision):
    nearest = min(_distances(PALETTES[palette], vision))
    assert nearest >= 10, f"{palette}: two colours {nearest:.1f} apart (CIELAB) for {vision}"


def test_no_program_is_drawn_red_against_the_red_edge_of_c():
    for colour in PROGRAM_PALETTE:
        r, g, b = to_rgb(colour)
        assert not (r > 0.6 and r > 1.6 * g and r > 1.6 * b), f"{colour} reads as red"


def test_programs_that_touch_never_share_a_colour():
    from tmm_course.viz.draw import program_colours

    grid_m, grid_n = 9, 7
    colours = program_colours(grid_m * grid_n, grid_n).colors
    for pm, pn in itertools.product(range(grid_m), range(grid_n)):
        for dm, dn in ((0, 1), (1, -1), (1, 0), (1, 1)):
            qm, qn = pm + dm, pn + dn
            if 0 <= qm < grid_m and 0 <= qn < grid_n:
                assert colours[pm * grid_n + pn] != colours[qm * grid_n + qn]


def test_the_explorer_cap_covers_the_largest_drawn_grid():
    assert widgets.MAX_PROGRAMS == 128 == (64 // 8) * (64 // 4)


# ---------------------------------------------------------------- lines, points and keys


def _axes_texts(ax: Axes) -> list[Text]:
    """The texts written inside the axes (labels, values, annotations), as drawn."""
    return [t for t in ax.texts if t.get_visible() and t.get_text().strip() and _shown(t)]


def _inner(box: Bbox) -> Bbox:
    """A text's box less the slack: lines may graze it."""
    return Bbox.from_extents(box.x0 + SLACK_PX, box.y0 + SLACK_PX, box.x1 - SLACK_PX,
                             box.y1 - SLACK_PX)  # fmt: skip


def _drawn_lines(ax: Axes) -> list[Line2D]:
    return [
        line
        for line in ax.lines
        if line.get_visible() and line.get_linestyle() not in ("None", "", " ")
        and line.get_linewidth() > 0
    ]  # fmt: skip


def _points(ax: Axes, renderer) -> list[tuple[Bbox, bool, int]]:
    """Every marker drawn on the axes: its box on screen, whether it is filled, draw order."""
    found = []
    scale = ax.figure.dpi / 72
    for order, line in enumerate(ax.lines):
        if not line.get_visible() or line.get_marker() in ("None", "", " ", None):
            continue
        half = line.get_markersize() * scale / 2
        filled = (
            line.get_markerfacecolor() not in ("none", "None") and line.get_fillstyle() != "none"
        )
        xy = line.get_transform().transform(line.get_xydata())  # names as their positions
        found += [(Bbox.from_extents(x - half, y - half, x + half, y + half), filled, order)
                  for x, y in xy]  # fmt: skip
    for order, points in enumerate(ax.collections, start=len(ax.lines)):
        if not isinstance(points, PathCollection) or not points.get_visible():
            continue
        sizes = np.broadcast_to(points.get_sizes(), (len(points.get_offsets()),))
        xy = points.get_offset_transform().transform(np.asarray(points.get_offsets(), float))
        faces = points.get_facecolors()
        filled = len(faces) > 0 and float(np.max(faces[:, 3])) > 0
        for (x, y), size in zip(xy, sizes, strict=True):
            half = np.sqrt(size) * scale / 2
            found.append((Bbox.from_extents(x - half, y - half, x + half, y + half), filled, order))
    return found


def _area(box: Bbox) -> float:
    return max(box.width, 0) * max(box.height, 0)


def _shared(first: Bbox, second: Bbox) -> float:
    """How much of ``first`` ``second`` covers (0 to 1)."""
    overlap = Bbox.intersection(first, second)
    return 0.0 if overlap is None or _area(first) == 0 else _area(overlap) / _area(first)


def test_no_line_crosses_a_text(drawn):
    name, fig, renderer = drawn
    for ax in _all_axes(fig):
        for text in _axes_texts(ax):
            box = _inner(text.get_window_extent(renderer))
            for line in _drawn_lines(ax):
                path = line.get_transform().transform_path(line.get_path())
                assert not path.intersects_bbox(box, filled=False), (
                    f"{name}: a line ({line.get_label()!r}) crosses {text.get_text()!r}"
                )


def test_no_text_legend_or_point_hides_a_point(drawn):
    """A point is hidden under a text, a legend, or an outline of its size and shape's size drawn
    on the same spot after it (two hollow markers there show as one)."""
    name, fig, renderer = drawn
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    covers = [("the legend", _inner(legend.get_window_extent(renderer))) for legend in legends]
    for ax in _all_axes(fig):
        points = _points(ax, renderer)
        texts = [
            (repr(t.get_text()), _inner(t.get_window_extent(renderer))) for t in _axes_texts(ax)
        ]
        for i, (box, filled, order) in enumerate(points):
            for what, cover in [*covers, *texts]:
                assert _shared(box, cover) == 0, f"{name}: {what} hides a point"
            for other, other_filled, later in points[i + 1 :]:
                if later == order or filled or other_filled:
                    continue  # one line's own points: a curve; a filled point shows its fill
                alike = 0.75 <= other.width / max(box.width, 1e-9) <= 1.33
                assert not (_shared(box, other) > 0.6 and alike), f"{name}: a point hides another"


def _data_coordinates(ax: Axes) -> dict[str, list[float]]:
    """What the axes plot along x and y: line and scatter points, bars' positions and lengths
    (not lines drawn across the axes, whose other coordinate is the axes' own)."""
    found: dict[str, list[float]] = {"x": [], "y": []}
    for line in ax.lines:
        if line.get_transform() == ax.transData:
            for key, values in zip("xy", line.get_data(), strict=True):
                try:
                    found[key] += list(np.asarray(values, float))
                except ValueError:
                    found[key].append(0.5)  # names (categories): not a count
    for points in ax.collections:
        if isinstance(points, PathCollection) and points.get_offset_transform() == ax.transData:
            offsets = np.asarray(points.get_offsets(), float)
            found["x"] += list(offsets[:, 0])
            found["y"] += list(offsets[:, 1])
    for bars in ax.containers:
        if isinstance(bars, BarContainer):
            across, along = ("x", "y") if bars.orientation == "vertical" else ("y", "x")
            for bar in bars:
                found[across].append(bar.get_center()[0 if across == "x" else 1])
                found[along].append(bar.get_height() if along == "y" else bar.get_width())
    return found


def _tick_numbers(axis) -> list[tuple[str, float]]:
    numbers = []
    for tick in axis._update_ticks():
        if not tick.label1.get_visible():
            continue
        text = tick.label1.get_text().replace("\N{MINUS SIGN}", "-").replace(",", "")
        try:
            numbers.append((tick.label1.get_text(), float(text)))
        except ValueError:
            continue  # a name, or mathtext (the log axes' test reads those)
    return numbers


def test_axes_that_count_tick_whole_numbers(drawn):
    """An axis whose every plotted coordinate is a whole number counts something (stages,
    waves, SMs): its ticks are whole numbers too."""
    name, fig, _renderer = drawn
    for ax in _all_axes(fig):
        data = _data_coordinates(ax)
        for key, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            values = np.asarray(data[key])
            # a unit converter (dates, categories) maps other values: get_converter since 3.10
            converter = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
            if len(values) < 2 or axis.get_scale() != "linear" or converter is not None:
                continue
            if not np.all(values == np.round(values)):
                continue
            for text, value in _tick_numbers(axis):
                assert value == int(value), f"{name}: tick {text!r} on an axis that counts"


def test_log_axes_read_as_plain_numbers(drawn):
    """50, 100, 200 on a log axis, never 6x10^2 (nor 10^2)."""
    name, fig, _renderer = drawn
    for ax in _all_axes(fig):
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "log":
                continue
            for tick in [*axis._update_ticks(), *axis.get_minor_ticks()]:
                text = tick.label1.get_text() if tick.label1.get_visible() else ""
                plain = text.replace("\N{MINUS SIGN}", "-").replace(",", "")
                if text and not re.fullmatch(r"-?\d+(\.\d+)?", plain):
                    pytest.fail(f"{name}: a log axis labelled {text!r}")


DECIMAL, BINARY = ("kB", "KB", "MB", "GB", "TB"), ("KiB", "MiB", "GiB", "TiB")
AMOUNT = re.compile(r"(\w+)\W{0,3}\s(?:[\d.,]+|\{[^}]*\})\s?(KiB|MiB|GiB|TiB|kB|KB|MB|GB|TB)\b")


def _amounts(text: str) -> set[tuple[str, str]]:
    """(the word naming a quantity, the unit of its amount): "L2 63 MB" -> ("L2", "decimal");
    the amount may be a format field, as a notebook's print writes it."""
    return {
        (word, "binary" if unit in BINARY else "decimal") for word, unit in AMOUNT.findall(text)
    }


@functools.cache
def _lesson_words(number: str) -> str:
    notebook = next((Path(__file__).parent.parent / "notebooks").glob(f"{number}_*.ipynb"))
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells)


def test_one_quantity_keeps_one_unit_in_a_figure_and_its_lesson(drawn):
    """Not 63 MB in a picture beside 60 MiB in the lesson's print, nor MB and MiB in one figure."""
    name, fig, _renderer = drawn
    figure_text = " ".join(t.get_text() for t in _texts(fig))
    used = {unit for _word, unit in _amounts(figure_text)}
    assert len(used) <= 1, f"{name}: decimal and binary units in one figure"
    lesson = _amounts(_lesson_words(name.split()[0]))
    for word, unit in _amounts(figure_text):
        other = {u for w, u in lesson if w == word} - {unit}
        assert not other, f"{name}: {word} in {unit} units here, in {other.pop()} in its lesson"


def _grey(colour) -> bool:
    r, g, b = to_rgb(colour)
    return max(r, g, b) - min(r, g, b) < 0.06


def test_no_category_is_grey_and_blank_cells_have_a_key(drawn):
    """Grey and blank mean "nobody touched this": no colour of a categorical map is grey, and
    a picture with blank cells (not covered by a hatched or filled mark) keys them in its
    legend."""
    name, fig, _renderer = drawn
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    keyed = [h for legend in legends for h in legend.legend_handles if isinstance(h, Patch)]
    for ax in _all_axes(fig):
        for image in ax.get_images():
            cmap = image.get_cmap()
            if (
                not isinstance(cmap, ListedColormap)
                or cmap.N > 16
                or np.ndim(image.get_array()) != 2
            ):
                continue  # a scale (cividis), not categories
            greys = [c for c in cmap.colors if _grey(c)]
            assert not greys, f"{name}: a category drawn grey ({greys[0]})"
            data = np.ma.masked_invalid(np.ma.asarray(image.get_array(), dtype=float))
            blank = set(zip(*np.nonzero(np.ma.getmaskarray(data)), strict=True))
            for patch in ax.patches:
                if isinstance(patch, Rectangle) and (patch.get_fill() or patch.get_hatch()):
                    x0, y0 = patch.get_x() + 0.5, patch.get_y() + 0.5
                    cols = range(round(x0), round(x0 + patch.get_width()))
                    rows = range(round(y0), round(y0 + patch.get_height()))
                    blank -= set(itertools.product(rows, cols))
            if blank:
                background = to_rgb(ax.get_facecolor())
                assert any(np.allclose(to_rgb(h.get_facecolor()), background) for h in keyed), (
                    f"{name}: {len(blank)} blank cells and no key for them"
                )


MIN_CELL_PX = 4  # a cell of an access picture one can see and point at


def test_every_tensor_of_an_access_picture_has_cells_one_can_see(drawn):
    """The check's picture of where a kernel read and wrote: every tensor, 1-D ones included,
    drawn in cells at least MIN_CELL_PX on a side (a 1-D tensor wraps into rows, not a strip
    a pixel high), its rows labelled by the element that starts them."""
    name, fig, renderer = drawn
    if "accesses" not in name:
        return
    for ax in fig.axes:
        for image in ax.get_images():
            rows, cols = np.shape(image.get_array())
            x0, y0, x1, y1 = image.get_window_extent(renderer).extents
            assert (x1 - x0) / cols >= MIN_CELL_PX and (y1 - y0) / rows >= MIN_CELL_PX, (
                f"{name}: {ax.get_title()!r} draws cells {(x1 - x0) / cols:.1f} x "
                f"{(y1 - y0) / rows:.1f} px"
            )
        if "a row" in ax.get_title():  # a wrapped 1-D tensor
            labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
            width = int(ax.get_title().split(", ")[1].split(" a row")[0])
            assert all(int(label) % width == 0 for label in labels), (name, labels)
            # lanes past the end are drawn where the next elements would be, in the rows
            assert ax.get_xlim()[1] <= width - 0.5, (name, ax.get_title(), ax.get_xlim())
