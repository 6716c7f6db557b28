"""The student copy: no solution survives, nothing else is lost, the input is never touched,
and it still runs with every check saying not_implemented (the site build runs every lesson's:
tests/test_site.py; papermill the first lesson's and the homework's:
tests/test_batch_execution.py)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import NOTEBOOKS, ROOT

from tmm_course.teach.release import ReleaseError, is_solution, main, write_student_copy


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    target = tmp_path_factory.mktemp("student")
    write_student_copy(ROOT / "notebooks", target)
    return target


def cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def solution_lines(path):
    """Distinctive lines of the solution cells: ones no other cell of the notebook contains."""
    all_cells = cells(path)
    others = "\n".join("".join(c["source"]) for c in all_cells if not is_solution(c))
    lines = set()
    for cell in filter(is_solution, all_cells):
        for line in "".join(cell["source"]).splitlines():
            if len(line.strip()) > 20 and line.strip() not in others:
                lines.add(line.strip())
    return lines


def test_every_lesson_with_an_exercise_has_solutions():
    with_checks = [p for p in NOTEBOOKS if '"check:' in p.read_text(encoding="utf-8")]
    assert len(with_checks) >= 5
    for path in with_checks:
        assert any(is_solution(c) for c in cells(path)), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_no_solution_text_survives(student, path):
    copy = (student / path.name).read_text(encoding="utf-8")
    lines = solution_lines(path)
    leaked = [line for line in lines if line in copy]
    assert not leaked, leaked[:3]
    assert not any(is_solution(c) for c in cells(student / path.name))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_other_cell_is_kept(student, path):
    kept = ["".join(c["source"]) for c in cells(path) if not is_solution(c)]
    assert ["".join(c["source"]) for c in cells(student / path.name)] == kept


def test_solution_outputs_and_attachments_go_with_the_cell():
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"tags": ["solution"]},
                "source": "secret = 42",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "secret 42"}],
                "execution_count": 3,
            },
            {
                "cell_type": "code",
                "metadata": {},
                "source": "x = 1",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "secret 42"}],
                "execution_count": 4,
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    from tmm_course.teach.release import student_notebook

    text = json.dumps(student_notebook(notebook))
    assert "secret" not in text


def test_a_hidden_solution_form_without_the_tag_is_still_removed():
    cell = {
        "cell_type": "code",
        "source": "# @title Solution\nx = 1",
        "metadata": {"cellView": "form"},
    }
    assert is_solution(cell)
    assert not is_solution(
        {"cell_type": "code", "source": "# @title Setup", "metadata": {"cellView": "form"}}
    )


@pytest.mark.parametrize("where", ["same", "inside", "parent"])
def test_refuses_to_write_over_its_input(tmp_path, where):
    source = tmp_path / "course" / "notebooks"
    source.mkdir(parents=True)
    (source / "a.ipynb").write_text(NOTEBOOKS[0].read_text(encoding="utf-8"))
    target = {"same": source, "inside": source / "student", "parent": tmp_path / "course"}[where]
    before = (source / "a.ipynb").read_text()
    with pytest.raises(ReleaseError, match="overlaps the input"):
        write_student_copy(source, target)
    assert (source / "a.ipynb").read_text() == before


def test_refuses_a_non_empty_target_without_force(tmp_path, capsys):
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("x")
    assert main([str(ROOT / "notebooks"), str(target)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main([str(ROOT / "notebooks"), str(target), "--force"]) == 0


def _make_student(*args: str) -> str:
    """The command ``make student`` would run (dry run; the venv taken as made)."""
    # --no-print-directory: under another make (CI's make test) it would add "Leaving directory"
    command = ["make", "-n", "--no-print-directory", "-o", ".venv/.installed-course", "student"]
    done = subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_student_passes_force_through_and_reruns_with_it(tmp_path):
    assert "--force" not in _make_student()
    command = _make_student("FORCE=1", f"STUDENT={tmp_path}").strip().splitlines()[-1]
    assert command.endswith(f"tmm_course.teach.release notebooks {tmp_path} --force")
    (tmp_path / "01_tile_fill.ipynb").write_text("{}")  # an earlier copy, re-run over
    argv = command.split("tmm_course.teach.release ")[1].split()
    assert main(argv) == 0 and main(argv[:2]) == 2  # FORCE=1 replaces; without, a clear no


def test_grades_and_submissions_stay_out_of_git():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["inbox/a.ipynb", "submissions/a.ipynb", "grades.csv"]
    done = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True,
                          text=True)  # fmt: skip
    assert done.stdout.split() == paths
