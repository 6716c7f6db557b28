"""The course as a learner meets it: JupyterLab in headless Chromium, every cell run, the
pictures and widgets on screen, and a slider or the K-loop player redrawing the figure
(lessons 1, 4 and 6).

Needs Debian's chromium and Playwright (installed by `make test`); skipped without them, except
where TMM_REQUIRE_BROWSER=1 (CI) makes their absence a failure. Screenshots go to
artifacts/screenshots/.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import skip_for_missing
from lab import ROOT, TOKEN, jupyterlab

# TMM_CHROMIUM names another browser binary (the tests point it at a missing one)
CHROMIUM = os.environ.get("TMM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RUN_TIMEOUT_MS = 180_000


def _need_browser():
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (make test installs it: pip install -e '.[test]')")
    if not Path(CHROMIUM).exists():
        missing.append(f"chromium at {CHROMIUM} (sudo apt install chromium)")
    if missing:
        message = "the browser test needs " + " and ".join(missing)
        if os.environ.get("TMM_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        skip_for_missing(" and ".join(missing))


@pytest.fixture(scope="module")
def browser():
    _need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


def open_and_run(browser, base: str, notebook: str):
    """Open a notebook in JupyterLab, run all cells, wait until every cell has finished."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{base}/lab/tree/notebooks/{notebook}?reset&token={TOKEN}")
    page.wait_for_function(
        "() => window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000
    )
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_function(  # the kernel is up: the status bar says Idle
        "() => document.body.innerText.includes('| Idle')", timeout=90_000
    )
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    cells = json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]
    code_cells = sum(c["cell_type"] == "code" for c in cells)
    # run in order on a fresh kernel, the last cell's prompt reads [code_cells]; hidden
    # (collapsed) solution cells show no prompt
    page.wait_for_function(
        """n => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                      .map(x => x.textContent);
                  return p.length > 0 && p.every(t => /\\[\\d+\\]/.test(t))
                      && Math.max(...p.map(t => +t.match(/\\d+/)[0])) === n; }""",
        arg=code_cells,
        timeout=RUN_TIMEOUT_MS,
    )
    return page


