"""Batch grading of honest work: correct submissions pass, untouched ones are not_implemented,
planted bugs fail; the rules on exercise cells, the CSV, the inbox reads and the refusal
without isolation. (tests/test_grade_attacks.py holds the forgeries and break-outs.)"""

from __future__ import annotations

import csv
import inspect
import json
import os

import pytest
from conftest import ROOT

import tmm_course
from tmm_course.kernels import pitfalls
from tmm_course.teach import exercise_rules, graded_notebook, judge, sandbox
from tmm_course.teach.grade import graded_exercises, main
from tmm_course.teach.release import solved_notebook, student_notebook
from tmm_course.teach.safe_io import Unreadable, csv_cell, read_capped, remove_tree

HOMEWORK = ROOT / "notebooks" / "05_homework_transpose.ipynb"
PITFALLS = ROOT / "notebooks" / "09_pitfalls.ipynb"
# CI sets TMM_REQUIRE_ISOLATION=1: there a missing sandbox fails these tests instead of skipping
needs_isolation = pytest.mark.skipif(
    sandbox.problem() is not None and os.environ.get("TMM_REQUIRE_ISOLATION") != "1",
    reason=f"full isolation unavailable: {sandbox.problem()}",
)


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def exercise(name: str, reference=HOMEWORK) -> graded_notebook.Exercise:
    return next(e for e in graded_notebook.exercises_of(load(reference)) if e.name == name)


def with_exercise(notebook: dict, name: str, source: str, reference=HOMEWORK) -> dict:
    """``notebook`` with the exercise cell graded as ``name`` replaced by ``source``."""
    cell_id = exercise(name, reference).cell_id
    for cell in notebook["cells"]:
        if cell.get("id") == cell_id:
            cell["source"] = source
    return notebook


def student(reference=HOMEWORK) -> dict:
    return student_notebook(load(reference))


def solved(reference=HOMEWORK) -> dict:
    return solved_notebook(load(reference))


def planted_bug(notebook):
    """The solved homework with Part 3's masks removed: wrong only at ragged edges."""
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if "def transpose_kernel(" in source:
            cell["source"] = source.replace(", mask=mask)", ")")
    return notebook


def pasted(kernel, name: str) -> str:
    """A lesson 9 exercise answered by pasting the course's broken kernel under its own name."""
    source = inspect.getsource(kernel.fn).replace(
        f"def {kernel.fn.__name__}(", f"def {name}_kernel("
    )
    return f"{source}\n\ndef {name}(a, b, c):\n    launcher({name}_kernel)(a, b, c)\n"


def grade(inbox, reference, *extra: str, timeout: int = 180) -> list[dict]:
    out = inbox.parent / f"{inbox.name}.csv"
    argv = [str(inbox), "--reference", str(reference), "--out", str(out),
            "--timeout", str(timeout), "--jobs", "2", *extra]  # fmt: skip
    assert main(argv) == 0
    with out.open(newline="") as f:
        return list(csv.DictReader(f))


def verdicts(rows, submission):
    return {r["exercise"]: r["verdict"] for r in rows if r["submission"] == submission}


@pytest.fixture(scope="module")
def homework(tmp_path_factory):
    inbox = tmp_path_factory.mktemp("homework")
    for name, notebook in (("correct.ipynb", solved()), ("untouched.ipynb", student()),
                           ("bug.ipynb", planted_bug(solved()))):  # fmt: skip
        (inbox / name).write_text(json.dumps(notebook))
    return grade(inbox, HOMEWORK)


def test_the_homework_names_its_exercises():
    names = [e.name for e in graded_notebook.exercises_of(load(HOMEWORK))]
    assert names == ["transpose_v1", "transpose_v2", "transpose", "scaled_matmul"]


def test_every_graded_exercise_has_a_judge_entry():
    for notebook in ("04_tiled_matmul", "05_homework_transpose", "09_pitfalls"):
        found = graded_exercises(load(ROOT / "notebooks" / f"{notebook}.ipynb"))
        assert found and all(entry.cell_id == e.cell_id for e, entry in found)


