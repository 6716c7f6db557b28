"""The course's web pages (`make site`): built once from this checkout on the CPU, then read as
a learner reads them, in headless Chromium: every page loads without a console error, opens
with its lesson's title and first paragraph (the install cell folded), every image shows, every
pre-drawn widget swaps its picture when a slider moves, and no link inside the site is broken.
The build says one line per lesson and nothing from the kernels. Screenshots of lessons 0's
top, 1 and 4 go to artifacts/screenshots/.

The build runs once per test session, into a temporary folder (build/site is left alone); it
needs the `site` extra (Sphinx, myst-nb, the book theme), installed by `make test`.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from conftest import NOTEBOOKS, ROOT, skip_for_missing
from test_browser import CHROMIUM, FLAGS, SCREENSHOTS, _need_browser

from tmm_course.teach.colab import notebook_title

# the whole build on CI's two cores, every lesson executed: about 3 minutes when the machine is
# otherwise idle; the bound leaves room for the rest of `make test` running beside it
BUILD_BUDGET_S = 900
LESSONS = [path.stem for path in NOTEBOOKS]
SMART_QUOTES = {0x2019: "'", 0x201C: '"', 0x201D: '"'}  # Sphinx's typography, undone


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str | None]:
    """The site built from this checkout and what the build printed; TMM_SITE names one built
    already (make site's build/site), to read its pages without building them again."""
    if os.environ.get("TMM_SITE"):
        return Path(os.environ["TMM_SITE"]).resolve(), None
    for module in ("sphinx", "myst_nb", "sphinx_book_theme"):
        try:
            __import__(module)
        except ImportError:
            skip_for_missing(f"{module} (make test installs it: pip install -e '.[site]')")
    out = tmp_path_factory.mktemp("site") / "site"
    start = time.monotonic()
    built = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "build.py"), "--out", str(out)],
        capture_output=True, text=True, timeout=BUILD_BUDGET_S,
    )  # fmt: skip
    seconds = time.monotonic() - start
    said = built.stdout[-3000:] + built.stderr[-3000:]
    assert built.returncode == 0, f"the site did not build:\n{said}"
    print(f"site built in {seconds:.0f} s")
    return out, built.stdout + built.stderr


@pytest.fixture(scope="module")
def site(built) -> Path:
    return built[0]


@pytest.fixture(scope="module")
def served(site):
    """The site over HTTP on a loopback port, as GitHub Pages serves it."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def browser():
    _need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


def test_one_page_per_lesson_with_where_its_outputs_were_made(site):
    assert (site / "index.html").exists()
    for lesson in LESSONS:
        page = (site / f"{lesson}.html").read_text(encoding="utf-8")
        assert "CPU interpreter" in page and "from tmm-course at" in page, lesson
        assert "Open in Colab" in page and f'href="notebooks/{lesson}.ipynb"' in page, lesson
        assert 'class="cell_output' in page, f"{lesson} shows no output"


def test_the_build_says_one_line_per_lesson_and_no_kernel_warning(built):
    _, said = built
    if said is None:
        pytest.skip("TMM_SITE: a site built elsewhere, its output not seen")
    for lesson in LESSONS:
        lines = re.findall(rf"^\[\d+/{len(LESSONS)}\] {lesson} ran in \d+ s$", said, re.M)
        assert len(lines) == 1, f"{lesson}: {lines}\n{said[-2000:]}"
    assert "without encryption" not in said and "over TCP" not in said, said[-2000:]


def test_title_and_author_are_set_once_and_no_page_says_not_set(site):
    title = re.search(r"<title>(.*?)</title>", (site / "index.html").read_text()).group(1)
    assert title.count("Tiled matrix multiplication in Triton") == 1, title
    for page in site.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "not set" not in text, f"{page.name} says 'not set'"
        assert "the tmm-course authors" in text, f"{page.name}: no author in its footer"


def test_the_index_lists_each_lesson_in_one_line_with_what_it_teaches(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    items = re.findall(r"<li>(.*?)</li>", index, re.S)
    for path in NOTEBOOKS:
        (item,) = [i for i in items if f'href="{path.stem}.html"' in i and ":" in i]
        text = re.sub(r"<[^>]+>", "", item).strip()
        title = notebook_title(path)
        assert text.startswith(f"{title}: ") and len(text) > len(title) + 10, text


def test_every_lesson_ran_and_no_untouched_exercise_passed(site):
    """The build executed each lesson's student copy (myst-nb keeps the executed notebooks in
    jupyter_execute, beside the site): every check cell ran, and with the exercises untouched
    each says not_implemented."""
    from conftest import check_results

    for lesson in LESSONS:
        executed = nbformat.read(site.parent / "jupyter_execute" / f"{lesson}.ipynb", as_version=4)
        results = check_results(executed)
        assert results, f"{lesson}: no check cell ran"
        for name, result in results.items():
            assert not result["passed"], f"{lesson}: {name} passed with the exercise untouched"
            assert result["codes"] == ["not_implemented"], (lesson, name, result["codes"])


def test_no_solution_reaches_the_pages_or_the_downloads(site):
    from tmm_course.teach.release import is_solution

    for path in NOTEBOOKS:
        solutions = [c for c in json.loads(path.read_text())["cells"] if is_solution(c)]
        assert solutions, f"{path.name} has no solution cell to hide"
        page = (site / f"{path.stem}.html").read_text(encoding="utf-8")
        download = json.loads((site / "notebooks" / path.name).read_text())
        assert not any(is_solution(c) for c in download["cells"])
        for cell in solutions:
            # the line that defines the solution, e.g. `def solution_transpose(`
            defining = re.search(r"def (solution_\w+)", "".join(cell["source"]))
            if defining:
                assert defining.group(1) not in page, f"{path.stem} shows {defining.group(1)}"
        assert "@title Solution" not in page


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name) and tag in ("a", "link", "img", "script"):
                self.links.append(attrs[name])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_no_internal_link_is_broken(site):
    broken = []
    pages = sorted(site.glob("*.html"))  # the pages (_static holds the theme's templates)
    parsed = {path: _parse(path) for path in pages}
    for path, links in parsed.items():
        for link in links.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("data:", "mailto:")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.name}: {link}")
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if parts.fragment not in ids:
                    broken.append(f"{path.name}: {link} (no such anchor)")
    assert not broken, f"{len(broken)} broken links, e.g. {broken[:5]}"


def _open(browser, url: str):
    """A page and the errors it logs: console errors, uncaught exceptions, and every request
    that failed or was answered with an error (named by its URL; the browser's own request for
    /favicon.ico aside)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []

    def console(message) -> None:
        # a failed load is logged without its URL; the response or requestfailed names it
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    def response(answer) -> None:
        if answer.status >= 400 and not answer.url.endswith("/favicon.ico"):
            errors.append(f"{answer.status} for {answer.url}")

    page.on("console", console)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"failed to load {r.url}"))
    page.on("response", response)
    page.goto(url, wait_until="load")
    return page, errors


