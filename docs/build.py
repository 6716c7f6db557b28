"""Build the course's web pages into build/site:  python docs/build.py [--jobs N]

The pages are made from the student copy of every notebook (``tmm_course.teach.release``: no
solution cells), each with a line saying where its outputs were made and links to open it in
Colab or download it. Sphinx with myst-nb runs every notebook on Triton's CPU interpreter, the
widgets drawing their pictures ahead.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from tmm_course.teach.colab import NOTEBOOKS, colab_url
from tmm_course.teach.release import student_notebook
from tmm_course.viz.widgets import PRERENDER_ENV

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs"


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


def write_sources(source: Path, notebooks: Path) -> None:
    """Sphinx's source folder: the settings, the index, and each lesson's student copy with its
    header cell; the student copies as they are go to _extra/notebooks for download."""
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(SITE, source, ignore=shutil.ignore_patterns("build.py", "__pycache__"))
    (source / "_extra" / "notebooks").mkdir(parents=True)
    made = provenance()
    for path in sorted(notebooks.glob("*.ipynb")):
        student = student_notebook(json.loads(path.read_text(encoding="utf-8")))
        text = json.dumps(student, indent=1, ensure_ascii=False) + "\n"
        (source / "_extra" / "notebooks" / path.name).write_text(text, encoding="utf-8")
        student["cells"].insert(1, header_cell(path.name, made))
        (source / path.name).write_text(json.dumps(student, indent=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the course's web pages.")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--jobs", default="auto", help="Sphinx's parallel jobs (default: auto)")
    args = parser.parse_args(argv)
    source = args.out.parent / "site-source"
    write_sources(source, ROOT / "notebooks")
    shutil.rmtree(args.out, ignore_errors=True)
    env = dict(os.environ, TMM_BACKEND="interpreter")
    env[PRERENDER_ENV] = "1"
    # the notebooks' kernel is this Python's (its kernelspec runs the first python on PATH)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    start = time.monotonic()
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going",
               "-j", args.jobs, "-d", str(source / "_doctrees"),
               str(source), str(args.out)]  # fmt: skip
    built = subprocess.run(command, env=env, check=False)
    if built.returncode:
        print(f"error: the site did not build (sphinx exited {built.returncode})", file=sys.stderr)
        return built.returncode
    print(f"wrote {args.out / 'index.html'} in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