@needs_isolation
def test_honest_work_is_graded_on_its_merits(homework):
    assert verdicts(homework, "correct.ipynb") == dict.fromkeys(
        ["transpose_v1", "transpose_v2", "transpose", "scaled_matmul"], "pass"
    )
    assert set(verdicts(homework, "untouched.ipynb").values()) == {"not_implemented"}
    bug = verdicts(homework, "bug.ipynb")
    assert bug["transpose"] == "fail" and bug["transpose_v2"] == bug["scaled_matmul"] == "pass"
    assert {r["isolation"] for r in homework} == {"isolated"}


@needs_isolation
def test_lesson_9s_mysteries_fail_their_repairs_pass_and_another_matmul_is_not_a_repair(tmp_path):
    inbox = tmp_path / "pitfalls"
    inbox.mkdir()
    names = [f"fixed_{x}" for x in pitfalls.MYSTERIES]
    broken = student(PITFALLS)
    elsewhere = student(PITFALLS)
    for x, kernel in pitfalls.MYSTERIES.items():
        broken = with_exercise(broken, f"fixed_{x}", pasted(kernel, f"fixed_{x}"), PITFALLS)
        elsewhere = with_exercise(
            elsewhere, f"fixed_{x}", pasted(pitfalls.correct_kernel, f"fixed_{x}"), PITFALLS
        )
    (inbox / "broken.ipynb").write_text(json.dumps(broken))
    (inbox / "elsewhere.ipynb").write_text(json.dumps(elsewhere))
    (inbox / "fixed.ipynb").write_text(json.dumps(solved(PITFALLS)))
    rows = grade(inbox, PITFALLS)
    assert verdicts(rows, "fixed.ipynb") == dict.fromkeys(names, "pass")
    assert set(verdicts(rows, "broken.ipynb").values()) == {"fail"}
    other = [r for r in rows if r["submission"] == "elsewhere.ipynb"]
    assert {r["verdict"] for r in other} == {"fail"}
    assert all("not_the_fix" in r["codes"] for r in other)


def test_without_isolation_the_grader_refuses(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sandbox, "problem", lambda: "the grader is not running as root")
    argv = [str(tmp_path), "--reference", str(HOMEWORK), "--out", str(tmp_path / "g.csv")]
    assert main(argv) == 2
    assert "refusing to grade: the grader is not running as root" in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists()


def test_with_no_isolation_every_row_says_unisolated(tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "untouched.ipynb").write_text(json.dumps(student()))
    (inbox / "notes.txt").write_text("not a notebook")
    rows = grade(inbox, HOMEWORK, "--no-isolation")
    assert {r["isolation"] for r in rows} == {"unisolated"}
    assert set(verdicts(rows, "untouched.ipynb").values()) == {"not_implemented"}
    assert verdicts(rows, "notes.txt") == {"*": "invalid"}


PRELUDE = graded_notebook.setup_source(load(HOMEWORK))


def reasons(source: str) -> list[str]:
    return exercise_rules.review_reasons(source, [PRELUDE], (), ["transpose"])


