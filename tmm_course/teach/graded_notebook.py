"""The notebook a grader runs for one submission, rebuilt from the instructor's reference.

Only the exercise cells' sources come from the submission; every other cell, all metadata and
the checks come from the reference, with outputs cleared. A setup cell, run before any of the
submission's code, keeps private references to the check functions and to a recorder that
signs each result with a per-run key (HMAC) and appends it to a file; each check cell calls
those references. Results are read from that file alone, never from outputs, and a result
whose signature does not verify is ignored.

Code running in the same kernel can, in principle, reach anything the kernel holds; so exercise
sources that reach into the checker, the display machinery, other processes, files or the
interpreter's internals are flagged for review (:func:`review_flags`), and a flagged
submission is never graded ``pass``.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from pathlib import Path

from tmm_course.teach.release import is_solution

CHECK_TAG = "check:"
KEY_VARIABLE = "TMM_GRADE_KEY"
RESULTS_VARIABLE = "TMM_GRADE_RESULTS"

# what an exercise has no reason to touch: each pattern with the reason it is flagged
SUSPICIOUS = [
    (r"tmm_course\s*\.\s*(check|teach)|from\s+tmm_course\.(check|teach)|import\s+tmm_course\s*$",
     "reaches into the course's checker or grader"),
    (r"__tmm|_repr_|\bdisplay\s*\(|IPython|get_ipython|publish_display_data",
     "reaches into the display machinery or the grader's names"),
    (r"\bdef\s+check_|\bcheck_\w+\s*=", "redefines a check"),
    (r"subprocess|os\.system|os\.popen|os\.fork|os\.exec|os\.spawn|multiprocessing|\bpty\b",
     "starts other processes"),
    (r"/proc|\bopen\s*\(|read_text|read_bytes|\.ipynb|shutil|os\.remove|os\.unlink|glob",
     "reads or writes files"),
    (r"sys\.modules|importlib|__import__|builtins|globals\s*\(|\bsetattr\s*\(|ctypes|"
     r"\bgc\.|inspect\.|__closure__|__globals__|__code__|sys\._getframe",
     "reaches into the interpreter's internals"),
    (r"socket|urllib|requests|http\.client", "opens network connections"),
]  # fmt: skip


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


def exercise_sources(submission: dict, exercises: list[Exercise]) -> dict[str, str | None]:
    """Each exercise's source in the submission, found by its cell id (None: not found)."""
    by_id = {
        c.get("id"): "".join(c.get("source", ""))
        for c in submission.get("cells", [])
        if c.get("cell_type") == "code"
    }
    return {e.name: by_id.get(e.cell_id) for e in exercises}


def review_flags(source: str) -> list[str]:
    """Why an exercise source needs a person's look (empty: nothing suspicious)."""
    return [reason for pattern, reason in SUSPICIOUS if re.search(pattern, source, re.MULTILINE)]


def _setup_source(exercises: list[Exercise]) -> str:
    names = sorted({n for e in exercises for n in re.findall(r"\bcheck_\w+", e.check_source)})
    return (
        "import hashlib as _h, hmac as _m, json as _j, os as _o\n"
        f"from tmm_course.check import {', '.join(names)}\n"
        f"__tmm_checks = {{{', '.join(f'{n!r}: {n}' for n in names)}}}\n"
        f"def __tmm_record(name, result, _key=bytes.fromhex(_o.environ.pop({KEY_VARIABLE!r})),\n"
        f"                 _path=_o.environ.pop({RESULTS_VARIABLE!r}), _json=_j, _hmac=_m,\n"
        "                 _sha=_h.sha256):\n"
        "    data = _json.dumps(result.as_dict(), sort_keys=True)\n"
        "    tag = _hmac.new(_key, (name + data).encode(), _sha).hexdigest()\n"
        "    with open(_path, 'a', encoding='utf-8') as f:\n"
        "        f.write(_json.dumps({'exercise': name, 'result': data, 'tag': tag}) + '\\n')\n"
        "    return result\n"
        "del _h, _m, _j, _o\n"
    )


def _graded_check(exercise: Exercise) -> str:
    call = re.sub(r"\b(check_\w+)\s*\(", r"__tmm_checks['\1'](", exercise.check_source)
    return f"__tmm_record({exercise.name!r}, {call})"


def build(reference: dict, sources: dict[str, str | None]) -> dict:
    """The notebook to run: the reference without its solutions, each exercise cell's source
    taken from ``sources`` (an exercise that is None keeps the reference's untouched cell),
    check cells that report through the recorder, and no outputs anywhere."""
    exercises = {e.cell_id: e for e in exercises_of(reference)}
    by_name = {e.name: e for e in exercises.values()}
    notebook = copy.deepcopy(reference)
    cells = []
    setup = {
        "cell_type": "code",
        "id": "tmm-grade-setup",
        "metadata": {},
        "execution_count": None,
        "outputs": [],
        "source": _setup_source(list(exercises.values())),
    }
    first_code = next(i for i, c in enumerate(notebook["cells"]) if c["cell_type"] == "code")
    for index, cell in enumerate(notebook["cells"]):
        if is_solution(cell):
            continue
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            exercise = exercises.get(cell.get("id", ""))
            name = _check_name(cell)
            if exercise is not None and sources.get(exercise.name) is not None:
                cell["source"] = sources[exercise.name]
            elif name is not None and name in by_name:
                cell["source"] = _graded_check(by_name[name])
        cells.append(cell)
        if index == first_code:
            cells.append(setup)  # after the install cell, before any submission code
    notebook["cells"] = cells
    return notebook


def verified(lines: list[str], key: bytes) -> dict[str, list[dict]]:
    """The result records whose signatures verify, by exercise name."""
    found: dict[str, list[dict]] = {}
    for line in lines:
        try:
            record = json.loads(line)
            name, data, tag = record["exercise"], record["result"], record["tag"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        expected = hmac.new(key, (name + data).encode(), hashlib.sha256).hexdigest()
        if isinstance(tag, str) and hmac.compare_digest(tag, expected):
            found.setdefault(name, []).append(json.loads(data))
    return found


def read_reference(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
