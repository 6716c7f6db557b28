"""The course's grader inside ``nbgrader autograde``: the score of each locked test cell is the
verdict of :mod:`tmm_course.teach.grade` on the submitted notebook, decided outside the
student's kernel.

nbgrader runs a submission's cells, test cells included, in one kernel, so a first cell that
redefines ``check_transpose`` to always pass (or patches anything else there) would pass every
test cell. :class:`CourseGrader` runs after nbgrader's ``Execute``: it hands the notebook (as
nbgrader restored it: locked cells from the source, the student's answers) to the course's
grader, which records the learner's launches in a worker of its own and replays the kernels on
inputs it owns (:mod:`.clients`), then replaces each test cell's outputs with the grader's row
(an error for anything but ``pass``, which nbgrader scores 0). What the kernel printed in a test
cell is the student's feedback; it never reaches the score.

The ``nbgrader_config.py`` the repository's ``course/`` ships (and :mod:`.nbgrader_export`
writes into a course folder that has none) calls :func:`configure`, which puts it in the
pipeline::

    c.Autograde.autograde_preprocessors = [Execute, CourseGrader, IgnorePattern, ...]
    c.CourseGrader.references = "references"  # the course notebooks, outside source/
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from traitlets import Bool, Float, Unicode

from tmm_course.exercises import BY_NAME
from tmm_course.teach import grade, graded_notebook, sandbox
from tmm_course.teach.nbgrader_export import SOLUTION, TEST_CELL


def configure(c, root: str) -> None:
    """nbgrader's config ``c`` for the course folder ``root``: autograde scores the test cells
    by the course's grader after ``Execute`` runs the submission (nbgrader's own preprocessors
    otherwise, in nbgrader's order)."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        Execute,
        IgnorePattern,
        LimitOutput,
        SaveAutoGrades,
    )

    c.CourseDirectory.root = root
    c.Autograde.autograde_preprocessors = [
        Execute, CourseGrader, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
    ]  # fmt: skip
    c.CourseGrader.references = "references"  # the course notebooks, never released


class CourseGrader(Preprocessor):
    """Scores every ``check_NAME`` test cell by the course's grader's verdict on exercise NAME."""

    enabled = Bool(True).tag(config=True)
    references = Unicode(
        "references",
        help="Folder of the course notebooks (with their solutions) the homework comes from, "
        "relative to the course root: the grader's reference, never released to students.",
    ).tag(config=True)
    timeout = Float(300, help="Seconds for grading one submission.").tag(config=True)

    def preprocess(self, nb, resources):
        tests = {
            cell.metadata.nbgrader.grade_id.removeprefix(TEST_CELL): cell
            for cell in nb.cells
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
            and cell.metadata.nbgrader.get("grade_id", "").startswith(TEST_CELL)
        }
        untouched = {name for name in tests if _as_released(nb, name)}
        rows = self.graded(
            nb, [name for name in tests if name in BY_NAME and name not in untouched]
        )
        for name in untouched:  # nbgrader's own test: the answer cell's checksum is the stub's
            rows[name] = grade.Row("", name, "not_implemented", "not_implemented",
                                   "the exercise cell is as nbgrader released it")  # fmt: skip
        for name, cell in tests.items():
            cell.outputs = outputs(rows.get(name))
        return nb, resources

    def graded(self, nb, names: list[str]) -> dict[str, grade.Row]:
        """The grader's row for each exercise of ``names`` in ``nb``."""
        rows: dict[str, grade.Row] = {}
        notebooks = {BY_NAME[n].cells.notebook for n in names if BY_NAME[n].cells is not None}
        isolated = sandbox.problem() is None
        limits = sandbox.Limits(self.timeout, 6 * 2**30)
        with tempfile.TemporaryDirectory(prefix="tmm-nbgrader-") as inbox:
            submission = json.loads(json.dumps(nb))
            for cell in submission["cells"]:  # found by nbgrader's grade_id, ids or not
                exercise = BY_NAME.get(_exercise_of(cell))
                if exercise is not None and exercise.cells is not None:
                    cell["id"] = exercise.cells.exercise
            (Path(inbox) / "submission.ipynb").write_text(json.dumps(submission), encoding="utf-8")
            for notebook in sorted(notebooks):
                reference = graded_notebook.read_reference(
                    Path(self.references) / f"{notebook}.ipynb"
                )
                exercises = [e for e in grade.graded_exercises(reference) if e[0].name in names]
                with grade.grading(reference, exercises, limits, isolated) as grader:
                    for row in grader.grade(Path(inbox), "submission.ipynb"):
                        rows[row.exercise] = row
        return rows


def _exercise_of(cell: dict) -> str:
    """The exercise an nbgrader solution cell answers (its grade_id NAME_solution), or ""."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    grade_id = meta.get("grade_id", "")
    answers = meta.get("solution") and grade_id.endswith(SOLUTION)
    return grade_id.removesuffix(SOLUTION) if answers else ""


def _as_released(nb, name: str) -> bool:
    """Whether exercise ``name``'s answer cell is as nbgrader released it (its checksum)."""
    from nbgrader.utils import compute_checksum

    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id") == f"{name}{SOLUTION}" and "checksum" in meta:
            return meta["checksum"] == compute_checksum(cell)
    return False


def outputs(row: grade.Row | None) -> list:
    """A test cell's outputs for the grader's ``row``: its verdict printed, and an error (no
    points in nbgrader) unless it passed."""
    if row is None:
        return [_error("not graded: no exercise of the course's grader has this cell's name")]
    said = f"{row.exercise}: {row.verdict}" + (f" [{row.codes}]" if row.codes else "")
    said += f" ({row.isolation}) {row.detail}".rstrip()
    if row.verdict == "pass":
        return [new_output("stream", name="stdout", text=said + "\n")]
    return [_error(said)]


def _error(said: str):
    return new_output("error", ename="NotPassed", evalue=said, traceback=[said])
