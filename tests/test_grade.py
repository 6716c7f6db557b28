"""Batch grading against a class of honest and dishonest submissions: every forgery fails or is
sent for review, nothing outside a submission's folder changes, the run always finishes, and
every entry of the inbox gets a row."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time

import pytest
from conftest import ROOT

from tmm_course.teach import graded_notebook, sandbox
from tmm_course.teach.grade import digest, main
from tmm_course.teach.release import solved_notebook, student_notebook

HOMEWORK = ROOT / "notebooks" / "05_homework_transpose.ipynb"
LIMIT = 60


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def with_exercise(notebook: dict, name: str, source: str) -> dict:
    """``notebook`` with the exercise cell graded as ``name`` replaced by ``source``."""
    exercise = next(e for e in graded_notebook.exercises_of(load(HOMEWORK)) if e.name == name)
    for cell in notebook["cells"]:
        if cell.get("id") == exercise.cell_id:
            cell["source"] = source
    return notebook


def student() -> dict:
    return student_notebook(load(HOMEWORK))


def solved() -> dict:
    return solved_notebook(load(HOMEWORK))


def code_cell(source: str, **metadata) -> dict:
    return {"cell_type": "code", "metadata": metadata, "execution_count": None, "outputs": [],
            "source": source}  # fmt: skip


PASSING_DISPLAY = {
    "output_type": "display_data",
    "metadata": {},
    "data": {
        "text/plain": "transpose: PASS",
        "application/vnd.tmm-course.check+json": {
            "exercise": "transpose", "passed": True, "codes": [], "cases": [],
        },
    },
}  # fmt: skip


def forged_outputs(notebook: dict) -> dict:
    """Every check cell emptied and carrying a passing result as output (the first one wins
    in a grader that reads outputs)."""
    for cell in notebook["cells"]:
        if any(t.startswith("check:") for t in cell.get("metadata", {}).get("tags", [])):
            cell["source"] = "pass"
            cell["outputs"] = [PASSING_DISPLAY]
            cell["metadata"]["tags"].append("skip-execution")
    return notebook


def raw_check_cells(notebook: dict) -> dict:
    for cell in notebook["cells"]:
        if any(t.startswith("check:") for t in cell.get("metadata", {}).get("tags", [])):
            cell["cell_type"] = "raw"
            cell["outputs"] = [PASSING_DISPLAY]
    return notebook


def late_cell_with_every_tag(notebook: dict) -> dict:
    tags = [f"check:{e.name}" for e in graded_notebook.exercises_of(load(HOMEWORK))]
    notebook["cells"].append(code_cell("print('PASS')", tags=tags))
    notebook["cells"][-1]["outputs"] = [PASSING_DISPLAY]
    return notebook


def planted_bug(notebook):
    """The solved homework with Part 3's masks removed: wrong only at ragged edges."""
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if "def transpose_kernel(" in source:
            cell["source"] = source.replace(", mask=mask)", ")")
    return notebook


