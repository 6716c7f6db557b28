"""Batch grading: five kinds of submission, five right outcomes, within the time limit."""

from __future__ import annotations

import csv
import json
import time

import pytest
from conftest import ROOT

from tmm_course.teach.grade import exercises_of, main, rows_for
from tmm_course.teach.release import solved_notebook, student_notebook

HOMEWORK = ROOT / "notebooks" / "05_homework_transpose.ipynb"
LIMIT = 30


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def planted_bug(notebook):
    """The solved homework with Part 3's masks removed: wrong only at ragged edges."""
    notebook = solved_notebook(notebook)
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if "def transpose_kernel(" in source:
            cell["source"] = source.replace(", mask=mask)", ")")
    return notebook


def endless(notebook):
    notebook["cells"].insert(
        3,
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": "while True:\n    pass\n",
        },
    )
    return notebook


@pytest.fixture(scope="module")
def grades(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    course = load(HOMEWORK)
    (folder / "correct.ipynb").write_text(json.dumps(solved_notebook(course)))
    (folder / "untouched.ipynb").write_text(json.dumps(student_notebook(course)))
    (folder / "bug.ipynb").write_text(json.dumps(planted_bug(load(HOMEWORK))))
    (folder / "loop.ipynb").write_text(json.dumps(endless(student_notebook(course))))
    (folder / "corrupt.ipynb").write_text('{"cells": [ truncated')
    out = folder / "grades.csv"
    start = time.monotonic()
    assert (
        main(
            [
                str(folder),
                "--reference",
                str(HOMEWORK),
                "--out",
                str(out),
                "--timeout",
                str(LIMIT),
                "--jobs",
                "2",
            ]
        )
        == 0
    )
    elapsed = time.monotonic() - start
    with out.open() as f:
        rows = list(csv.DictReader(f))
    return rows, elapsed


def verdicts(rows, submission):
    return {
        r["exercise"]: (r["verdict"], r["codes"]) for r in rows if r["submission"] == submission
    }


def test_homework_names_its_exercises():
    assert exercises_of(load(HOMEWORK)) == [
        "transpose_v1",
        "transpose_v2",
        "transpose",
        "scaled_matmul",
    ]


def test_correct_submission_passes_everything(grades):
    rows, _ = grades
    assert {v for v, _ in verdicts(rows, "correct.ipynb").values()} == {"pass"}
    assert len(verdicts(rows, "correct.ipynb")) == 4


def test_untouched_student_copy_is_not_implemented(grades):
    rows, _ = grades
    assert set(verdicts(rows, "untouched.ipynb").values()) == {
        ("not_implemented", "not_implemented")
    }


def test_planted_bug_fails_only_its_exercise_with_a_diagnosis(grades):
    rows, _ = grades
    found = verdicts(rows, "bug.ipynb")
    assert found["transpose"][0] == "fail" and "ragged_edge" in found["transpose"][1]
    assert found["transpose_v2"] == ("pass", "") and found["scaled_matmul"] == ("pass", "")


def test_endless_loop_times_out(grades):
    rows, _ = grades
    assert verdicts(rows, "loop.ipynb") == {"*": ("timeout", "")}


def test_corrupt_file_is_invalid(grades):
    rows, _ = grades
    assert verdicts(rows, "corrupt.ipynb") == {"*": ("invalid", "")}


def test_grading_finishes_within_the_limits(grades):
    _, elapsed = grades
    # five submissions, two at a time: at most three rounds of the per-submission limit
    assert elapsed < 3 * LIMIT


def test_missing_check_output_is_reported():
    rows = rows_for("s.ipynb", ["a", "b"], {"status": "ok", "results": {"a": None}})
    assert [(r.exercise, r.verdict) for r in rows] == [("a", "missing"), ("b", "missing")]
