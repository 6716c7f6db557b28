"""The homework on nbgrader: generate the student version from the exported source, autograde
a correct submission (full marks: saved as nbformat 4.4, without cell ids, one kernel
autotuned, a self-test under ``__main__``), an untouched one, one whose locked test cells
were edited (no marks: nbgrader restores them from the source) and one whose first cell
redefines the checks to always pass (no marks: the course's grader scores the test cells,
outside the student's kernel). Every graded lesson exports, its exercise skeleton outside
the markers."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, skip_for_missing
from test_grade import AUTOTUNED_TRANSPOSE, SELF_TEST, without_ids

from tmm_course.teach import nbgrader_export
from tmm_course.teach.graded_notebook import exercises_of
from tmm_course.teach.nbgrader_export import BEGIN, END, source_notebook

if importlib.util.find_spec("nbgrader") is None:
    skip_for_missing("nbgrader (make test installs it: pip install -e '.[grade]')")
HOMEWORK = ROOT / "notebooks" / "05_homework_transpose.ipynb"
FORGED = """
class _Passed:
    passed, primary = True, None


def check_transpose(*args, **kwargs):
    return _Passed()


def check_scaled_matmul(*args, **kwargs):
    return _Passed()
"""


def nbgrader(course: Path, *args: str) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--create", "--force"],
        cwd=course, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def solutions(source: dict) -> dict[str, str]:
    return {
        c["metadata"]["nbgrader"]["grade_id"]: re.sub(
            r"[ \t]*### (BEGIN|END) SOLUTION\n", "", "".join(c["source"])
        )
        for c in source["cells"]
        if c["metadata"].get("nbgrader", {}).get("solution")
    }


@pytest.fixture(scope="module")
def autograded(tmp_path_factory) -> Path:
    """The course folder after ``nbgrader autograde`` of five submissions."""
    course = tmp_path_factory.mktemp("course")
    assert nbgrader_export.main([str(HOMEWORK), str(course / "source" / "hw" / "hw.ipynb")]) == 0
    with (course / "nbgrader_config.py").open("a") as config:  # as the export wrote it, and:
        config.write(f"c.Exchange.root = {str(course / 'exchange')!r}\n")
    source = json.loads((course / "source" / "hw" / "hw.ipynb").read_text())
    nbgrader(course, "generate_assignment", "hw")
    release = json.loads((course / "release" / "hw" / "hw.ipynb").read_text())
    correct, tampered = json.loads(json.dumps(release)), json.loads(json.dumps(release))
    forged = json.loads(json.dumps(release))
    setup = next(
        i for i, c in enumerate(forged["cells"]) if "import tmm_course" in "".join(c["source"])
    )
    first = {"cell_type": "code", "execution_count": None, "id": "forged", "metadata": {},
             "outputs": [], "source": FORGED}  # fmt: skip
    forged["cells"].insert(setup + 1, first)
    # correct, and unusual: nbformat 4.4 (no cell ids), Part 1 with a self-test under
    # __main__, Part 3 autotuned
    answers = solutions(source)
    answers["transpose_v1_solution"] += SELF_TEST
    answers["transpose_solution"] = AUTOTUNED_TRANSPOSE
    for cell in without_ids(correct)["cells"]:
        grading = cell["metadata"].get("nbgrader", {})
        if grading.get("solution"):
            cell["source"] = answers[grading["grade_id"]]
    for cell in tampered["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade"):
            cell["source"] = "pass  # edited: every test passes"
    for student, notebook in (("alice", correct), ("bob", release), ("eve", tampered),
                              ("mallory", forged)):  # fmt: skip
        folder = course / "submitted" / student / "hw"
        folder.mkdir(parents=True)
        (folder / "hw.ipynb").write_text(json.dumps(notebook))
    nbgrader(course, "autograde", "hw")
    return course


def gradebook(course: Path):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{course / 'gradebook.db'}")


@pytest.fixture(scope="module")
def scores(autograded) -> dict[str, tuple[float, float]]:
    with gradebook(autograded) as book:
        return {
            s: (book.find_submission("hw", s).score, book.find_submission("hw", s).max_score)
            for s in ("alice", "bob", "eve", "mallory")
        }


@pytest.fixture(scope="module")
def alices_cells(autograded) -> dict[str, float]:
    """alice's score per test cell."""
    with gradebook(autograded) as book:
        graded = book.find_submission_notebook("hw", "hw", "alice")
        return {g.name: g.score for g in graded.grades}


def test_the_source_has_a_solution_and_a_pointed_test_per_exercise():
    source = source_notebook(json.loads(HOMEWORK.read_text(encoding="utf-8")))
    grading = [c["metadata"]["nbgrader"] for c in source["cells"] if "nbgrader" in c["metadata"]]
    assert sum(g["solution"] for g in grading) == 4
    assert [g["points"] for g in grading if g["grade"]] == [1, 1, 1, 1]
    assert all(g["locked"] for g in grading if g["grade"])