def submissions(inbox, classmate: str) -> None:
    """The class: honest work, and every forgery and break-out the grader must withstand."""
    target = inbox / classmate
    write = lambda name, nb: (inbox / name).write_text(json.dumps(nb), encoding="utf-8")
    write("correct.ipynb", solved())
    write("untouched.ipynb", student())
    write("bug.ipynb", planted_bug(solved()))
    write("forged_outputs.ipynb", forged_outputs(student()))
    write("raw_checks.ipynb", raw_check_cells(student()))
    write("late_tags.ipynb", late_cell_with_every_tag(student()))
    write("redefined_check.ipynb", with_exercise(student(), "transpose", (
        "from tmm_course.check import CheckResult\n"
        "def check_transpose(fn, **kw):\n"
        "    return CheckResult('transpose', True, [])\n"
        "def transpose(x, out):\n    out.copy_(x.t())\n")))  # fmt: skip
    write("patched_engine.ipynb", with_exercise(student(), "transpose", (
        "import tmm_course.check.engine as engine\n"
        "engine._verdict = lambda name, cases, messages: engine.CheckResult(name, True, cases)\n"
        "def transpose(x, out):\n    out.copy_(x.t())\n")))  # fmt: skip
    write("displayed_pass.ipynb", with_exercise(student(), "transpose", (
        "from IPython.display import display\n"
        f"display({PASSING_DISPLAY['data']!r}, raw=True)\n"
        "def transpose(x, out):\n    raise NotImplementedError\n")))  # fmt: skip
    write("torch_one_liner.ipynb", with_exercise(student(), "transpose",
          "def transpose(x, out):\n    out.copy_(x.t())\n"))  # fmt: skip
    write("reads_solutions.ipynb", with_exercise(student(), "transpose", (
        f"source = open({str(HOMEWORK)!r}).read()\n"
        "def transpose(x, out):\n    raise NotImplementedError\n")))  # fmt: skip
    write("overwrites_classmate.ipynb", with_exercise(student(), "transpose", (
        f"try:\n    open({str(target)!r}, 'w').write('{{}}')\nexcept OSError:\n    pass\n"
        f"try:\n    open({str(ROOT / 'tmm_course' / 'check' / 'engine.py')!r}, 'a').write('#')\n"
        "except OSError:\n    pass\n"
        "def transpose(x, out):\n    raise NotImplementedError\n")))  # fmt: skip
    write("detached_forger.ipynb", with_exercise(student(), "transpose", (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time\\nwhile True:\\n"
        "    print(\"transpose,pass\", flush=True); time.sleep(0.5)'],\n"
        "                 start_new_session=True)\n"
        "def transpose(x, out):\n    raise NotImplementedError\n")))  # fmt: skip
    write("endless_print.ipynb", with_exercise(student(), "transpose_v1",
          "while True:\n    print('x' * 10000)\n"))  # fmt: skip
    write("endless_loop.ipynb", with_exercise(student(), "transpose_v1", "while True:\n    pass\n"))
    (inbox / "corrupt.ipynb").write_text('{"cells": [ truncated')
    (inbox / ".hidden.ipynb").write_text(json.dumps(solved()))
    (inbox / "notes.txt").write_text("not a notebook")
    (inbox / "a_folder").mkdir()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    inbox = tmp_path_factory.mktemp("inbox")
    submissions(inbox, "correct.ipynb")
    out = tmp_path_factory.mktemp("grades") / "grades.csv"
    before = digest(inbox)
    package_before = digest(ROOT / "tmm_course")
    start = time.monotonic()
    argv = [str(inbox), "--reference", str(HOMEWORK), "--out", str(out),
            "--timeout", str(LIMIT), "--jobs", "2"]  # fmt: skip
    assert main(argv) == 0
    elapsed = time.monotonic() - start
    csv_after_run = out.read_bytes()
    time.sleep(3)  # anything left running would write now
    with out.open() as f:
        rows = list(csv.DictReader(f))
    return {
        "rows": rows, "elapsed": elapsed, "inbox": inbox, "before": before, "out": out,
        "csv": csv_after_run, "package_before": package_before,
    }  # fmt: skip


def verdicts(rows, submission):
    return {r["exercise"]: r["verdict"] for r in rows if r["submission"] == submission}


def test_the_homework_names_its_exercises():
    names = [e.name for e in graded_notebook.exercises_of(load(HOMEWORK))]
    assert names == ["transpose_v1", "transpose_v2", "transpose", "scaled_matmul"]


def test_every_inbox_entry_gets_a_row(graded):
    rows = graded["rows"]
    graded_names = {r["submission"] for r in rows}
    assert graded_names == {p.name for p in graded["inbox"].iterdir()}
    for name in (".hidden.ipynb", "notes.txt", "a_folder", "corrupt.ipynb"):
        expected = "invalid" if name != ".hidden.ipynb" else "pass"
        assert set(verdicts(rows, name).values()) == {expected}, name