@pytest.mark.parametrize(
    "source",
    [
        "import math\nimport numpy as np\nimport tmm_course\n"
        "# global memory, check_result, display\ncheck_result = 3\n"
        "def blocks(n):\n    return math.ceil(n / 32) if np.prod([n]) else 0\n"
        "@triton.jit\ndef k(x_ptr, o_ptr, M, N, B: tl.constexpr):\n"
        "    offs = tl.program_id(0) * B + tl.arange(0, B)\n"
        "    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < M), mask=offs < M)\n"
        "def transpose(x, out):\n    M, N = x.shape\n    print('debug', M, N, x.stride())\n"
        "    display(x)\n    grid = lambda META: (blocks(M), triton.cdiv(N, META['B']))\n"
        "    k[grid](x, out, M, N, *x.stride(), B=32)\n",
    ],
)
def test_honest_unusual_cells_pass_the_rules(source):
    assert reasons(source) == []


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def transpose(x, out):\n    out.copy_(x.t())\n", ".copy_"),
        ("import torch as T\ndef transpose(x, out):\n    T.transpose(x, 0, 1)\n", "torch"),
        ("import gc as G\n", "imports gc"),
        ("exec('1')\n", "exec"),
        ("def transpose(x, out):\n    getattr(out, 'co' + 'py_')(x)\n", "getattr"),
        ("!ls\n", "magic"),
        ("%time 1\n", "magic"),
        ("def transpose(x, out):\n    out[:] = x\n", "writes tensor elements"),
        ("def transpose(x, out):\n    k[(1,)](sum(x[i] * 2 for i in range(3)), out)\n", "tensor"),
        ("x = ().__class__\n", "private"),
        ("@triton.jit\ndef k(x):\n    torch.zeros(1)\n", "kernel uses torch"),
        ("def transpose(x, out):\n    k[(1,)](out, float(x))\n", "reads tensor values"),
        ("def transpose(x, out):\n    k[(1,)](out, len(str(x)))\n", "reads tensor values"),
        ("def transpose(x, out):\n    print(f'{x}')\n    s = f'{x}'\n", "formats tensor"),
        ("@triton.jit\ndef k(x):\n    return x.T\ndef transpose(x, out):\n    k(x)\n", "grid"),
        ("def transpose(x, out):\n    table['t'](x)\n", "picked out of a container"),
        ("def transpose(x, out):\n    if x:\n        pass\n", "truth value"),
        ("@triton.jit\ndef k(x):\n    x.copy_(x)\n", "a kernel reaches .copy_"),
        ("import math\ndef transpose(x, out):\n    math.prod(x)\n", "hands a tensor to math.prod"),
        ("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n", "nested"),
    ],
)
def test_cells_that_compute_or_hide_what_they_call_are_sent_for_review(source, reason):
    found = reasons(source)
    assert any(reason in r for r in found), found


def test_duplicated_and_misplaced_exercise_cells_are_errors_not_choices():
    notebook = solved()
    cell_id = exercise("transpose").cell_id
    copy = next(dict(c) for c in notebook["cells"] if c.get("id") == cell_id)
    notebook["cells"].append(copy)
    markdown = next(c for c in notebook["cells"] if c.get("id") == exercise("transpose_v1").cell_id)
    markdown["cell_type"] = "markdown"
    found = graded_notebook.exercise_sources(notebook, graded_notebook.exercises_of(load(HOMEWORK)))
    assert isinstance(found["transpose"], graded_notebook.SourceError)
    assert isinstance(found["transpose_v1"], graded_notebook.SourceError)
    assert isinstance(found["scaled_matmul"], str)


def test_csv_cells_cannot_be_formulas():
    assert csv_cell('=HYPERLINK("http://x", "y").ipynb').startswith("'=")
    for text in ("+1", "-1", "@SUM(A1)"):
        assert csv_cell(text) == "'" + text
    assert csv_cell("plain\nline") == "plain line"


def test_inbox_reads_refuse_links_fifos_and_large_files(tmp_path):
    (tmp_path / "big.ipynb").write_bytes(b"x" * 100)
    os.symlink("/dev/zero", tmp_path / "link.ipynb")
    os.mkfifo(tmp_path / "fifo.ipynb")
    for name in ("big.ipynb", "link.ipynb", "fifo.ipynb", "../x"):
        with pytest.raises(Unreadable):
            read_capped(tmp_path, name, 10)


def test_the_judge_names_a_wrong_answer_and_a_stray_write():
    case = judge.transpose_cases(strided=False, ragged=False)(judge.seed_generator(1))[1]
    out = case.buffers[case.output]
    right = out.storage.clone()
    out.view(right).copy_(case.expected.float())
    blobs = [b.storage.numpy().tobytes() for b in case.buffers]
    assert judge.judge_case(case, [blobs[0], right.numpy().tobytes()], None).passed
    stray = right.clone()
    stray[0] += 1  # the canary before the output
    outcome = judge.judge_case(case, [blobs[0], stray.numpy().tobytes()], None)
    assert outcome.code == "out_of_bounds_write"
    assert judge.judge_case(case, blobs, None).code == "unwritten"