def test_the_launchers_first_lines_stay_outside_the_markers():
    source = source_notebook(json.loads(HOMEWORK.read_text(encoding="utf-8")))
    (answer,) = [
        "".join(c["source"])
        for c in source["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "transpose_solution"
    ]
    assert "def transpose(x, out):\n    M, N = x.shape\n    # your code\n" in answer


def test_a_kernel_handed_out_whole_gets_no_markers():
    source = source_notebook(
        json.loads((ROOT / "notebooks" / "06_making_it_fast.ipynb").read_text())
    )
    (answer,) = [
        "".join(c["source"])
        for c in source["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "faster_solution"
    ]
    kernel = answer.split("def fast_matmul(")[0]
    assert BEGIN not in kernel and "tl.dot(a, b, acc)" in kernel


def test_a_correct_submission_gets_full_marks(scores):
    assert scores["alice"] == (4.0, 4.0)


def test_an_untouched_submission_gets_none(scores):
    assert scores["bob"] == (0.0, 4.0)


def test_edited_test_cells_are_restored_and_give_no_marks(scores):
    assert scores["eve"] == (0.0, 4.0)


def test_a_first_cell_that_redefines_the_checks_gets_no_marks(scores):
    assert scores["mallory"] == (0.0, 4.0)


def test_a_notebook_without_cell_ids_is_scored_cell_by_cell(alices_cells):
    assert alices_cells == dict.fromkeys(
        ["check_transpose_v1", "check_transpose_v2", "check_transpose", "check_scaled_matmul"], 1
    )


def test_an_autotuned_transpose_scores(alices_cells):
    assert alices_cells["check_transpose"] == 1


def test_a_self_test_under_main_does_not_change_the_score(alices_cells):
    assert alices_cells["check_transpose_v1"] == 1


SHIPPED = ROOT / "course" / "nbgrader_config.py"


def test_the_shipped_config_scores_with_the_course_grader_after_execute():
    from nbgrader.preprocessors import Execute
    from traitlets.config import Config

    from tmm_course.teach.nbgrader_grade import CourseGrader

    assert SHIPPED.read_text(encoding="utf-8") == nbgrader_export.CONFIG  # the export's too
    c = Config()
    exec(
        compile(SHIPPED.read_text(encoding="utf-8"), str(SHIPPED), "exec"),
        {"get_config": lambda: c, "__file__": str(SHIPPED)},
    )  # as nbgrader loads it
    order = c.Autograde.autograde_preprocessors
    assert order.index(CourseGrader) == order.index(Execute) + 1
    assert c.CourseDirectory.root == str(SHIPPED.parent)


def test_the_readmes_nbgrader_commands_use_the_shipped_config():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("nbgrader ")]
    assert len(commands) == 2
    assert all("--NbGrader.config_file=course/nbgrader_config.py" in c for c in commands)


@pytest.mark.parametrize(
    "lesson", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem
)
def test_every_graded_lesson_exports_its_skeleton_outside_the_markers(lesson):
    course = json.loads(lesson.read_text(encoding="utf-8"))
    exercises = exercises_of(course)
    if not exercises:
        pytest.skip("no graded exercise")
    source = source_notebook(course)
    cells = {c.get("id"): c for c in source["cells"]}
    for exercise in exercises:
        answer = "".join(cells[exercise.cell_id]["source"])
        stub = "".join(
            next(c for c in course["cells"] if c.get("id") == exercise.cell_id)["source"]
        )
        outside = re.sub(rf"[ \t]*{BEGIN}\n.*?{END}\n", "", answer, flags=re.S)
        for line in stub.splitlines():  # its signatures and hints stay, and its launchers'
            if line.startswith(("def ", "@")) or line.strip().startswith("#"):  # first lines
                assert line in outside.splitlines(), (exercise.name, line)
            elif "#" in line:  # pass  # your code: ...
                assert line[line.index("#") :] in outside, (exercise.name, line)
        assert BEGIN in answer and "NotImplementedError" not in answer, exercise.name
        compile(answer, exercise.name, "exec")  # the markers are comments: it still runs
    tests = [c for c in source["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    assert len(tests) == len(exercises) and all(c["metadata"]["nbgrader"]["locked"] for c in tests)


def test_nbgrader_releases_every_graded_lesson_with_its_skeleton(tmp_path):
    """``nbgrader generate_assignment`` on every graded lesson's export (one assignment): each
    answer cell keeps the exercise's signatures and hints, its solutions replaced by
    nbgrader's stub, and still compiles."""
    lessons = [p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))
               if exercises_of(json.loads(p.read_text(encoding="utf-8")))]  # fmt: skip
    for lesson in lessons:
        exported = source_notebook(json.loads(lesson.read_text(encoding="utf-8")))
        target = tmp_path / "source" / "all" / lesson.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(exported), encoding="utf-8")
    nbgrader(tmp_path, "generate_assignment", "all")
    for lesson in lessons:
        course = json.loads(lesson.read_text(encoding="utf-8"))
        released = json.loads((tmp_path / "release" / "all" / lesson.name).read_text())
        cells = {c.get("id"): "".join(c["source"]) for c in released["cells"]}
        for exercise in exercises_of(course):
            stub = "".join(
                next(c for c in course["cells"] if c.get("id") == exercise.cell_id)["source"]
            )
            answer = cells[exercise.cell_id]
            assert "YOUR CODE HERE" in answer and BEGIN not in answer, exercise.name
            signatures = [ln for ln in stub.splitlines() if ln.startswith(("def ", "@"))]
            assert all(line in answer.splitlines() for line in signatures), exercise.name
            compile(answer, exercise.name, "exec")
