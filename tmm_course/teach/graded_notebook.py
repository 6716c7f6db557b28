"""The exercises of the instructor's reference notebook, and their cells in a submission.

An exercise is a code cell right before a solution cell, graded by the next cell tagged
``check:NAME``. A submission contributes the sources of those exercise cells alone, found by
cell id; everything else the grader runs comes from the reference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tmm_course.teach.release import is_solution

CHECK_TAG = "check:"


@dataclass(frozen=True)
class Exercise:
    """One exercise of the reference: its exercise cell, and the check cell that grades it."""

    name: str
    cell_id: str  # the exercise cell's id, kept in the student copy and by Jupyter
    position: int  # the exercise cell's index among the reference's exercise cells
    check_source: str


def exercises_of(reference: dict) -> list[Exercise]:
    """The exercises of a course notebook: each code cell right before a solution cell, graded
    by the next cell tagged ``check:NAME``."""
    cells = reference["cells"]
    found = []
    for index, cell in enumerate(cells):
        if not is_solution(cell) or index == 0:
            continue
        exercise = cells[index - 1]
        check = next(
            (c for c in cells[index + 1 :] if _check_name(c) is not None),
            None,
        )
        if check is None or is_solution(exercise):
            continue
        found.append(
            Exercise(
                _check_name(check),
                exercise.get("id", ""),
                len(found),
                "".join(check["source"]).strip(),
            )
        )
    return found


def _check_name(cell: dict) -> str | None:
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith(CHECK_TAG):
            return tag[len(CHECK_TAG) :]
    return None


class SourceError(ValueError):
    """An exercise cell that cannot be graded as it stands (duplicated, or not a code cell)."""


def exercise_sources(
    submission: dict, exercises: list[Exercise]
) -> dict[str, str | SourceError | None]:
    """Each exercise's source in the submission, found by its cell id: None when no cell has
    the id; a :class:`SourceError` when two or more cells have it or it is not a code cell (a
    grader must not choose between them)."""
    cells = [c for c in submission.get("cells", []) if isinstance(c, dict)]
    found: dict[str, str | SourceError | None] = {}
    for exercise in exercises:
        matching = [c for c in cells if c.get("id") == exercise.cell_id]
        if not matching:
            found[exercise.name] = None
        elif len(matching) > 1:
            found[exercise.name] = SourceError(
                f"{len(matching)} cells have the exercise's id {exercise.cell_id}"
            )
        elif matching[0].get("cell_type") != "code":
            found[exercise.name] = SourceError(f"the cell {exercise.cell_id} is not a code cell")
        else:
            source = matching[0].get("source", "")
            found[exercise.name] = (
                "".join(s for s in source if isinstance(s, str)) if isinstance(source, list)
                else str(source)
            )  # fmt: skip
    return found


def setup_source(reference: dict) -> str:
    """The reference's setup cell (the first code cell that imports tmm_course), without
    IPython magics: what runs before any exercise cell."""
    for cell in reference["cells"]:
        source = "".join(cell.get("source", ""))
        if cell.get("cell_type") == "code" and "import tmm_course" in source:
            lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
            return "\n".join(lines) + "\n"
    return "import tmm_course\nimport torch\nimport triton\nimport triton.language as tl\n"


def read_reference(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
