"""Batch grading of honest work: correct submissions pass, untouched ones are not_implemented,
planted bugs fail; the rules on exercise cells, the CSV, the inbox reads and the refusal
without isolation. (tests/test_grade_attacks.py holds the forgeries and break-outs.)"""

from __future__ import annotations

import csv
import inspect
import json
import os

import bug_bank
import pytest
import torch
from conftest import ROOT

import tmm_course
from tmm_course.exercises import BY_NAME
from tmm_course.exercises.spec import Exercise, generator
from tmm_course.kernels import pitfalls
from tmm_course.teach import exercise_rules, graded_notebook, judge, sandbox, worker
from tmm_course.teach.grade import graded_exercises, main
from tmm_course.teach.release import solved_notebook, student_notebook, typed_in
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


# honest but unusual answers (tests/test_nbgrader.py hands nbgrader the same)
AUTOTUNED_TRANSPOSE = """
@triton.autotune(
    configs=[triton.Config({"BLOCK_M": 16, "BLOCK_N": 32}),
             triton.Config({"BLOCK_M": 32, "BLOCK_N": 16})],
    key=["M", "N"],
)
@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :] * stride_xn, mask=mask)
    tl.store(out_ptr + offs_n[None, :] * stride_om + offs_m[:, None] * stride_on, tile, mask=mask)


def transpose(x, out):
    M, N = x.shape
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    transpose_kernel[grid](x, out, M, N, *x.stride(), *out.stride())
"""
SELF_TEST = """

if __name__ == "__main__":  # my own test, when the cell runs
    x = torch.arange(64 * 96, dtype=torch.float32, device=tmm_course.DEVICE).reshape(64, 96)
    out = torch.empty(96, 64, device=tmm_course.DEVICE)
    transpose_v1(x, out)
    assert torch.equal(out, x.T), "my transpose is wrong"
    print("self-test passed")
"""


def typed_in_answer(cell: str) -> str:
    return typed_in(solution_cell("05_homework_transpose.ipynb", cell))


def without_ids(notebook: dict) -> dict:
    """``notebook`` as nbformat 4.4 writes it: no cell ids."""
    for cell in notebook["cells"]:
        cell.pop("id", None)
    notebook["nbformat_minor"] = 4
    return notebook


def unusual() -> dict:
    """The student copy saved as nbformat 4.4 (no cell ids), Part 1 answered with a self-test
    under ``__main__``, Part 3 with an autotuned kernel, the others as handed out."""
    notebook = with_exercise(student(), "transpose_v1", typed_in_answer("c05") + SELF_TEST)
    return without_ids(with_exercise(notebook, "transpose", AUTOTUNED_TRANSPOSE))


# run when Part 1's cell runs, never carried: were the exercises to share one process, the later
# ones would launch grids of no programs and find a torch that cannot allocate
MEDDLING = """

def _meddle():
    import torch
    import triton

    triton.cdiv = lambda a, b: 0
    torch.empty = torch.empty_like = None


_meddle()
"""


def meddling() -> dict:
    """The solved homework whose Part 1 cell also breaks Triton and torch in its own process."""
    return with_exercise(solved(), "transpose_v1", typed_in_answer("c05") + MEDDLING)


@pytest.fixture(scope="module")
def homework(tmp_path_factory):
    inbox = tmp_path_factory.mktemp("homework")
    for name, notebook in (("correct.ipynb", solved()), ("untouched.ipynb", student()),
                           ("bug.ipynb", planted_bug(solved())), ("unusual.ipynb", unusual()),
                           ("meddling.ipynb", meddling())):  # fmt: skip
        (inbox / name).write_text(json.dumps(notebook))
    started = []  # the name of each worker process started
    with pytest.MonkeyPatch.context() as patch:
        start = sandbox.start
        patch.setattr(sandbox, "start", lambda *a, **k: started.append(a[2]) or start(*a, **k))
        rows = grade(inbox, HOMEWORK)
    return {"rows": rows, "started": started}


def test_the_homework_names_its_exercises():
    names = [e.name for e in graded_notebook.exercises_of(load(HOMEWORK))]
    assert names == ["transpose_v1", "transpose_v2", "transpose", "scaled_matmul"]


GRADED = ("00_start_here", "01_tile_fill", "02_broadcasting", "03_strides", "04_tiled_matmul",
          "05_homework_transpose", "06_making_it_fast", "07_persistent_tma", "08_racing_cublas",
          "09_pitfalls", "10_low_precision")  # fmt: skip


