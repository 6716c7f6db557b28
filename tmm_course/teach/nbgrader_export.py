"""The homework as an nbgrader *source* notebook, for courses that already grade with nbgrader.

    python -m tmm_course.teach.nbgrader_export notebooks/05_homework_transpose.ipynb \\
        course/source/homework5/homework5.ipynb

Each exercise becomes one solution cell (the course's solution between nbgrader's
``### BEGIN SOLUTION`` and ``### END SOLUTION``, which ``nbgrader generate_assignment`` replaces
with a stub), and each check cell a locked, autograded test cell worth one point that asserts the
check passed and prints its diagnosis. nbgrader's own machinery does the rest: the student
version, checksums of the locked cells, restoring them before ``nbgrader autograde``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

from tmm_course.teach.graded_notebook import exercises_of
from tmm_course.teach.release import is_solution, typed_in

SCHEMA = 3


def _metadata(cell_id: str, *, solution: bool, grade: bool, points: int = 0) -> dict:
    meta = {
        "grade": grade, "solution": solution, "locked": not solution, "grade_id": cell_id,
        "schema_version": SCHEMA, "task": False,
    }  # fmt: skip
    if grade:
        meta["points"] = points
    return meta


def source_notebook(course: dict) -> dict:
    """The nbgrader source version of a course notebook with exercises and checks."""
    exercises = {e.name: e for e in exercises_of(course)}
    by_cell = {e.cell_id: e for e in exercises.values()}
    out = copy.deepcopy(course)
    cells = []
    for index, cell in enumerate(course["cells"]):
        if is_solution(cell):
            continue
        cell = copy.deepcopy(cell)
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        tags = cell.get("metadata", {}).get("tags", [])
        check = next((t.removeprefix("check:") for t in tags if t.startswith("check:")), None)
        if cell.get("id") in by_cell:
            solution = typed_in("".join(course["cells"][index + 1]["source"]))
            cell["source"] = f"### BEGIN SOLUTION\n{solution.rstrip()}\n### END SOLUTION\n"
            name = by_cell[cell["id"]].name
            cell["metadata"]["nbgrader"] = _metadata(f"{name}_solution", solution=True, grade=False)
        elif check in exercises:
            call = "".join(cell["source"]).strip()
            cell["source"] = (
                f"result = {call}\nprint(result)\n"
                "assert result.passed, result.primary.message if result.primary else 'failed'\n"
            )
            cell["metadata"]["nbgrader"] = _metadata(
                f"check_{check}", solution=False, grade=True, points=1
            )
        cells.append(cell)
    out["cells"] = cells
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("course_notebook", type=Path, help="a course notebook with solutions")
    parser.add_argument("source", type=Path, help="the nbgrader source notebook to write")
    args = parser.parse_args(argv)
    course = json.loads(args.course_notebook.read_text(encoding="utf-8"))
    if not exercises_of(course):
        parser.error(f"{args.course_notebook} has no exercise with a solution and a check")
    args.source.parent.mkdir(parents=True, exist_ok=True)
    args.source.write_text(json.dumps(source_notebook(course), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
