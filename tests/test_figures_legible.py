"""Every figure the notebooks draw is legible, at the sizes the widgets allow: no two texts
overprint, no text leaves the figure or runs into another panel, legends cover no bar or
value, index axes have whole-number ticks, numbers written on cells contrast with the cell, and
the palettes stay apart for colour-blind readers without relying on red."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
import torch
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from tmm_course.kernels.broadcast import broadcast_tiles, element_offsets
from tmm_course.kernels.launch_order import launch_order, tiles_fetched
from tmm_course.kernels.matmul import matmul_kloop_frames
from tmm_course.kernels.strides import layouts, stride_picture
from tmm_course.kernels.tile_fill import overlapping_fill, run_tile_fill
from tmm_course.perf import journey, results
from tmm_course.perf.pitfalls import accumulator_error_curve
from tmm_course.viz import performance, widgets
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


def _journey() -> Figure:
    race = results.bench().journey
    ratios = {name: race.ratio_to_torch[name] for name in race.contenders}
    return performance.ratio_figure(ratios, results.bench().provenance.where, title="journey")


def _goals() -> Figure:
    capstone = results.bench("goals_h200.json")
    goals = {row.label: row.target for row in capstone.goals}
    reached = {row.label: row.ratio_to_torch["matmul_fast"] for row in capstone.goals}
    return performance.ratio_figure(reached, capstone.provenance.where, goals, title="goals")


def _journey_roofline() -> Figure:
    from tmm_course.perf import intensity

    race = results.bench().journey
    points = {
        step.name: (intensity.tile_intensity(*step.tile, element_bytes=2), race.tflops[step.name])
        for step in journey.STEPS
        if step.name in race.tflops
    }
    return performance.roofline_figure(989.0, 4.8, points, unit="TFLOP/s")


def _roofline_lab(intensity: float, bandwidth: float) -> Callable[[], Figure]:
    from tmm_course.perf import roofline

    def draw() -> Figure:
        rate = roofline.attainable(intensity, bandwidth)
        label = f"{rate:.0f} GFLOP/s ({roofline.bound(intensity, bandwidth)} bound)"
        return performance.roofline_figure(roofline.SYNTHETIC_PEAK_GFLOPS, bandwidth,
                                           {label: (intensity, rate)})  # fmt: skip

    return draw


def _grid() -> Figure:
    grid = results.grid()
    return performance.grid_figure(grid.rows, grid.fitted, grid.provenance.where)


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
    "06 journey": _journey,
    "06 journey roofline": _journey_roofline,
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