@pytest.mark.parametrize("notebook", GRADED)
def test_every_graded_exercise_has_a_spec_at_its_cell(notebook):
    found = graded_exercises(load(ROOT / "notebooks" / f"{notebook}.ipynb"))
    assert found and all(spec.cells.exercise == e.cell_id for e, spec in found)


@needs_isolation
def test_honest_work_is_graded_on_its_merits(homework):
    homework = homework["rows"]
    assert verdicts(homework, "correct.ipynb") == dict.fromkeys(
        ["transpose_v1", "transpose_v2", "transpose", "scaled_matmul"], "pass"
    )
    assert set(verdicts(homework, "untouched.ipynb").values()) == {"not_implemented"}
    bug = verdicts(homework, "bug.ipynb")
    assert bug["transpose"] == "fail" and bug["transpose_v2"] == bug["scaled_matmul"] == "pass"
    assert {r["isolation"] for r in homework} == {"isolated"}


@needs_isolation
def test_each_exercise_starts_from_the_setup_cell_not_the_one_before(homework):
    found = verdicts(homework["rows"], "meddling.ipynb")
    assert found == {
        "transpose_v1": "fail",  # its own launcher met what its cell broke
        "transpose_v2": "pass",
        "transpose": "pass",
        "scaled_matmul": "pass",
    }


@needs_isolation
@pytest.mark.skipif(tmm_course.BACKEND != "interpreter", reason="a GPU's workers do not fork")
def test_a_submission_imports_triton_once_for_its_exercises(homework):
    # one recording worker (the setup cell; each exercise a fork of it), one replay worker
    kinds = sorted(name.split("-")[-1] for name in homework["started"])
    graded = 4  # the submissions with an exercise to run: all but untouched.ipynb
    assert kinds == ["replay"] * graded + ["setup"] * graded, kinds


@needs_isolation
def test_a_notebook_without_cell_ids_is_graded_cell_by_cell(homework):
    homework = homework["rows"]
    found = verdicts(homework, "unusual.ipynb")
    assert found["transpose_v2"] == found["scaled_matmul"] == "not_implemented"
    assert found["transpose_v1"] == found["transpose"] == "pass"


@needs_isolation
def test_an_autotuned_transpose_is_graded_on_its_kernels(homework):
    assert verdicts(homework["rows"], "unusual.ipynb")["transpose"] == "pass"


@needs_isolation
def test_a_self_test_under_main_in_the_cell_is_graded_on_its_kernels(homework):
    assert verdicts(homework["rows"], "unusual.ipynb")["transpose_v1"] == "pass"


def solution_cell(notebook: str, cell: str) -> str:
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    return next("".join(c["source"]) for c in cells if c.get("id") == cell)


# lessons 6-8: an attempt each that a learner could hand in, wrong in one place
PERFORMANCE_SLIPS = {
    "06_making_it_fast": {
        # the solution with a 128x128 tile: right values, 64 FLOP per byte where 85 are asked
        "faster": solution_cell("06_making_it_fast.ipynb", "mf24")
        .replace("solution_", "")
        .replace("BLOCK_N=256", "BLOCK_N=128")
        .split("\nassert ")[0],
        # the solution's prediction but for the spills: a thread's 255 registers hold them all
        "predict_knob": solution_cell("06_making_it_fast.ipynb", "mf22q")
        .replace("solution_", "")
        .replace('"spills": True', '"spills": False')
        .split("\nassert ")[0],
        # row-major order: GROUP_M ignored
        "grouped_tile": "@triton.jit\ndef k(t, grid_m, grid_n, GROUP_M: tl.constexpr):\n"
        "    pid = tl.program_id(0)\n    tl.store(t + 2 * pid, pid // grid_n)\n"
        "    tl.store(t + 2 * pid + 1, pid % grid_n)\n\n\n"
        "def grouped_tiles(tiles, grid_m, grid_n, group_m):\n"
        "    k[(grid_m * grid_n,)](tiles, grid_m, grid_n, GROUP_M=group_m)\n",
    },
    "07_persistent_tma": {
        # masked pointer loads (the bug bank's): the right values, no descriptor
        "descriptor_matmul": inspect.getsource(bug_bank.mm_kernel_for_descriptors.fn)
        + "\n\n"
        + inspect.getsource(bug_bank.pointer_matmul).replace(
            "def pointer_matmul(", "def descriptor_matmul("
        ),
    },
    "08_racing_cublas": {
        # slice 0 of each tile walks all of K, the other slices nothing: right values, the
        # work not shared (judged from the replay's loads, by the worker)
        "split_k": bug_bank.edited(
            solution_cell("08_racing_cublas.ipynb", "rc23"), bug_bank.UNSHARED_SLICES
        )
        .replace("solution_", "")
        .split("\nassert ")[0],
    },
}


