"""Write the student copy of the course: every notebook with its solution cells removed.

    python -m tmm_course.teach.release notebooks/ student/

A solution cell is one tagged ``solution`` (or a hidden ``# @title Solution`` form cell). It goes
whole: source, outputs, metadata and attachments. Every other cell keeps its source and loses
its outputs. The input folder is never written to.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

SOLUTION_TAG = "solution"


class ReleaseError(RuntimeError):
    """The student copy cannot be written where asked."""


def is_solution(cell: dict) -> bool:
    """Tagged ``solution``, or a hidden form cell titled as a solution."""
    meta = cell.get("metadata", {})
    if SOLUTION_TAG in meta.get("tags", []):
        return True
    first = "".join(cell.get("source", "")).lstrip().splitlines()[:1]
    hidden = meta.get("jupyter", {}).get("source_hidden") or meta.get("cellView") == "form"
    return bool(hidden and first and first[0].lower().startswith("# @title solution"))


def student_notebook(notebook: dict) -> dict:
    """A copy of ``notebook`` without solution cells, and with no outputs anywhere."""
    out = copy.deepcopy(notebook)
    out["cells"] = [c for c in out["cells"] if not is_solution(c)]
    for cell in out["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return out


SOLUTION_PREFIX = "solution_"  # solutions define solution_<name>, never the learner's <name>


def typed_in(solution_source: str) -> str:
    """A solution cell's code as a learner who typed it in would have it: under the exercise's
    own names, without the title line and the solution's self-check."""
    lines = [
        line
        for line in solution_source.splitlines()
        if not line.startswith(("# @title", "assert check_"))
    ]
    return re.sub(rf"\b{SOLUTION_PREFIX}", "", "\n".join(lines)).strip() + "\n"


def solved_notebook(notebook: dict) -> dict:
    """``notebook`` with each solution typed into the exercise cell before it and the solution
    cells removed: a complete, correct submission (for testing checks and graders)."""
    out = student_notebook(notebook)
    cells = notebook["cells"]
    kept = iter(out["cells"])
    for index, cell in enumerate(cells):
        if is_solution(cell):
            continue
        copy_of_cell = next(kept)
        following = cells[index + 1] if index + 1 < len(cells) else None
        if following is not None and is_solution(following):
            copy_of_cell["source"] = typed_in("".join(following["source"]))
    return out


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def write_student_copy(source: Path, target: Path, force: bool = False) -> list[Path]:
    """Write a student copy of every notebook in ``source`` into ``target``; return the paths."""
    source, target = source.resolve(), target.resolve()
    if not source.is_dir():
        raise ReleaseError(f"{source} is not a folder of notebooks. Expected e.g. notebooks/.")
    if _inside(target, source) or _inside(source, target):
        raise ReleaseError(
            f"refusing to write the student copy to {target}: it overlaps the input {source}. "
            "Fix: name a folder outside it, e.g. student/."
        )
    if target.exists() and any(target.iterdir()) and not force:
        raise ReleaseError(
            f"{target} exists and is not empty. Fix: name a new folder, or replace the "
            "notebooks in it: --force (make student FORCE=1)."
        )
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(source.glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        dest = target / path.name
        dest.write_text(
            json.dumps(student_notebook(notebook), indent=1, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        written.append(dest)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the student copy of the notebooks.")
    parser.add_argument("source", type=Path, help="the course notebooks, e.g. notebooks/")
    parser.add_argument("target", type=Path, help="a new folder for the student copy")
    parser.add_argument("--force", action="store_true", help="replace notebooks in target")
    args = parser.parse_args(argv)
    try:
        written = write_student_copy(args.source, args.target, args.force)
    except ReleaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