def _run_in_process(case: judge.Case, fn) -> list[bytes]:
    """What a worker sends back for ``case`` after ``fn`` ran on it (no sandbox)."""
    storages = [b.storage.clone().to(tmm_course.DEVICE) for b in case.buffers]
    args = [b.view(s) for s, b in zip(storages, case.buffers, strict=True)]
    fn(*[args[i] for i in case.order])
    return [s.cpu().numpy().tobytes() for s in storages]


def test_every_input_sits_between_nan_margins():
    for entry in judge.EXERCISES:
        for case in entry.cases(judge.seed_generator(7)):
            for index, buffer in enumerate(case.buffers):
                if index == case.output:
                    continue
                covered = buffer.covered().nonzero()
                first, last = int(covered[0]), int(covered[-1])
                margin = judge.INPUT_MARGIN * max(buffer.size)
                assert first >= margin and buffer.storage.numel() - 1 - last >= margin
                assert buffer.storage[:margin].isnan().all()  # the gaps of a layout aside
                assert buffer.storage[-margin:].isnan().all()


def test_a_read_past_an_input_meets_nan():
    # mystery a's K mask never moves: its last K-step reads rows of B past K, outside B
    cases = judge.matmul_cases(judge.seed_generator(1))
    fn = pitfalls.launcher(pitfalls.mystery_a_kernel)
    deep = next(c for c in cases if c.label.endswith("x48 contiguous"))  # 2 K-steps of 32
    outcome = judge.judge_case(deep, _run_in_process(deep, fn), None)
    assert not outcome.passed  # NaN cells: "unwritten" where the output's poison was NaN too
    assert outcome.code in {"wrong_values", "unwritten"}


def test_the_broken_kernel_pasted_unchanged_is_not_a_fix():
    entry = next(e for _, e in graded_exercises(load(PITFALLS)) if e.fix_of)
    kernel = getattr(pitfalls, entry.fix_of)
    problem = judge.fix_problem(entry, pasted(kernel, entry.kernel.removesuffix("_kernel")))
    assert problem == f"{entry.kernel} is {entry.fix_of} unchanged: find its bug and fix it"


def test_a_deep_tree_with_links_out_is_removed_without_recursion(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    root = tmp_path / "scratch"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(2200):  # 4400 characters of path: more than a path may have (4096)
        os.mkdir("d", dir_fd=fd)
        (child := os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)) and os.close(fd)
        fd = child
    os.symlink(outside, "link", dir_fd=fd)
    os.close(fd)
    remove_tree(root)
    assert not root.exists() and (outside / "keep").exists()


def test_without_a_writable_cgroup_nothing_is_claimed(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "CGROUP", tmp_path / "absent")
    group = sandbox.Cgroup("probe", sandbox.Limits())
    assert group.limited == [] and group.folders == [] and group.kill_file is None
    group.kill()  # nothing to kill: returns at once


@needs_isolation
def test_this_hosts_cgroups_cap_memory_and_processes():
    group = sandbox.Cgroup(f"probe-{os.getpid()}", sandbox.Limits())
    try:
        if not group.folders:
            pytest.skip("no writable cgroup here: per-process limits apply (README)")
        assert {"memory", "pids"} <= set(group.limited), group.limited
    finally:
        group.kill()
    assert not any(folder.exists() for folder in group.folders)


def test_a_python_under_tmp_is_bound_on_top_of_the_private_tmp(monkeypatch):
    from itertools import pairwise
    from pathlib import Path

    venv = Path("/tmp/checkout/.venv")
    monkeypatch.setattr(sandbox, "binds", lambda: [venv])
    command = sandbox.bwrap_command(Path("/srv/site"), 12345, sandbox.Limits(), ["python"])
    pairs = list(pairwise(command))
    private_tmp = pairs.index(("--tmpfs", "/tmp"))
    assert pairs.index(("--ro-bind", str(venv))) > private_tmp  # not hidden under it
    assert pairs.index(("--dir", "/tmp/checkout")) > private_tmp
