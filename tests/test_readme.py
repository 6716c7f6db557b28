"""The README lists every notebook and its two commands exist."""

from __future__ import annotations

import re

from conftest import NOTEBOOKS, ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_notebook_is_linked_in_the_lesson_map():
    for path in NOTEBOOKS:
        assert f"(notebooks/{path.name})" in README, f"README does not link {path.name}"


def test_no_lesson_is_marked_in_preparation_once_it_exists():
    for path in NOTEBOOKS:
        assert f"{path.stem} *(in preparation)*" not in README


def test_the_two_commands_are_make_targets():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("course", "test"):
        assert f"make {target}" in README
        assert re.search(rf"^{target}:", makefile, re.MULTILINE)


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_layout_names_every_folder_and_module_of_the_package():
    layout = README[README.index("## Layout") :]
    package = ROOT / "tmm_course"
    for folder in sorted(p for p in package.iterdir() if (p / "__init__.py").exists()):
        assert f"  {folder.name}/" in layout, f"README Layout misses tmm_course/{folder.name}/"
    for module in sorted(package.rglob("*.py")):
        if module.name != "__init__.py":
            assert module.stem in layout, f"README Layout misses {module.relative_to(ROOT)}"


def test_every_path_the_readme_names_exists():
    paths = re.findall(r"`((?:tmm_course|tests|tools|\.ci)/[\w./-]+\.(?:py|sh|json|txt))`", README)
    assert "tmm_course/teach/colab.py" in paths
    for path in paths:
        assert (ROOT / path).exists(), f"README names {path}, which does not exist"


def test_each_pinned_version_the_ci_table_names_is_the_jobs_pin():
    for job in ("colab", "oldest"):
        row = next(line for line in README.splitlines() if line.startswith(f"| {job} |"))
        pins = dict(
            line.split("==") for line in (ROOT / ".ci" / "pins" / f"{job}.txt").read_text().split()
            if "==" in line
        )  # fmt: skip
        named = re.findall(r"([a-z]+) (\d+\.\d+(?:\.\d+)?)", row)
        assert len(named) >= 2, f"the {job} row names no versions"
        for package, version in named:
            assert pins.get(package) == version, f"README: {job} has {package} {version}"


def test_the_remote_port_is_the_makefiles():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    ports = set(re.findall(r"--port[ =](\d+)", README + makefile))
    assert len(ports) == 1, f"README and Makefile name different ports: {sorted(ports)}"


def test_the_cpu_hint_is_given_for_every_command_that_creates_the_venv():
    for target in ("course", "test"):
        assert f"TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu make {target}" in README
