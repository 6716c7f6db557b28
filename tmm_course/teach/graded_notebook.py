"""The exercises of the instructor's reference notebook, and their cells in a submission.

An exercise is a code cell right before a solution cell, graded by the next cell tagged
``check:NAME``. A submission contributes the sources of those exercise cells alone, found by
cell id; everything else the grader runs comes from the reference.
"""

from __future__ import annotations

import ast
import builtins
import json
from dataclasses import dataclass
from pathlib import Path

from tmm_course.source import parse
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
    grader must not choose between them). A notebook whose cells have no ids (nbformat 4.4
    and older) has each exercise cell where the course put it: the code cell right before its
    check cell (:func:`_before_check`)."""
    cells = [c for c in submission.get("cells", []) if isinstance(c, dict)]
    found: dict[str, str | SourceError | None] = {}
    ids = any("id" in c for c in cells)
    for exercise in exercises:
        matching = (
            [c for c in cells if c.get("id") == exercise.cell_id] if ids
            else _before_check(cells, exercise)
        )  # fmt: skip
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


def _before_check(cells: list[dict], exercise: Exercise) -> list[dict]:
    """The code cell right before the cell whose source is ``exercise``'s check (as the course
    hands it out), or none."""
    for index, cell in enumerate(cells):
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if text.strip() == exercise.check_source and cell.get("cell_type") == "code":
            code = [c for c in cells[:index] if c.get("cell_type") == "code"]
            return code[-1:]
    return []


def untouched(reference: dict, exercise: Exercise, source: str) -> bool:
    """Whether ``source`` is the exercise cell as the course hands it out (a stub that raises
    NotImplementedError): nothing to run."""
    cell = next((c for c in reference.get("cells", []) if c.get("id") == exercise.cell_id), None)
    stub = "".join(cell.get("source", "")) if cell else ""
    return "raise NotImplementedError" in stub and source.strip() == stub.strip()


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


def carried(
    reference: dict,
    sources: dict[str, str | SourceError | None],
    exercise: Exercise,
    setup: str,
) -> list[str]:
    """The definitions (``def``, ``class``, imports, assignments to names) from cells before
    ``exercise`` that its cell uses, directly or through each other, as source: the
    reference's own cells, and the submission's earlier exercise cells in place of the
    reference's. Only these statements are carried, never a cell's other statements."""
    statements = []
    for text in _cells_before(reference, sources, exercise):
        statements += _definitions(text)
    provided = _bound(setup) | set(dir(builtins))
    cell = sources.get(exercise.name)
    cell_names = _definitions(cell) if isinstance(cell, str) else []
    needed = set().union(*(loads for _, loads, _ in cell_names)) if cell_names else set()
    needed |= _free(cell) if isinstance(cell, str) else set()
    needed -= provided | set().union(*(binds for binds, _, _ in cell_names))
    chosen: list[int] = []
    while needed:
        name = needed.pop()
        index = next(
            (i for i in reversed(range(len(statements))) if name in statements[i][0]), None
        )
        if index is None or index in chosen:
            continue
        chosen.append(index)
        needed |= statements[index][1] - provided
    return [statements[i][2] for i in sorted(chosen)]


def _cells_before(reference: dict, sources: dict, exercise: Exercise) -> list[str]:
    """The code cells a notebook runs before ``exercise``'s: the reference's lesson cells and,
    for its exercise cells, the submission's."""
    by_cell = {e.cell_id: e.name for e in exercises_of(reference)} if reference else {}
    found = []
    for cell in reference.get("cells", []):
        if cell.get("id") == exercise.cell_id:
            break
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.get("cell_type") != "code" or is_solution(cell) or _check_name(cell) or tags:
            continue
        if cell.get("id") in by_cell:
            text = sources.get(by_cell[cell["id"]])
            if isinstance(text, str):
                found.append(text)
        else:
            found.append("".join(cell.get("source", "")))
    return found


def _definitions(text: str) -> list[tuple[set[str], set[str], str]]:
    """(names bound, names used, source) of each top-level definition of a cell."""
    try:
        tree = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines(True)
    found = []
    for node in tree.body:
        binds = _binds(node)
        if not binds:
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        source = "".join(lines[first - 1 : node.end_lineno])
        found.append((binds, _free_in(node), source))
    return found


def _binds(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        names = {(a.asname or a.name).split(".")[0] for a in node.names}
        return set() if "*" in names else names
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if all(isinstance(t, ast.Name) for t in targets):
            return {t.id for t in targets}  # type: ignore[attr-defined]
    return set()


def _free_in(node: ast.AST) -> set[str]:
    try:
        loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        stores = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and
                  isinstance(n.ctx, ast.Store)} | {a.arg for a in ast.walk(node)
                                                   if isinstance(a, ast.arg)}  # fmt: skip
    except RecursionError:
        return set()
    return loads - stores


def _free(text: str) -> set[str]:
    try:
        return _free_in(parse(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()


def _bound(text: str) -> set[str]:
    found: set[str] = set()
    for binds, _, _ in _definitions(text):
        found |= binds
    return found