@contextlib.contextmanager
def lesson(browser, tmp_path, notebook: str, env: dict | None = None):
    """A course server of our own with ``notebook`` open and run in it; closed afterwards."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with jupyterlab(tmp_path, env) as base:
        page = open_and_run(browser, base, notebook)
        try:
            yield page
        finally:
            page.close()


def cell_with(page, text: str):
    """The code cell whose source contains ``text``."""
    cell = page.locator(".jp-CodeCell", has=page.locator(".jp-InputArea", has_text=text)).first
    cell.scroll_into_view_if_needed()
    return cell


def assert_no_errors(page):
    errors = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    texts = [t for t in errors.all_inner_texts() if "Error" in t or "Traceback" in t]
    assert not texts, f"error output on the page: {texts[0][:500]}"


def figure_src(cell) -> str:
    image = cell.locator(".jp-OutputArea-output img").last
    image.wait_for(timeout=60_000)
    return image.get_attribute("src")


def wait_for_new_figure(page, cell, before: str):
    page.wait_for_function(
        """([cell, before]) => { const imgs = cell.querySelectorAll('.jp-OutputArea-output img');
               return imgs.length && imgs[imgs.length - 1].getAttribute('src') !== before; }""",
        arg=[cell.element_handle(), before],
        timeout=60_000,
    )


def press_slider(page, slider, times: int = 2):
    """Move an ipywidgets slider with the keyboard, as a learner would."""
    handle = slider.locator(".noUi-handle")
    handle.focus()
    for _ in range(times):
        page.keyboard.press("ArrowRight")


def check_tile_fill(page, shot: str):
    """Lesson 1 as a learner sees it; raises AssertionError on anything missing."""
    assert_no_errors(page)
    heatmap = cell_with(page, "ownership_figure(data)")
    assert heatmap.locator(".jp-OutputArea-output img").count() == 1, "no ownership heatmap"
    explorer = cell_with(page, "tile_fill_explorer(")
    sliders = explorer.locator(".widget-slider")
    assert sliders.count() == 2, "the M and N sliders are not rendered"
    assert explorer.locator(".widget-dropdown").count() == 2, "no BLOCK_M / BLOCK_N dropdowns"
    before = figure_src(explorer)
    press_slider(page, sliders.first)
    wait_for_new_figure(page, explorer, before)
    page.screenshot(path=str(SCREENSHOTS / shot), full_page=False)


def test_lesson_1_sliders_redraw_the_ownership_heatmap(browser, tmp_path):
    with lesson(browser, tmp_path, "01_tile_fill.ipynb") as page:
        check_tile_fill(page, "01_tile_fill_after_slider.png")


def test_lesson_4_player_steps_the_k_loop(browser, tmp_path):
    with lesson(browser, tmp_path, "04_tiled_matmul.ipynb") as page:
        assert_no_errors(page)
        frames = cell_with(page, "frames_figure(a_small, b_small, frames)")
        assert frames.locator(".jp-OutputArea-output img").count() == 1
        player = cell_with(page, "kloop_player(")
        assert player.locator(".widget-play").count() == 1, "the play widget is missing"
        assert player.locator(".widget-play button").count() >= 3, "no play/pause/stop"
        before = figure_src(player)
        press_slider(page, player.locator(".widget-slider").first, times=1)
        wait_for_new_figure(page, player, before)
        page.screenshot(path=str(SCREENSHOTS / "04_kloop_player_step_1.png"))


def test_lesson_6_roofline_lab_and_stored_results_render(browser, tmp_path):
    with lesson(browser, tmp_path, "06_making_it_fast.ipynb") as page:
        assert_no_errors(page)
        images = page.locator(".jp-OutputArea-output img")
        assert images.count() >= 7, f"only {images.count()} figures rendered"
        lab = cell_with(page, "roofline_lab(")
        sliders = lab.locator(".widget-slider")
        assert sliders.count() == 2, "the intensity and bandwidth sliders are not rendered"
        before = figure_src(lab)
        press_slider(page, sliders.first)
        wait_for_new_figure(page, lab, before)
        page.screenshot(path=str(SCREENSHOTS / "06_roofline_lab_after_slider.png"))


def test_the_test_fails_when_widgets_are_broken(browser, tmp_path):
    """Plant a break, the JupyterLab widget manager switched off, and the lesson-1 check fails."""
    config = tmp_path / "config"
    (config / "labconfig").mkdir(parents=True)
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyter-widgets/jupyterlab-manager": True}})
    )
    with lesson(
        browser, tmp_path, "01_tile_fill.ipynb", {"JUPYTER_CONFIG_DIR": str(config)}
    ) as page:
        with pytest.raises(AssertionError, match="sliders are not rendered"):
            check_tile_fill(page, "01_tile_fill_broken_widgets.png")
        page.screenshot(path=str(SCREENSHOTS / "01_tile_fill_broken_widgets.png"))


def test_running_the_course_in_the_browser_leaves_the_notebooks_untouched(browser, tmp_path):
    before = (ROOT / "notebooks" / "02_broadcasting.ipynb").read_bytes()
    with lesson(browser, tmp_path, "02_broadcasting.ipynb") as page:
        page.wait_for_timeout(3000)
    assert (ROOT / "notebooks" / "02_broadcasting.ipynb").read_bytes() == before


def test_lesson_7_failing_check_shows_where_the_kernel_read_and_wrote(browser, tmp_path):
    """On the interpreter a failing check draws the learner's kernel: here lesson 9's kernel
    without a K mask, its stray loads marked in red."""
    import tmm_course

    if tmm_course.BACKEND != "interpreter":
        pytest.skip("the picture is drawn from the interpreter's record of loads and stores")
    with lesson(browser, tmp_path, "09_pitfalls.ipynb") as page:
        assert_no_errors(page)
        check = cell_with(page, "check_matmul(launcher(pitfalls.no_k_mask_kernel)")
        picture = check.locator(".tmm-check img[alt='where the kernel read and wrote']")
        picture.wait_for(timeout=60_000)
        assert picture.evaluate("img => img.naturalWidth") > 200, "the picture did not load"
        assert "out_of_bounds_read" in check.inner_text()  # the loads run past K
        picture.scroll_into_view_if_needed()
        check.screenshot(path=str(SCREENSHOTS / "07_failing_check_picture.png"))
