"""Write a synthetic class into an inbox: honest submissions whose right verdicts are known.

    .venv/bin/python tools/synthetic-class.py inbox/ 200

A third solve everything, a third leave everything untouched, a third solve everything but
leave Part 3's masks out (that exercise fails, the others pass). Prints nothing; the verdicts
each submission must get are in inbox/../expected.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tmm_course.teach.graded_notebook import exercises_of
from tmm_course.teach.release import solved_notebook, student_notebook

HOMEWORK = Path(__file__).resolve().parent.parent / "notebooks" / "05_homework_transpose.ipynb"


def main(inbox: Path, count: int) -> None:
    reference = json.loads(HOMEWORK.read_text(encoding="utf-8"))
    names = [e.name for e in exercises_of(reference)]
    inbox.mkdir(parents=True, exist_ok=False)
    expected = {}
    for i in range(count):
        kind = ("solved", "untouched", "unmasked")[i % 3]
        make = student_notebook if kind == "untouched" else solved_notebook
        notebook = make(reference)
        if kind == "unmasked":
            for cell in notebook["cells"]:
                source = "".join(cell["source"])
                if "def transpose_kernel(" in source:
                    cell["source"] = source.replace(", mask=mask)", ")")
        name = f"student{i:03}-{kind}.ipynb"
        (inbox / name).write_text(json.dumps(notebook), encoding="utf-8")
        verdict = {"solved": "pass", "untouched": "not_implemented"}.get(kind)
        expected[name] = {n: verdict or ("fail" if n == "transpose" else "pass") for n in names}
    (inbox.parent / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
