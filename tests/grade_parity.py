"""The learner's check, the batch grader and the nbgrader path give the same verdict and the
same primary diagnosis for the same launcher: bug bank entries (tests/bug_bank.py) through all
three, each through its public door.

A bank entry becomes a submission as a learner would hand it in: the lesson's student copy
whose exercise cell holds the bank's source (its kernels and launchers) and binds the
exercise's function to the entry's launcher. :func:`graded_by_the_grader` grades those
notebooks with the grader's command (``python -m tmm_course.teach.grade``; a lesson's k-th
submission holds the k-th entry of each of its exercises); :func:`graded_on_nbgrader` puts the same
cells in the nbgrader export of the lesson and scores its test cells with
:class:`~tmm_course.teach.nbgrader_grade.CourseGrader`, the step of ``nbgrader autograde`` that
decides the score (tests/test_nbgrader.py runs nbgrader itself around it).

CI runs one entry per check through the check and the grader, and lesson 5's bugs among them
on the nbgrader path; ``TMM_PARITY=all`` runs the whole bank through all three. The test is in
tests/test_bug_bank.py, which runs the checks' side once for the bank and these comparisons.
:func:`graded` is the grader's case loop with its workers answered in this process, for tests
of one launcher that is a function, not a cell.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import bug_bank
import nbformat
from conftest import ROOT

from tmm_course.exercises import BY_NAME
from tmm_course.teach import clients, grade, nbgrader_export, sandbox, worker
from tmm_course.teach.release import student_notebook

SPEC_OF = {"transpose_part1": "transpose_v1"}


class _Here:
    """A worker client's channel answered in this process."""

    session: worker.Session

    def start(self, deadline: float) -> None:
        self.running = SimpleNamespace(process=SimpleNamespace(poll=lambda: None))

    def ask(self, header: dict, blobs: list[bytes], deadline: float, sizes: list[int]):
        return self.session.answer(header, blobs)

    def stop(self) -> None:
        self.running = None


class Recorder(_Here, clients.Worker):
    """The recording client, its namespace holding the launcher under the exercise's name."""

    def __init__(self, name: str, fn) -> None:
        clients.Worker.__init__(self, None, "recorder", setup=False)
        self.session = worker.Session()
        self.session.namespace[name] = fn

    def record(self, header: dict, blobs: list[bytes], deadline: float) -> tuple[dict, bytes]:
        reply, out = self.ask(header, blobs, deadline, [])
        return reply, out[0] if out else b""


class Replayer(_Here, clients.Replayer):
    """The replay client, answered by a session that ran no cell."""

    def __init__(self) -> None:
        clients.Replayer.__init__(self, None, "replayer", math.inf)
        self.session = worker.Session()

    def stop(self) -> None:
        self.defined = {}
        _Here.stop(self)


def graded(name: str, fn) -> tuple[str, list[str]]:
    """(verdict, codes) the grader's case loop gives ``fn`` on exercise ``name``."""
    state, codes, _ = graded_in_full(name, fn)
    return state, codes


def graded_in_full(name: str, fn) -> tuple[str, list[str], str]:
    """(verdict, codes, detail) the grader's case loop gives ``fn`` on exercise ``name``: the
    detail holds the primary diagnosis's sentence."""
    spec = BY_NAME[name]
    return clients.grade_exercise(spec, [], Recorder(spec.function, fn), Replayer(), math.inf)


def entries() -> list:
    """The whole bank with ``TMM_PARITY=all``; else one entry per check, a bug for every
    other check and a correct launcher for the rest (CI's share of the time)."""
    if os.environ.get("TMM_PARITY") == "all":
        return [e for e in bug_bank.BANK if spec_of(e).cells]
    chosen = []
    for index, check in enumerate(bug_bank.CHECKS):
        if not BY_NAME[SPEC_OF.get(check, check)].cells:
            continue  # judged in a lesson with no exercise cell of its own: nothing to grade
        bugs = [e for e in bug_bank.BANK if e.check == check and e.intended != bug_bank.PASS]
        right = [e for e in bug_bank.BANK if e.check == check and e.intended == bug_bank.PASS]
        chosen += (right or bugs)[:1] if index % 2 else (bugs or right)[:1]
    return chosen


Graded = dict[tuple[str, str], tuple[str, list[str]]]  # (check, entry) -> (verdict, codes)
NOTEBOOKS = ROOT / "notebooks"
BANK_SOURCE = Path(bug_bank.__file__).read_text(encoding="utf-8").split("\nif __name__ ==")[0]


def spec_of(entry: bug_bank.Entry):
    return BY_NAME[SPEC_OF.get(entry.check, entry.check)]


def answer(entry: bug_bank.Entry) -> str:
    """An exercise cell answering with ``entry``: the bank's source, then the exercise's
    function bound to the entry's launcher."""
    index = bug_bank.BANK.index(entry)
    return f"{BANK_SOURCE}\n{spec_of(entry).function} = BANK[{index}].launcher\n"