@needs_isolation
@pytest.mark.parametrize("notebook", ["06_making_it_fast", "07_persistent_tma", "08_racing_cublas"])
def test_the_performance_lessons_are_graded_on_what_the_course_computes(tmp_path, notebook):
    reference = ROOT / "notebooks" / f"{notebook}.ipynb"
    slips = PERFORMANCE_SLIPS.get(notebook, {})
    slipped = student(reference)
    for name, source in slips.items():
        with_exercise(slipped, name, source, reference)
    inbox = tmp_path / notebook
    inbox.mkdir()
    for file, nb in (("solved", solved(reference)), ("untouched", student(reference)),
                     ("slipped", slipped)):  # fmt: skip
        (inbox / f"{file}.ipynb").write_text(json.dumps(nb))
    rows = grade(inbox, reference)
    names = [e.name for e in graded_notebook.exercises_of(load(reference))]
    assert verdicts(rows, "solved.ipynb") == dict.fromkeys(names, "pass")
    assert set(verdicts(rows, "untouched.ipynb").values()) == {"not_implemented"}
    found = {r["exercise"]: r for r in rows if r["submission"] == "slipped.ipynb"}
    assert {name: r["verdict"] for name, r in found.items()} == dict.fromkeys(slips, "fail")
    expected = {"faster": "goal_missed", "grouped_tile": "wrong_values",
                "predict_knob": "wrong_prediction",
                "descriptor_matmul": "no_descriptor", "split_k": "goal_missed"}  # fmt: skip
    for name, row in found.items():
        assert row["codes"].split()[0] == expected[name], row
    if "faster" in found:  # the knob to turn is named
        assert "BLOCK_M and BLOCK_N" in found["faster"]["detail"], found["faster"]
    if "predict_knob" in found:  # the wrong prediction, and the figure that shows it
        assert "spills (you said False): " in found["predict_knob"]["detail"]
    if "split_k" in found:
        assert "the K-slices do not share the work" in found["split_k"]["detail"], found["split_k"]


@needs_isolation
def test_lesson_9_is_judged_on_the_kernel_the_function_launches(tmp_path):
    inbox = tmp_path / "pitfalls"
    inbox.mkdir()
    kept = ("a", "b")  # two of the four mysteries: the other two are graded alike
    reference = load(PITFALLS)
    reference["cells"] = [c for c in reference["cells"]
                          if not c.get("id", "").startswith(("f7ec", "f7ed"))]  # fmt: skip
    trimmed = tmp_path / "09_pitfalls.ipynb"
    trimmed.write_text(json.dumps(reference))
    names = [f"fixed_{x}" for x in kept]
    exercises = graded_notebook.exercises_of(reference)
    fixes = graded_notebook.exercise_sources(solved_notebook(reference), exercises)
    other = inspect.getsource(pitfalls.correct_kernel.fn).replace(
        f"def {pitfalls.correct_kernel.fn.__name__}(", "def other_kernel("
    )
    broken, elsewhere, decoy = (student_notebook(reference) for _ in range(3))
    for x in kept:
        name = f"fixed_{x}"
        with_exercise(broken, name, pasted(pitfalls.MYSTERIES[x], name), trimmed)
        with_exercise(elsewhere, name, pasted(pitfalls.correct_kernel, name), trimmed)
        # the repaired kernel defined as asked, another correct kernel launched
        launches_other = f"{fixes[name]}\n{other}\n\ndef {name}(a, b, c):\n"
        launches_other += "    launcher(other_kernel)(a, b, c)\n"
        with_exercise(decoy, name, launches_other, trimmed)
    for file, notebook in (("broken", broken), ("elsewhere", elsewhere), ("decoy", decoy),
                           ("fixed", solved_notebook(reference))):  # fmt: skip
        (inbox / f"{file}.ipynb").write_text(json.dumps(notebook))
    rows = grade(inbox, trimmed)
    assert verdicts(rows, "fixed.ipynb") == dict.fromkeys(names, "pass")
    assert set(verdicts(rows, "broken.ipynb").values()) == {"fail"}
    for file in ("elsewhere.ipynb", "decoy.ipynb"):
        found = [r for r in rows if r["submission"] == file]
        assert {r["verdict"] for r in found} == {"fail"}
        assert all(r["codes"] == "not_the_fix" for r in found), found


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


def advice(source: str) -> list[str]:
    return exercise_rules.advice(source, [PRELUDE], [], ["transpose"])


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def transpose(x, out):\n    out.copy_(x.t())\n", ".copy_"),
        ("import gc as G\n", "imports gc"),
        ("exec('1')\n", "exec"),
        ("!ls\n", "magic"),
        ("def transpose(x, out):\n    out[:] = x\n", "writes tensor elements"),
        ("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n", "nested"),
    ],
)
def test_the_rules_only_advise(source, reason):
    found = advice(source)
    assert any(reason in r for r in found), found