def _pictures(widget) -> str:
    image = widget.locator(".tmm-picture img")
    if image.count():
        return image.get_attribute("src")
    return widget.locator(".tmm-picture").inner_text()


@pytest.mark.parametrize("name", ["index", *LESSONS])
def test_every_page_loads_shows_its_images_and_moves_its_widgets(browser, served, name):
    page, errors = _open(browser, f"{served}/{name}.html")
    try:
        page.wait_for_load_state("networkidle")
        unseen = page.evaluate(
            """() => [...document.images]
                .filter(i => !(i.complete && i.naturalWidth > 0
                               && i.getBoundingClientRect().width > 0))
                .map(i => i.alt || i.src.slice(0, 80))"""
        )
        assert not unseen, f"images not shown: {unseen[:3]}"
        widgets = page.locator(".tmm-prerendered")
        for w in range(widgets.count()):
            widget = widgets.nth(w)
            sliders = widget.locator("input[type=range]")
            assert sliders.count() >= 1, "a pre-drawn widget without a slider"
            for s in range(sliders.count()):
                slider = sliders.nth(s)
                before = _pictures(widget)
                slider.focus()
                at_end = slider.evaluate("s => +s.value === +s.max")
                page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
                label = slider.get_attribute("aria-label")
                assert _pictures(widget) != before, f"moving {label} did not change the picture"
        assert not errors, f"console errors on {name}: {errors[:3]}"
    finally:
        page.close()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=LESSONS)
def test_a_lesson_page_opens_with_its_title_and_first_paragraph_not_code(browser, served, path):
    """The Colab install cell is folded behind a toggle: the page opens with the lesson's own
    words; the toggle shows the cell."""
    page, errors = _open(browser, f"{served}/{path.stem}.html")
    try:
        main = page.locator("main")
        text = main.inner_text().translate(SMART_QUOTES)
        first = next(
            c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"
        )
        paragraph = "".join(first["source"]).split("\n\n")[1].split()[:3]
        words = re.sub(r"[*`_]", "", " ".join(paragraph))
        toggle = main.locator("details.above-input summary").first
        assert toggle.inner_text().strip() == "Show code cell source"
        assert text.index(notebook_title(path)) < text.index(words) < text.index("Show code")
        assert "COURSE_URL" not in text, "the install cell shows its code"
        if path == NOTEBOOKS[0]:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"site_{path.stem}_top.png"))
        toggle.click()
        assert "COURSE_URL" in main.inner_text(), "the toggle does not show the install cell"
        assert not errors, errors[:3]
    finally:
        page.close()


@pytest.mark.parametrize(
    ("lesson", "widget_of"),
    [("01_tile_fill", "the tile explorer"), ("04_tiled_matmul", "the K-loop player")],
)
def test_a_learner_reads_lessons_1_and_4(browser, served, lesson, widget_of):
    """The whole page as a learner scrolls it, the widget moved; nothing asks for a kernel."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page, errors = _open(browser, f"{served}/{lesson}.html")
    try:
        text = page.locator("main").inner_text()
        for asks in ("needs a live kernel", "Needs a live kernel", "requires a kernel"):
            assert asks not in text, f"{lesson} says '{asks}'"
        assert "Error rendering" not in text and "Loading widget" not in text
        page.screenshot(path=str(SCREENSHOTS / f"site_{lesson}.png"), full_page=True)
        widget = page.locator(".tmm-prerendered").first
        widget.scroll_into_view_if_needed()
        before = _pictures(widget)
        widget.locator("input[type=range]").first.focus()
        page.keyboard.press("ArrowRight")
        assert _pictures(widget) != before, f"{widget_of} did not move"
        widget.screenshot(path=str(SCREENSHOTS / f"site_{lesson}_widget_moved.png"))
        assert not errors, errors[:3]
    finally:
        page.close()