def submissions(chosen: list[bug_bank.Entry]) -> dict[str, list[dict[str, bug_bank.Entry]]]:
    """Per lesson notebook, its submissions: the k-th holds the k-th chosen entry of each of
    the lesson's exercises (an exercise with fewer entries left as handed out)."""
    by_lesson: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for entry in chosen:
        spec = spec_of(entry)
        by_lesson[spec.cells.notebook][spec.name].append(entry)
    return {
        lesson: [
            {name: entries[k] for name, entries in exercises.items() if k < len(entries)}
            for k in range(max(map(len, exercises.values())))
        ]
        for lesson, exercises in by_lesson.items()
    }


def graded_by_the_grader(chosen: list[bug_bank.Entry], scratch: Path) -> Graded:
    """(verdict, codes) of each chosen entry from the grader's command on its lesson's
    submissions (isolated where this machine can, else ``--no-isolation``), two lessons at a
    time, one submission at a time each."""
    found: Graded = {}
    with ThreadPoolExecutor(2) as pool:
        for graded in pool.map(
            lambda lesson: _graded(lesson, scratch), submissions(chosen).items()
        ):
            found.update(graded)
    return found


def _graded(lesson: tuple[str, list[dict[str, bug_bank.Entry]]], scratch: Path) -> Graded:
    name, handed = lesson
    reference = NOTEBOOKS / f"{name}.ipynb"
    inbox = scratch / name
    inbox.mkdir(parents=True)
    for k, entries in enumerate(handed):
        notebook = student_notebook(json.loads(reference.read_text(encoding="utf-8")))
        for exercise, entry in entries.items():
            cell_id = BY_NAME[exercise].cells.exercise
            (cell,) = [c for c in notebook["cells"] if c.get("id") == cell_id]
            cell["source"] = answer(entry)
        (inbox / f"{k:03d}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    out = scratch / f"{name}.csv"
    isolation = [] if sandbox.problem() is None else ["--no-isolation"]
    argv = [str(inbox), "--reference", str(reference), "--out", str(out), "--jobs", "1",
            "--no-progress", *isolation]  # fmt: skip
    assert grade.main(argv) == 0
    with out.open(newline="", encoding="utf-8") as f:
        rows = {
            (r["submission"], r["exercise"]): (r["verdict"], r["codes"].split())
            for r in csv.DictReader(f)
        }
    return {
        (entry.check, entry.name): rows[(f"{k:03d}.ipynb", exercise)]
        for k, entries in enumerate(handed)
        for exercise, entry in entries.items()
    }


def graded_on_nbgrader(chosen: list[bug_bank.Entry]) -> Graded:
    """(verdict, codes) of each chosen entry as the test cells of the nbgrader export of its
    lesson say after :class:`CourseGrader` scored them (what nbgrader's SaveAutoGrades reads:
    an error output scores 0)."""
    from tmm_course.teach.nbgrader_grade import CourseGrader

    found: Graded = {}
    for lesson, handed in submissions(chosen).items():
        reference = json.loads((NOTEBOOKS / f"{lesson}.ipynb").read_text(encoding="utf-8"))
        stubs = {c.get("id"): c["source"] for c in reference["cells"]}
        for entries in handed:  # the other exercises as handed out
            source = nbgrader_export.source_notebook(reference)
            for cell in source["cells"]:
                grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id", "")
                name = grade_id.removesuffix(nbgrader_export.SOLUTION)
                if grade_id.endswith(nbgrader_export.SOLUTION):
                    cell["source"] = answer(entries[name]) if name in entries else stubs[cell["id"]]
            nb, _ = CourseGrader(references=str(NOTEBOOKS)).preprocess(
                nbformat.from_dict(source), {}
            )
            said = {
                c.metadata.nbgrader.grade_id.removeprefix(nbgrader_export.TEST_CELL): c.outputs[0]
                for c in nb.cells
                if c.get("metadata", {}).get("nbgrader", {}).get("grade")
            }
            for name, entry in entries.items():
                found[(entry.check, entry.name)] = scored(said[name])
    return found


def scored(output) -> tuple[str, list[str]]:
    """(verdict, codes) a test cell's output from CourseGrader says: "NAME: VERDICT [CODES]
    (isolation) detail", an error output unless the verdict is pass."""
    text = output.get("evalue") or output.get("text", "")
    head = text.split(" (", 1)[0].split(": ", 1)[1]
    verdict, _, codes = head.partition(" [")
    assert (output["output_type"] == "error") == (verdict != "pass"), text
    return verdict, codes.rstrip("]").split()


def nbgrader_sample(chosen: list[bug_bank.Entry]) -> list[bug_bank.Entry]:
    """The chosen entries the nbgrader path grades: all with ``TMM_PARITY=all``, else lesson
    5's bugs (the homework the README's nbgrader example hands out, where a primary code is
    compared; the same CourseGrader and export serve every lesson, and tests/test_nbgrader.py
    scores lesson 5's solutions through nbgrader itself)."""
    if os.environ.get("TMM_PARITY") == "all":
        return chosen
    return [
        e
        for e in chosen
        if spec_of(e).cells.notebook == "05_homework_transpose" and e.intended != bug_bank.PASS
    ]
