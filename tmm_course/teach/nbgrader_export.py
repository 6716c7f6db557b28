"""A graded lesson as an nbgrader *source* notebook, for courses that already grade with nbgrader.

    python -m tmm_course.teach.nbgrader_export notebooks/05_homework_transpose.ipynb \\
        course/source/homework5/homework5.ipynb

Each exercise becomes one solution cell: the exercise's skeleton (decorators, signatures, the
hints in its bodies) with each function's body from the course's solution between nbgrader's
``### BEGIN SOLUTION`` and ``### END SOLUTION``, which ``nbgrader generate_assignment`` replaces
with a stub. Each check cell becomes a locked, autograded test cell worth one point; every other
code cell is locked read-only, so autograde restores it from the source.

The score is the course's grader's, not the test cell's: in a course folder
(``course/source/ASSIGNMENT/NAME.ipynb``) the export also copies the course notebook to
``course/references/`` (outside ``source/``, so never released) and, unless there is one, writes
``course/nbgrader_config.py`` (:data:`CONFIG`, the file the repository's ``course/`` ships),
which runs :class:`~tmm_course.teach.nbgrader_grade.CourseGrader` after nbgrader's
``Execute``: each test cell's score is the grader's verdict on the exercise, decided outside
the student's kernel (a cell that redefines the checks changes nothing).
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import shutil
import sys
from pathlib import Path

from tmm_course.teach.graded_notebook import exercises_of
from tmm_course.teach.release import is_solution, typed_in

SCHEMA = 3
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
TEST_CELL = "check_"  # a locked test cell's grade_id: check_NAME grades exercise NAME
SOLUTION = "_solution"  # a solution cell's grade_id: NAME_solution answers exercise NAME
CONFIG = '''"""nbgrader for the tmm-course homework: each test cell is scored by the course's
grader, outside the student's kernel (tmm_course.teach.nbgrader_grade.configure says how)."""

import os

from tmm_course.teach.nbgrader_grade import configure

configure(get_config(), os.path.dirname(os.path.abspath(__file__)))  # noqa: F821 - nbgrader's
'''


def _metadata(cell_id: str, *, solution: bool, grade: bool, points: int = 0) -> dict:
    meta = {
        "grade": grade, "solution": solution, "locked": not solution, "grade_id": cell_id,
        "schema_version": SCHEMA, "task": False,
    }  # fmt: skip
    if grade:
        meta["points"] = points
    return meta


def _body(lines: list[str], fn: ast.FunctionDef) -> tuple[int, int]:
    """The lines (start, end: 0-based, end excluded) of ``fn``'s body, comments before its
    first statement included."""
    header = fn.lineno - 1
    while not lines[header].split("#")[0].rstrip().endswith(":"):
        header += 1
    return header + 1, fn.end_lineno or header + 1


def skeleton(exercise: str, solution: str) -> str:
    """The exercise cell's code with each function's body replaced by the solution's body
    between nbgrader's markers (the statements the body hands out and the solution's starts
    with, then the hint comments of its body, kept above them); whatever else the solution
    defines follows in markers of its own."""
    stub, answer = exercise.splitlines(), solution.splitlines()
    mine = {n.name: n for n in ast.parse(solution).body if isinstance(n, ast.FunctionDef)}
    out, at, used = [], 0, set()
    for fn in ast.parse(exercise).body:
        if not isinstance(fn, ast.FunctionDef) or fn.name not in mine:
            continue
        start, end = _body(stub, fn)
        first = stub[start:end]
        indent = next((ln[: len(ln) - len(ln.lstrip())] for ln in first if ln.strip()), "    ")
        # the hints: the body's comments, and those after its stub (pass  # your code: ...)
        hints = [
            ln if ln.strip().startswith("#") else indent + ln[ln.index("#") :]
            for ln in first
            if ln.strip().startswith("#") or (_stub(ln) and "#" in ln)
        ]
        there = _body(answer, mine[fn.name])
        given, code = [_code(stub, start, end), _code(answer, *there)]
        kept = 0  # the stub's first statements (M, N = x.shape) stay outside, as handed out
        while (
            kept < min(len(given), len(code))
            and answer[code[kept]].strip() == stub[given[kept]].strip()
        ):
            kept += 1
        used.add(fn.name)
        if kept == len(code):  # the body is handed out whole (lesson 6's kernel)
            continue
        outside = [answer[i] for i in code[:kept]]
        inside = [answer[i] for i in range(*there) if i not in code[:kept]]
        out += [*stub[at:start], *outside, *hints, indent + BEGIN, *inside, indent + END]
        at = end
    out += stub[at:]
    rest = [n for n in ast.parse(solution).body
            if not (isinstance(n, ast.FunctionDef) and n.name in used)]  # fmt: skip
    if rest:
        extra = [ln for n in rest for ln in answer[_first_line(n) : n.end_lineno]]
        out += ["", BEGIN, *extra, END]
    return "\n".join(out).rstrip() + "\n"


def _stub(line: str) -> bool:
    """Whether ``line`` is a stub statement, the one an exercise's body holds until solved."""
    return line.split("#")[0].strip() in ("pass", "raise NotImplementedError")


def _code(lines: list[str], start: int, end: int) -> list[int]:
    """The indices of the lines from ``start`` to ``end`` that are code, not comments."""
    return [
        i for i in range(start, end) if lines[i].strip() and not lines[i].strip().startswith("#")
    ]


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)]) - 1


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
            cell["source"] = skeleton("".join(cell["source"]), solution)
            name = by_cell[cell["id"]].name
            cell["metadata"]["nbgrader"] = _metadata(
                f"{name}{SOLUTION}", solution=True, grade=False
            )
        elif check in exercises:
            call = "".join(cell["source"]).strip()
            cell["source"] = (
                "# Feedback for you. In the instructor's autograde the score is the course's "
                "grader's:\n# it replays your kernels outside this notebook.\n"
                f"result = {call}\nprint(result)\n"
                "assert result.passed, result.primary.message if result.primary else 'failed'\n"
            )
            cell["metadata"]["nbgrader"] = _metadata(
                f"{TEST_CELL}{check}", solution=False, grade=True, points=1
            )
        elif cell["cell_type"] == "code":  # read-only: autograde restores it from the source
            cell["metadata"]["nbgrader"] = _metadata(
                f"cell_{cell.get('id', index)}", solution=False, grade=False
            )
        cells.append(cell)
    out["cells"] = cells
    return out


def course_root(source: Path) -> Path | None:
    """The nbgrader course folder a source notebook ``COURSE/source/ASSIGNMENT/NAME.ipynb``
    lies in, or None."""
    parents = source.resolve().parents
    return parents[2] if len(parents) > 2 and parents[1].name == "source" else None


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
    root = course_root(args.source)
    if root is None:
        print(
            "not in a course folder (COURSE/source/ASSIGNMENT/NAME.ipynb): copy "
            f"{args.course_notebook.name} to COURSE/references/ and set up CourseGrader "
            "(tmm_course.teach.nbgrader_grade) in nbgrader_config.py yourself"
        )
        return 0
    (root / "references").mkdir(exist_ok=True)
    shutil.copyfile(args.course_notebook, root / "references" / args.course_notebook.name)
    print(f"wrote {root / 'references' / args.course_notebook.name} (the grader's reference)")
    config = root / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG, encoding="utf-8")
        print(f"wrote {config}")
    elif "CourseGrader" not in config.read_text(encoding="utf-8"):
        print(f"warning: {config} does not run CourseGrader: the test cells alone would score")
    return 0


if __name__ == "__main__":
    sys.exit(main())
