"""Pictures are drawn from kernel output without a screen; widgets relaunch the kernel."""

from __future__ import annotations

import ipywidgets
import numpy as np
import torch
from matplotlib.figure import Figure

from tmm_course.kernels.broadcast import broadcast_tiles, element_offsets
from tmm_course.kernels.strides import layouts, stride_picture
from tmm_course.kernels.tile_fill import run_tile_fill
from tmm_course.viz import widgets
from tmm_course.viz.broadcast import broadcast_figure, offsets_figure
from tmm_course.viz.strides import strides_figure
from tmm_course.viz.tiles import ownership_figure


def test_tile_fill_data_comes_from_the_kernels():
    data = run_tile_fill(10, 13, 4, 8)
    assert data.grid == (3, 2)
    assert data.index.shape == (10, 13) and data.lanes.shape == (12, 16)
    assert data.masked_lanes == 12 * 16 - 10 * 13
    assert (data.index.ravel() == range(130)).all()


def test_ownership_figure_draws_every_label_on_small_grids():
    fig = ownership_figure(run_tile_fill(5, 7, 4, 4))
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(ax.texts) == 35
    assert "grid 2x2 programs" in ax.get_title() and "29 lanes masked off" in ax.get_title()


def test_ownership_figure_skips_labels_on_big_grids():
    fig = ownership_figure(run_tile_fill(40, 40, 16, 16), labels="owner")
    assert len(fig.axes[0].texts) == 0


def test_broadcast_and_offsets_figures(device):
    col, row = torch.arange(3.0, device=device), torch.arange(4.0, device=device)
    fig = broadcast_figure(broadcast_tiles(col, row), col, row)
    assert len(fig.axes) == 3 and len(fig.axes[2].texts) == 12
    assert len(offsets_figure(element_offsets(3, 4, 4, 1), 4, 1).axes[0].texts) == 12


def test_strides_figure_titles_the_address_arithmetic():
    view = layouts(4, 6)["sliced view x[1::2, 1:]"]
    fig = strides_figure(stride_picture("sliced", view), 2, 3)
    title = fig.axes[0].get_title()
    assert f"({2}, {3}) -> 8 + 2*14 + 3*1 = 39" in title


def test_tile_fill_explorer_relaunches_the_kernel_on_every_change(monkeypatch):
    calls = []
    real = widgets.run_tile_fill

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(widgets, "run_tile_fill", spy)
    box = widgets.tile_fill_explorer(m=6, n=5, block_m=4, block_n=4)
    controls = box.children[0].children
    assert [c.description for c in controls] == ["M", "N", "BLOCK_M", "BLOCK_N"]
    assert calls[-1] == (6, 5, 4, 4)
    controls[0].value = 9
    controls[3].value = 2
    assert calls[-2:] == [(9, 5, 4, 4), (9, 5, 4, 2)]


def test_strides_explorer_offers_every_layout():
    box = widgets.strides_explorer(4, 6)
    layout, i, j = box.children[0].children
    assert list(layout.options) == list(layouts(4, 6))
    assert (i.max, j.max) == (3, 5)


def test_figures_display_as_png_in_ipython():
    from IPython.core.interactiveshell import InteractiveShell

    from tmm_course.ipython import show_figures_inline

    shell = InteractiveShell.instance()
    try:
        assert show_figures_inline()
        data, _ = shell.display_formatter.format(ownership_figure(run_tile_fill(3, 3, 2, 2)))
        assert data["image/png"].startswith("iVBOR")  # base64 of the PNG signature
    finally:
        InteractiveShell.clear_instance()


def test_widget_pictures_are_set_from_the_kernel_side_not_captured(monkeypatch):
    """The picture lands in the Output widget's ``outputs`` directly: a captured ``display()``
    makes batch runners answer on the shell socket mid-cell, which stalled nbconvert runs."""
    captured = []
    monkeypatch.setattr(ipywidgets.Output, "__enter__", lambda self: captured.append(self) or self)
    box = widgets.tile_fill_explorer(m=6, n=5, block_m=4, block_n=4)
    out = box.children[1]
    assert not captured
    assert len(out.outputs) == 1 and out.outputs[0]["output_type"] == "display_data"
    first = out.outputs
    box.children[0].children[0].value = 9
    assert len(out.outputs) == 1 and out.outputs != first


