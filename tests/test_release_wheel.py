"""A release (CONTRIBUTING.md): one version, named by the changelog, pinned by every notebook's
Colab install cell and by colab_links.md, and a wheel that builds from the checkout."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import NOTEBOOKS, ROOT

import tmm_course
from tmm_course.teach import colab

VERSION = tmm_course.__version__


def test_the_version_is_set_in_one_place():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]")[1].split("\n[")[0]
    assert not re.search(r"^version\s*=", project, re.MULTILINE), "a second version in pyproject"
    assert 'dynamic = ["version"]' in project
    assert 'version = {attr = "tmm_course.__version__"}' in pyproject


def test_the_changelog_names_this_version_first():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    # what is merged but not yet released waits above it, under "## Unreleased"
    sections = [s for s in re.findall(r"^## (\S+)", changelog, re.MULTILINE) if s != "Unreleased"]
    assert sections and sections[0] == VERSION, f"CHANGELOG.md's newest section: {sections[:1]}"


def test_the_notebooks_and_their_links_pin_this_release():
    assert colab.RELEASE_TAG.removeprefix("v") == VERSION
    links = (ROOT / colab.LINKS_FILE).read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        install = next(c for c in cells if colab.INSTALL_TAG in c["metadata"].get("tags", []))
        assert f'COURSE_URL = "{colab.install_url()}"' in "".join(install["source"]), path.name
        assert f"/blob/{colab.REF}/notebooks/{path.name}" in links


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_wheel_builds_the_release_wheel(tmp_path):
    """The command ``make wheel`` runs (read from a dry run), into a folder of its own; offline
    (this environment's setuptools): a wheel of this version holding the package, its stored
    GPU measurements and nothing else."""
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "-o", ".venv/.installed-course", "wheel"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    assert dry.startswith(".venv/bin/python -m pip wheel --no-deps -w dist ")
    args = dry.split(" -m pip ")[1].replace("-w dist", f"-w {tmp_path}").split()
    built = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--no-build-isolation", "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name == f"tmm_course-{VERSION}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "tmm_course/__init__.py" in names and "tmm_course/teach/colab.py" in names
    assert any(re.match(r"tmm_course/perf/data/.+\.json$", n) for n in names)
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "docs/"))]
    metadata = zipfile.ZipFile(wheel).read(f"tmm_course-{VERSION}.dist-info/METADATA").decode()
    assert f"\nVersion: {VERSION}\n" in metadata
