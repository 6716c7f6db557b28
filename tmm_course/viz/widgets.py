"""Thin ipywidgets wiring over the pure picture functions; every redraw runs the kernel anew.

Where the course is built as web pages (``TMM_PRERENDER_WIDGETS=1``, which ``make site`` sets),
each widget instead draws its pictures ahead, one per combination of a bounded set of its values,
and shows them as an HTML block whose sliders swap the pictures with no kernel behind them.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import itertools
import json
import os
import traceback
from collections.abc import Callable

import ipywidgets as widgets
import triton
from matplotlib.figure import Figure

from tmm_course.ipython import current_shell
from tmm_course.kernels.matmul import KLoopFrames
from tmm_course.kernels.strides import layouts, stride_picture
from tmm_course.kernels.tile_fill import run_tile_fill
from tmm_course.viz.kloop import frame_figure
from tmm_course.viz.strides import strides_figure
from tmm_course.viz.tiles import ownership_figure

POWERS_OF_TWO = [1, 2, 4, 8, 16, 32, 64]
# the explorer draws at most this many programs: each redraw relaunches the kernels on the
# interpreter (1x1 tiles on 64x64, 4096 programs, took 41 s a redraw) and past it the picture
# is too dense to read
MAX_PROGRAMS = 128
PRERENDER_ENV = "TMM_PRERENDER_WIDGETS"


def prerendering() -> bool:
    """True where the widgets draw their pictures ahead (the course's web pages)."""
    return os.environ.get(PRERENDER_ENV) == "1"


def _figure_output(controls: dict[str, widgets.Widget], draw: Callable) -> widgets.Output:
    """An output area showing ``draw(**values)``, redrawn whenever a control changes.

    The picture is put into the Output widget's ``outputs`` from the kernel side, never by
    ``display()`` inside ``with out:`` (what ``interactive_output`` does). For a captured display,
    a batch runner (nbconvert, papermill, nbclient) standing in for the Output widget sends a
    message on the kernel's shell socket while it waits on that socket for the cell's reply; on
    a busy machine the reply then, now and then, went unread until the cell's timeout (measured
    with nbclient 0.11 and pyzmq 27). Set from the kernel, the runner only listens."""
    out = widgets.Output()

    def redraw(_change: object = None) -> None:
        out.outputs = (_display_data(lambda: draw(**{k: c.value for k, c in controls.items()})),)

    for control in controls.values():
        control.observe(redraw, "value")
    redraw()
    return out


def _display_data(make: Callable[[], object]) -> dict:
    """``make()``'s picture as one notebook output (its traceback as text if it raised)."""
    try:
        shown = make()
    except Exception:
        return {"output_type": "stream", "name": "stderr", "text": traceback.format_exc()}
    if isinstance(shown, str):
        return {"output_type": "stream", "name": "stdout", "text": shown + "\n"}
    shell = current_shell()
    if shell is None:
        return {"output_type": "display_data", "data": {"text/plain": repr(shown)}, "metadata": {}}
    data, metadata = shell.display_formatter.format(shown)
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def _redraw_on_change(
    controls: dict[str, widgets.Widget], draw: Callable, ahead: dict[str, list]
) -> widgets.VBox | Prerendered:
    """The controls over a redrawn picture; when prerendering, the pictures for ``ahead``'s
    values (a bounded list per control, its current value among them) drawn ahead instead."""
    if prerendering():
        return prerender(controls, draw, ahead)
    return widgets.VBox([widgets.HBox(list(controls.values())), _figure_output(controls, draw)])


@dataclasses.dataclass(frozen=True)
class Prerendered:
    """A widget's pictures drawn ahead, shown as HTML whose sliders swap them in the browser."""

    controls: list[tuple[str, list]]  # (label, values) per control
    start: list[int]  # the value index each control starts at
    frames: list[dict]  # {"image": base64 PNG} or {"text": ...}
    index: dict[str, int]  # "i,j,..." (value indexes) -> frame
    play: bool = False  # a play button stepping the first control

    def __repr__(self) -> str:
        shape = " x ".join(f"{label} ({len(values)})" for label, values in self.controls)
        return f"<{len(self.frames)} pictures drawn ahead for {shape}>"

    def _repr_html_(self) -> str:
        rows = []
        for position, ((label, values), at) in enumerate(
            zip(self.controls, self.start, strict=True)
        ):
            shown = html.escape(str(values[at]))
            rows.append(
                f'<label class="tmm-control">{html.escape(label)} '
                f'<input type="range" min="0" max="{len(values) - 1}" step="1" value="{at}" '
                f'data-control="{position}" aria-label="{html.escape(label)}"> '
                f"<output>{shown}</output></label>"
            )
        if self.play:
            rows.insert(0, '<button type="button" class="tmm-play">play</button>')
        data = {"values": [[str(v) for v in values] for _, values in self.controls],
                "labels": [label for label, _ in self.controls],
                "frames": self.frames, "index": self.index}  # fmt: skip
        payload = json.dumps(data).replace("</", "<\\/")
        count = len(self.frames)
        return (
            '<div class="tmm-prerendered">'
            f'<div class="tmm-controls">{"".join(rows)}</div>'
            '<div class="tmm-picture"></div>'
            f'<p class="tmm-ahead">{count} pictures, drawn ahead by the kernels for the values '
            "on these sliders; in the notebook every value is drawn live.</p>"
            f'<script type="application/json" class="tmm-frames">{payload}</script>'
            f"<script>{_PRERENDERED_JS}</script></div>"
        )


# finds its own block, shows the picture for the sliders' values, swaps it as they move
_PRERENDERED_JS = """(function () {
  const root = document.currentScript.parentElement;
  const data = JSON.parse(root.querySelector('script.tmm-frames').textContent);
  const sliders = [...root.querySelectorAll('input[data-control]')];
  const picture = root.querySelector('.tmm-picture');
  function show() {
    const at = sliders.map(s => +s.value);
    sliders.forEach((s, i) => { s.nextElementSibling.textContent = data.values[i][at[i]]; });
    const frame = data.frames[data.index[at.join(',')]];
    const alt = data.labels.map((l, i) => l + ' = ' + data.values[i][at[i]]).join(', ');
    picture.replaceChildren();
    if (frame.image) {
      const img = document.createElement('img');
      img.src = 'data:image/png;base64,' + frame.image;
      img.alt = 'the picture for ' + alt;
      img.style.maxWidth = '100%';
      picture.appendChild(img);
    } else {
      const pre = document.createElement('pre');
      pre.textContent = frame.text;
      picture.appendChild(pre);
    }
  }
  sliders.forEach(s => s.addEventListener('input', show));
  const play = root.querySelector('.tmm-play');
  if (play) {
    let timer = null;
    play.addEventListener('click', () => {
      if (timer) { clearInterval(timer); timer = null; play.textContent = 'play'; return; }
      play.textContent = 'pause';
      timer = setInterval(() => {
        const s = sliders[0];
        s.value = (+s.value + 1) % (+s.max + 1);
        show();
      }, 1200);
    });
  }
  show();
})();"""


def prerender(
    controls: dict[str, widgets.Widget], draw: Callable, ahead: dict[str, list]
) -> Prerendered:
    """Draw ``draw(**values)`` for every combination of ``ahead``'s values, one list per control
    (its current value added if missing), each picture once."""
    names = list(controls)
    values = []
    for name in names:
        chosen = list(ahead[name])
        if controls[name].value not in chosen:
            chosen = sorted([*chosen, controls[name].value])
        values.append(chosen)
    frames: list[dict] = []
    seen: dict[str, int] = {}
    index = {}
    for at in itertools.product(*(range(len(v)) for v in values)):
        chosen = {name: values[k][i] for k, (name, i) in enumerate(zip(names, at, strict=True))}
        frame = _frame(lambda chosen=chosen: draw(**chosen))
        key = json.dumps(frame, sort_keys=True)
        if key not in seen:
            seen[key] = len(frames)
            frames.append(frame)
        index[",".join(map(str, at))] = seen[key]
    start = [v.index(controls[n].value) for n, v in zip(names, values, strict=True)]
    labels = [controls[n].description or n for n in names]
    return Prerendered(list(zip(labels, values, strict=True)), start, frames, index)


def _frame(make: Callable[[], object]) -> dict:
    """``make()``'s picture as a PNG (its text, or its traceback, if it gave none)."""
    try:
        shown = make()
    except Exception:
        return {"text": traceback.format_exc()}
    if isinstance(shown, Figure):
        buffer = io.BytesIO()
        shown.savefig(buffer, format="png", bbox_inches="tight")
        return {"image": base64.b64encode(buffer.getvalue()).decode("ascii")}
    return {"text": str(shown)}


def tile_fill_explorer(
    m: int = 10, n: int = 13, block_m: int = 4, block_n: int = 8, max_size: int = 64
) -> widgets.VBox | Prerendered:
    """Sliders for M, N, BLOCK_M, BLOCK_N; each change relaunches the lesson-1 kernels."""
    controls = {
        "m": widgets.IntSlider(value=m, min=1, max=max_size, description="M"),
        "n": widgets.IntSlider(value=n, min=1, max=max_size, description="N"),
        "block_m": widgets.Dropdown(options=POWERS_OF_TWO, value=block_m, description="BLOCK_M"),
        "block_n": widgets.Dropdown(options=POWERS_OF_TWO, value=block_n, description="BLOCK_N"),
    }
    for c in controls.values():
        c.continuous_update = False
        c.layout.width = "230px"
    ahead = {"m": [4, 10, 16], "n": [8, 13, 16], "block_m": [4, 8], "block_n": [4, 8]}
    return _redraw_on_change(controls, _ownership_or_refusal, ahead)


def _ownership_or_refusal(m: int, n: int, block_m: int, block_n: int) -> object:
    """The ownership picture, or a sentence saying why a grid of that many programs is not drawn."""
    programs = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    if programs > MAX_PROGRAMS:
        return (
            f"{m}x{n} in {block_m}x{block_n} tiles is {programs} programs; the explorer draws at "
            f"most {MAX_PROGRAMS} (more is slow on the interpreter and too small to read). "
            "Pick larger blocks or a smaller M or N."
        )
    return ownership_figure(run_tile_fill(m, n, block_m, block_n))


def strides_explorer(m: int = 4, n: int = 6) -> widgets.VBox | Prerendered:
    """Pick a layout and an element; the strided-copy kernel finds where it lives."""
    views = layouts(m, n)
    controls = {
        "name": widgets.Dropdown(options=list(views), description="layout"),
        "i": widgets.IntSlider(value=1, min=0, max=m - 1, description="i"),
        "j": widgets.IntSlider(value=2, min=0, max=n - 1, description="j"),
    }
    ahead = {"name": list(views), "i": sorted({0, 1, m - 1}), "j": sorted({0, 2, n - 1})}
    return _redraw_on_change(
        controls, lambda name, i, j: strides_figure(stride_picture(name, views[name]), i, j), ahead
    )


def kloop_player(a: object, b: object, frames: KLoopFrames) -> widgets.VBox | Prerendered:
    """Play / step through the K-loop frames that the kernel stored."""
    play = widgets.Play(value=0, min=0, max=frames.steps - 1, interval=1200, description="play")
    step = widgets.IntSlider(value=0, min=0, max=frames.steps - 1, description="K step")
    widgets.jslink((play, "value"), (step, "value"))
    draw = lambda step: frame_figure(a, b, frames, step)
    if prerendering():
        ahead = prerender({"step": step}, draw, {"step": list(range(frames.steps))})
        return dataclasses.replace(ahead, play=True)
    out = _figure_output({"step": step}, draw)
    return widgets.VBox([widgets.HBox([play, step]), out])


def roofline_lab(intensity: float = 8.0, bandwidth: float = 80.0) -> widgets.VBox | Prerendered:
    """Sliders for intensity and bandwidth under the lab's 1,000 GFLOP/s ceiling."""
    from tmm_course.perf import roofline
    from tmm_course.viz.making_fast import roofline_figure

    controls = {
        "intensity": widgets.FloatLogSlider(value=intensity, base=2, min=-2, max=7, step=0.25,
                                            description="FLOP/byte"),
        "bandwidth": widgets.FloatSlider(value=bandwidth, min=10, max=400, step=10,
                                         description="GB/s"),
    }  # fmt: skip
    for c in controls.values():
        c.continuous_update = False

    def draw(intensity: float, bandwidth: float) -> object:
        rate = roofline.attainable(intensity, bandwidth)
        label = f"{rate:.0f} GFLOP/s ({roofline.bound(intensity, bandwidth)} bound)"
        peak = roofline.SYNTHETIC_PEAK_GFLOPS
        title = f"compute ceiling {peak:g} GFLOP/s, bandwidth {bandwidth:g} GB/s"
        return roofline_figure(peak, bandwidth, {label: (intensity, rate)}, None, title, "GFLOP/s")

    ahead = {"intensity": [2.0**e for e in range(-2, 8)], "bandwidth": [40.0, 80.0, 160.0, 320.0]}
    return _redraw_on_change(controls, draw, ahead)


def group_m_explorer(
    grid_m: int = 32, grid_n: int = 32, in_flight: int = 132, strip_mb: float = 1.0,
    l2_mb: float = 60.0,
) -> widgets.VBox | Prerendered:  # fmt: skip
    """GROUP_M in, the launch order the kernel computes out: the first wave, and the MB of
    strips of A and B each wave reads, against L2."""
    from tmm_course.kernels.launch_order import launch_order
    from tmm_course.viz.making_fast import wave_figure

    controls = {
        "group_m": widgets.SelectionSlider(options=[1, 2, 4, 8, 16, 32], value=8,
                                           description="GROUP_M"),
        "in_flight": widgets.IntSlider(value=in_flight, min=8, max=4 * in_flight, step=4,
                                       description="in flight"),
    }  # fmt: skip
    for c in controls.values():
        c.continuous_update = False

    def draw(group_m: int, in_flight: int) -> object:
        return wave_figure(launch_order(grid_m, grid_n, group_m), in_flight, strip_mb, l2_mb)

    ahead = {
        "group_m": [1, 2, 4, 8, 16, 32],
        "in_flight": [in_flight // 2, in_flight, 2 * in_flight],
    }
    return _redraw_on_change(controls, draw, ahead)


def waves_explorer(m: int = 4096, n: int = 4096, sms: int = 132) -> widgets.VBox | Prerendered:
    """M, N and the tile in; tiles, waves and the last wave's share of the SMs out."""
    from tmm_course.perf.waves import waves
    from tmm_course.viz.making_fast import waves_figure

    sizes = [256 * i for i in range(1, 33)]
    controls = {
        "m": widgets.SelectionSlider(options=sizes, value=m, description="M"),
        "n": widgets.SelectionSlider(options=sizes, value=n, description="N"),
        "block_m": widgets.SelectionSlider(options=[64, 128, 256], value=128,
                                           description="BLOCK_M"),
        "block_n": widgets.SelectionSlider(options=[64, 128, 256], value=256,
                                           description="BLOCK_N"),
    }  # fmt: skip
    for c in controls.values():
        c.continuous_update = False

    def draw(m: int, n: int, block_m: int, block_n: int) -> object:
        return waves_figure(waves(m, n, block_m, block_n, sms))

    ahead = {"m": [1536, 4096, 8192], "n": [1536, 4096, 8192], "block_m": [128, 256],
             "block_n": [128, 256]}  # fmt: skip
    return _redraw_on_change(controls, draw, ahead)