def test_a_long_cell_gets_no_advice_rather_than_a_slow_reading():
    assert advice("x = 1\n" * (exercise_rules.ADVICE_SOURCE // 6 + 1)) == []


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


def replayed(name: str, fn, case):
    """What the grader concludes on ``case`` of exercise ``name`` for the function ``fn``
    (defined in a cell's way: its source at hand), recorded and replayed in this process."""
    spec = BY_NAME[name]
    header, blobs = judge.Trial.of(spec, case.again(generator(99))).request("record")
    data = worker._record(fn, header, blobs)
    record = judge.read_record(data)
    assert isinstance(record, dict), record
    trial = judge.Trial.of(spec, case)
    early = judge.judge_record(trial, record)
    if early is not None:
        return early
    replayer = worker.Replayer()
    replayer.define(record)
    header, blobs = trial.request("replay", [data])
    header["plan"] = 0
    facts, returned = replayer.replay(header, blobs)
    return judge.judge_replay(trial, facts, returned if facts.get("ok") else None)


def cell(source: str, name: str):
    """``name`` as a notebook cell defines it (its source kept, as Jupyter keeps it)."""
    import linecache

    import triton
    import triton.language as tl

    filename = f"<cell {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {"__name__": "__main__", "torch": torch, "triton": triton, "tl": tl}
    exec(compile(source, filename, "exec"), scope)
    return scope[name]


TRANSPOSE = """
@triton.jit
def t_kernel(x_ptr, out_ptr, M, N, sxm, sxn, som, son, BLOCK: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(x_ptr + offs_m[:, None] * sxm + offs_n[None, :] * sxn, mask=mask)
    tl.store(out_ptr + offs_n[None, :] * som + offs_m[:, None] * son, tile, mask=mask)


def transpose(x, out):
    M, N = x.shape
    t_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](x, out, M, N, *x.stride(),
                                                       *out.stride(), BLOCK=32)
"""


COPY = """
@triton.jit
def copy_kernel(src_ptr, out_ptr, n, cols, out_row, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    value = tl.load(src_ptr + offs, mask=offs < n)
    tl.store(out_ptr + (offs // cols) * out_row + offs % cols, value, mask=offs < n)
"""


def test_the_judge_replays_the_kernels_on_its_own_inputs():
    case = next(c for c in BY_NAME["transpose"].draw(generator(1), "interpreter")
                if c.shape == (33, 17))  # fmt: skip
    assert replayed("transpose", cell(TRANSPOSE, "transpose"), case).passed
    torch_did_it = TRANSPOSE.replace(
        "*out.stride(), BLOCK=32)",
        "*out.stride(), BLOCK=32)\n    out.copy_(x.t())  # overwritten: never judged",
    )
    assert replayed("transpose", cell(torch_did_it, "transpose"), case).passed
    answer_in = (
        COPY
        + "def transpose(x, out):\n    answer = x.t().contiguous()\n"
        + (
            "    copy_kernel[(triton.cdiv(out.numel(), 64),)](answer, out, out.numel(), "
            "out.shape[1], out.stride(0), BLOCK=64)\n"
        )
    )
    assert replayed("transpose", cell(answer_in, "transpose"), case).code == "host_copy"


def test_an_unmasked_store_is_named_by_the_guard_or_the_canaries():
    case = next(c for c in BY_NAME["transpose"].draw(generator(1), "interpreter")
                if c.shape == (33, 17))  # fmt: skip
    found = replayed("transpose", cell(TRANSPOSE.replace(", tile, mask=mask)", ", tile)"),
                                       "transpose"), case)  # fmt: skip
    assert found.code == "out_of_bounds_write", found


def test_every_input_sits_between_nan_margins():
    for spec in (e for e in BY_NAME.values() if isinstance(e, Exercise)):
        for case in spec.draw(generator(7), "interpreter")[:3]:
            trial = judge.Trial.of(spec, case)
            for buffer in trial.buffers[:-1]:
                covered = buffer.covered().nonzero()
                first, last = int(covered[0]), int(covered[-1])
                margin = 128  # rows of a block overshoot, at least
                assert first >= margin and buffer.storage.numel() - 1 - last >= margin
                assert buffer.storage[:first].isnan().all()
                assert buffer.storage[last + 1 :].isnan().all()
                assert buffer.storage[~buffer.covered()].isnan().all()  # the gaps too


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