def test_tile_fill_explorer_refuses_more_programs_than_it_can_draw(monkeypatch):
    calls = []
    monkeypatch.setattr(widgets, "run_tile_fill", lambda *args: calls.append(args))
    box = widgets.tile_fill_explorer(m=64, n=64, block_m=1, block_n=1)
    (shown,) = box.children[1].outputs
    assert not calls, "the kernels ran for a grid the explorer does not draw"
    assert shown["output_type"] == "stream"
    assert "4096 programs" in shown["text"] and str(widgets.MAX_PROGRAMS) in shown["text"]


def test_a_failing_redraw_shows_its_traceback_in_the_widget(monkeypatch):
    def broken(*args):
        raise ValueError("no such tile")

    monkeypatch.setattr(widgets, "run_tile_fill", broken)
    (shown,) = widgets.tile_fill_explorer(m=4, n=4, block_m=2, block_n=2).children[1].outputs
    assert shown["name"] == "stderr" and "ValueError: no such tile" in shown["text"]


def test_k_loop_c_stays_empty_until_the_store_after_the_last_step():
    from tmm_course.kernels.matmul import matmul_kloop_frames
    from tmm_course.viz.kloop import frame_figure

    torch.manual_seed(0)
    a, b = torch.randn(40, 72), torch.randn(72, 40)
    frames = matmul_kloop_frames(a, b, tile=(1, 0), precision="ieee")
    for step in range(frames.steps):
        c_panel = frame_figure(a, b, frames, step).axes[4]
        stored = c_panel.get_images()[-1].get_array()
        written = int((~np.isnan(np.ma.filled(stored, np.nan))).sum())
        if step < frames.steps - 1:
            assert written == 0, f"C shows {written} cells at step {step}, before the store"
            assert "still empty" in c_panel.get_title()
        else:
            assert written == 16 * 16 and "stored" in c_panel.get_title()
            assert np.allclose(np.ma.filled(stored, np.nan)[16:32, :16], frames.acc[-1].numpy())


def test_prerendered_widgets_draw_each_combination_with_the_kernel(monkeypatch):
    """For the web pages: one picture per combination of the bounded values, each drawn by the
    kernel for exactly those values, and the HTML naming every slider's values."""
    calls = []
    monkeypatch.setenv(widgets.PRERENDER_ENV, "1")
    monkeypatch.setattr(widgets, "run_tile_fill", lambda *args: calls.append(args) or args)
    monkeypatch.setattr(widgets, "ownership_figure", _figure_naming)
    shown = widgets.tile_fill_explorer(m=10, n=13, block_m=4, block_n=8)
    assert isinstance(shown, widgets.Prerendered)
    sizes = [len(values) for _, values in shown.controls]
    assert len(calls) == len(set(calls)) == len(shown.index) == np.prod(sizes)
    assert (10, 13, 4, 8) in calls
    # the key of a combination leads to the picture drawn for it
    (m, ms), (n, ns), (bm, bms), (bn, bns) = shown.controls
    assert [m, n, bm, bn] == ["M", "N", "BLOCK_M", "BLOCK_N"]
    at = (ms.index(16), ns.index(8), bms.index(8), bns.index(4))
    frame = shown.frames[shown.index[",".join(map(str, at))]]
    assert frame == widgets._frame(lambda: _figure_naming((16, 8, 8, 4)))
    page = shown._repr_html_()
    assert page.count('type="range"') == 4 and "</script>" in page
    assert [v[i] for (_, v), i in zip(shown.controls, shown.start, strict=True)] == [10, 13, 4, 8]


def _figure_naming(args) -> Figure:
    fig = Figure(figsize=(1, 1))
    fig.text(0.1, 0.5, str(args))
    return fig


def test_widgets_are_live_unless_prerendering(monkeypatch):
    monkeypatch.delenv(widgets.PRERENDER_ENV, raising=False)
    assert isinstance(widgets.roofline_lab(), ipywidgets.VBox)
