"""Build the course's web pages into build/site:  python docs/build.py [--jobs N]

The pages are made from the student copy of every notebook (``tmm_course.teach.release``: no
solution cells), each with a line saying where its outputs were made and links to open it in
Colab or download it, its Colab install cell folded behind a "show code" toggle. Every notebook
is first run on Triton's CPU interpreter (nbclient, kernels over local sockets, the widgets
drawing their pictures ahead; one line per lesson as it finishes), then Sphinx with myst-nb
renders the outputs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from importlib.metadata import version
from pathlib import Path

from tmm_course.teach.colab import INSTALL_TAG, NOTEBOOKS, colab_url, notebook_title
from tmm_course.teach.release import student_notebook
from tmm_course.viz.widgets import PRERENDER_ENV

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs"
EXECUTED = "jupyter_execute"  # beside the site: each lesson as it ran, outputs and all
# myst-nb's tag: the cell shows as a "Show code cell source" toggle, its output (none: the cell
# does nothing off Colab) in place
FOLDED = "hide-input"


def code_version() -> str:
    """The checkout's commit (``-dirty`` with uncommitted changes), or the package's version."""
    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
            text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return f"version {version('tmm-course')}"


def provenance() -> str:
    """Where and when every output on the pages is made: this build, on the interpreter."""
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    return (
        f"Every output on this page was made on {today} by running this notebook on Triton "
        f"{version('triton')}'s CPU interpreter (torch {version('torch')}, Python "
        f"{platform.python_version()}), from tmm-course at {code_version()}. Measurements "
        "from a GPU are labelled with the device they were made on where they appear."
    )


def header_cell(name: str, made: str) -> dict:
    """The cell under a lesson's title: where its outputs come from, Colab and Download."""
    links = (
        f'<div class="tmm-links"><a href="{colab_url(f"{NOTEBOOKS}/{name}")}">Open in Colab</a>'
        f'<a href="notebooks/{name}" download>Download notebook</a></div>'
    )
    return {
        "cell_type": "markdown",
        "id": "where-made",
        "metadata": {},
        "source": f'{links}\n\n<p class="tmm-made">{made}</p>\n',
    }


def fold_install_cell(notebook: dict) -> None:
    """Fold the Colab install cell behind myst-nb's "show code" toggle."""
    for cell in notebook["cells"]:
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if INSTALL_TAG in tags and FOLDED not in tags:
            tags.append(FOLDED)


def what_each_teaches() -> dict[str, str]:
    """Each lesson's line of the README's lesson table (``| [stem](notebooks/stem.ipynb) |
    what you learn |``), by notebook stem."""
    lines = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        found = re.match(r"\| \[(\w+)\]\(notebooks/\1\.ipynb\) \| (.+) \|$", line)
        if found:
            lines[found.group(1)] = found.group(2)
    return lines


def lesson_list(lessons: list[Path]) -> str:
    """The index's list: one line per lesson, its title linked, then what it teaches."""
    teaches = what_each_teaches()
    return "\n".join(
        f"- {{doc}}`{notebook_title(p)} <{p.stem}>`"
        + (f": {teaches[p.stem]}" if p.stem in teaches else "")
        for p in lessons
    )


def write_sources(source: Path, notebooks: Path) -> list[Path]:
    """Sphinx's source folder: the settings, the index, and each lesson's student copy with its
    header cell and its install cell folded; the student copies as they are go to
    _extra/notebooks for download. The lessons' paths in ``source``."""
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(SITE, source, ignore=shutil.ignore_patterns("build.py", "__pycache__"))
    (source / "_extra" / "notebooks").mkdir(parents=True)
    made = provenance()
    lessons = []
    for path in sorted(notebooks.glob("*.ipynb")):
        student = student_notebook(json.loads(path.read_text(encoding="utf-8")))
        text = json.dumps(student, indent=1, ensure_ascii=False) + "\n"
        (source / "_extra" / "notebooks" / path.name).write_text(text, encoding="utf-8")
        student["cells"].insert(1, header_cell(path.name, made))
        fold_install_cell(student)
        (source / path.name).write_text(json.dumps(student, indent=1), encoding="utf-8")
        lessons.append(source / path.name)
    index = source / "index.md"
    text = index.read_text(encoding="utf-8").replace("{lessons}", lesson_list(lessons))
    index.write_text(text, encoding="utf-8")
    return lessons


def run_lesson(path: Path, sockets: Path, timeout: int) -> float:
    """Run the notebook at ``path`` in place (outputs stored in it) in a fresh kernel that
    talks over local sockets (no TCP, so ipykernel has no eavesdropping to warn about); its
    seconds. A cell that raises stops it with the cell's error."""
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    start = time.monotonic()
    notebook = nbformat.read(path, as_version=4)
    kernel = Config({"KernelManager": {"transport": "ipc", "ip": str(sockets / path.stem)}})
    NotebookClient(notebook, timeout=timeout, kernel_name="python3", config=kernel,
                   resources={"metadata": {"path": str(path.parent)}}).execute()  # fmt: skip
    nbformat.write(notebook, path)
    return time.monotonic() - start


def run_lessons(lessons: list[Path], jobs: int, timeout: int) -> None:
    """Run every lesson, ``jobs`` at a time, printing one line per lesson as it finishes."""
    os.environ["TMM_BACKEND"] = "interpreter"  # the kernels inherit this process's environment
    os.environ[PRERENDER_ENV] = "1"
    # the notebooks' kernel is this Python's (its kernelspec runs the first python on PATH)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    print(f"running {len(lessons)} lessons on Triton's CPU interpreter, {jobs} at a time ...",
          flush=True)  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="tmm-site-") as sockets,
        ThreadPoolExecutor(jobs) as pool,
    ):
        running = {pool.submit(run_lesson, p, Path(sockets), timeout): p for p in lessons}
        for done, future in enumerate(as_completed(running), start=1):
            name = running[future].stem
            try:
                seconds = future.result()
            except Exception as error:
                pool.shutdown(cancel_futures=True)  # those not started; the rest end first
                raise LessonFailed(f"{name}: {error}") from None
            print(f"[{done}/{len(lessons)}] {name} ran in {seconds:.0f} s", flush=True)


class LessonFailed(RuntimeError):
    """A lesson's cell raised while the site was built."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the course's web pages.")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1,
        help="lessons run at once (default: one per core)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may run")
    args = parser.parse_args(argv)
    source = args.out.parent / "site-source"
    lessons = write_sources(source, ROOT / "notebooks")
    shutil.rmtree(args.out, ignore_errors=True)
    start = time.monotonic()
    try:
        run_lessons(lessons, args.jobs, args.timeout)
    except LessonFailed as error:
        print(f"error: the site did not build: a lesson failed: {error}", file=sys.stderr)
        return 1
    executed = args.out.parent / EXECUTED
    shutil.rmtree(executed, ignore_errors=True)
    executed.mkdir(parents=True)
    for lesson in lessons:
        shutil.copy(lesson, executed / lesson.name)
    print("rendering the pages (Sphinx, myst-nb) ...", flush=True)
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going",
               "-d", str(source / "_doctrees"), str(source), str(args.out)]  # fmt: skip
    built = subprocess.run(command, check=False)
    if built.returncode:
        print(f"error: the site did not build (sphinx exited {built.returncode})", file=sys.stderr)
        return built.returncode
    print(f"wrote {args.out / 'index.html'} in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
