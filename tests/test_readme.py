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
