"""Lesson 6 pictures are drawn from the data they are given: stored H200 results or a kernel's
launch order; the roofline lab redraws from its sliders."""

from __future__ import annotations

from matplotlib.figure import Figure

from tmm_course.kernels.launch_order import launch_order, tiles_fetched
from tmm_course.perf import results, roofline
from tmm_course.viz import making_fast, performance, widgets

H200 = results.bench()


def texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in [*ax.texts, ax.title]) + " ".join(
        t.get_text() for ax in fig.axes for t in ax.get_yticklabels()
    )


def test_roofline_marks_the_ridge_and_each_point():
    fig = making_fast.roofline_figure(1000, 80, {"mine": (8, 640)}, unit="GFLOP/s")
    (ax,) = fig.axes
    assert any("ridge 12.5" in t.get_text() for t in fig.legends[0].get_texts())  # in the key
    assert [line.get_label() for line in ax.lines if line.get_label() == "mine"] == ["mine"]
    xs, ys = ax.lines[0].get_data()
    assert max(ys) == 1000 and min(ys) == roofline.attainable(xs[0], 80)


def test_launch_order_figure_titles_the_fetched_tiles():
    orders = {"row-major": launch_order(4, 4), "grouped": launch_order(4, 4, group_m=2)}
    fetched = {n: tiles_fetched(o, 4) for n, o in orders.items()}
    fig = performance.launch_order_figure(orders, 4, fetched)
    assert f"A tiles fetched {fetched['row-major'][0]}, B tiles {fetched['row-major'][1]}" in texts(
        fig
    )
    assert len(fig.axes[0].texts) == 16  # one program id per tile


def test_ratio_figure_colours_met_and_missed_goals():
    fig = performance.ratio_figure(
        {"fast": 1.2, "slow": 0.5}, "somewhere", {"fast": 1.0, "slow": 0.8}
    )
    bars = fig.axes[0].patches
    assert [round(b.get_width(), 2) for b in bars] == [1.2, 0.5]
    assert bars[0].get_facecolor() != bars[1].get_facecolor()
    assert "measured on somewhere" in fig.get_suptitle()


def test_sweep_figure_ranks_the_stored_configurations():
    row = results.sweep().rows[0]
    fig = performance.sweep_figure(row, "H200", top=5)
    widths = [b.get_width() for b in fig.axes[0].patches]
    assert len(widths) == 5 and widths == sorted(widths, reverse=True)
    assert widths[0] == max(row.torch_ms / t.ms for t in row.trials if t.ms)


def test_host_time_figure_has_a_bar_per_part():
    host = H200.host_us
    fig = performance.host_time_figure(host, "H200")
    assert len(fig.axes[0].patches) == len(host)


def test_roofline_lab_has_intensity_and_bandwidth_sliders():
    lab = widgets.roofline_lab()
    sliders = lab.children[0].children
    assert [s.description for s in sliders] == ["FLOP/byte", "GB/s"]
    assert sliders[0].value == 8 and sliders[1].value == 80