def test_honest_work_is_graded_on_its_merits(graded):
    rows = graded["rows"]
    assert set(verdicts(rows, "correct.ipynb").values()) == {"pass"}
    assert len(verdicts(rows, "correct.ipynb")) == 4
    assert set(verdicts(rows, "untouched.ipynb").values()) == {"not_implemented"}
    bug = verdicts(rows, "bug.ipynb")
    assert bug["transpose"] == "fail" and bug["transpose_v2"] == bug["scaled_matmul"] == "pass"


@pytest.mark.parametrize(
    "forgery",
    ["forged_outputs.ipynb", "raw_checks.ipynb", "late_tags.ipynb", "redefined_check.ipynb",
     "patched_engine.ipynb", "displayed_pass.ipynb", "torch_one_liner.ipynb",
     "reads_solutions.ipynb", "overwrites_classmate.ipynb", "detached_forger.ipynb"],
)  # fmt: skip
def test_no_forgery_passes(graded, forgery):
    found = verdicts(graded["rows"], forgery)
    assert found and "pass" not in found.values(), found


@pytest.mark.parametrize(
    "forgery",
    ["redefined_check.ipynb", "patched_engine.ipynb", "displayed_pass.ipynb",
     "reads_solutions.ipynb", "overwrites_classmate.ipynb", "detached_forger.ipynb"],
)  # fmt: skip
def test_exercise_code_that_reaches_outside_is_sent_for_review(graded, forgery):
    assert verdicts(graded["rows"], forgery)["transpose"] == "review"


def test_a_torch_one_liner_is_named(graded):
    row = next(
        r for r in graded["rows"]
        if r["submission"] == "torch_one_liner.ipynb" and r["exercise"] == "transpose"
    )  # fmt: skip
    assert row["verdict"] == "fail" and "no_triton_kernel" in row["codes"]


def test_endless_output_and_loops_end_within_the_limit(graded):
    for name in ("endless_print.ipynb", "endless_loop.ipynb"):
        assert set(verdicts(graded["rows"], name).values()) <= {"timeout", "error"}, name
    assert graded["elapsed"] < 4 * LIMIT  # 19 entries, two at a time, two of them endless


def test_nothing_outside_a_submission_changed(graded):
    assert digest(graded["inbox"]) == graded["before"]
    assert digest(ROOT / "tmm_course") == graded["package_before"]
    assert graded["out"].read_bytes() == graded["csv"]  # nobody wrote grades.csv afterwards


def test_nothing_a_submission_started_outlives_the_run(graded):
    if not sandbox.isolation_available():
        pytest.skip("per-submission users need root")
    for slot in range(2):
        user = f"{sandbox.USER_PREFIX}{slot}"
        alive = subprocess.run(["pgrep", "-u", user], capture_output=True, text=True)
        assert alive.stdout.strip() == "", f"{user} still runs {alive.stdout}"


def test_a_rerun_with_resume_grades_nothing_twice(graded, tmp_path):
    out = tmp_path / "grades.csv"
    out.write_bytes(graded["out"].read_bytes())
    argv = [str(graded["inbox"]), "--reference", str(HOMEWORK), "--out", str(out), "--resume"]
    assert main(argv) == 0
    assert out.read_bytes() == graded["out"].read_bytes()


def test_review_flags_name_their_reason():
    assert graded_notebook.review_flags("def transpose(x, out):\n    pass\n") == []
    assert "redefines a check" in graded_notebook.review_flags("def check_transpose(f): ...")
    assert "starts other processes" in graded_notebook.review_flags("import subprocess")


def test_a_forged_signature_is_ignored():
    key = os.urandom(32)
    line = json.dumps({"exercise": "transpose", "result": "{}", "tag": "0" * 64})
    assert graded_notebook.verified([line, "not json"], key) == {}
