"""The grader's outer loop at class scale: deadlines on the channel, the watchdog that always
moves on, shards run as processes by the Slurm job-array script and merged equal to one run,
the report (rendered in headless Chromium) and the LMS export.

The Slurm script runs here as the job array would run it (its task variables set, one process
per task): starting a Slurm cluster (slurmctld, slurmd, munge, a node definition) is beyond a
test's minutes on a CI machine, so the script's own logic is what is tested.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, skip_for_missing
from test_grade import HOMEWORK, exercise, solved, student, with_exercise

from tmm_course.teach import clients, grade, graded_notebook, report, sandbox, shards, wire
from tmm_course.teach.safe_io import entry_key

SLURM = ROOT / "tools" / "slurm" / "grade-array.sbatch"
KUBERNETES = ROOT / "tools" / "kubernetes" / "grade-indexed-job.yaml"


def test_a_write_nobody_reads_ends_at_its_deadline():
    read, write = os.pipe()
    try:
        start = time.monotonic()
        with pytest.raises(wire.Timeout):
            wire.send(write, {"op": "call"}, [b"x" * 2**20], time.monotonic() + 0.5)
        assert time.monotonic() - start < 3
    finally:
        os.close(read)
        os.close(write)


def test_the_worker_takes_a_large_cell_and_the_judge_refuses_a_large_header():
    for judge_side, fits in ((False, True), (True, False)):
        read, write = os.pipe()
        cell = {"op": "run", "source": "#" + "x" * (200 * 2**10)}

        def send(fd: int = write) -> None:
            with contextlib.suppress(wire.ChannelError):  # the refusing side hangs up
                wire.send(fd, cell)  # noqa: B023

        writer = threading.Thread(target=send)
        writer.start()
        try:
            if fits:
                header, _ = wire.receive(read, time.monotonic() + 10, [] if judge_side else None)
                assert header["source"] == cell["source"]
            else:
                with pytest.raises(wire.ChannelError, match="at most"):
                    wire.receive(read, time.monotonic() + 10, [] if judge_side else None)
        finally:
            os.close(read)
            writer.join(timeout=5)
            os.close(write)


class _Stuck:
    """A stand-in grader: the first entry never returns, the second raises, the rest pass."""

    def __init__(self, seconds: float) -> None:
        self.limits = sandbox.Limits(seconds=seconds)
        self.exercises = [(type("E", (), {"name": n})(), None) for n in ("one", "two")]
        self.isolation = "isolated"

    def row(self, name, exercise, verdict, codes="", detail=""):
        return grade.Row(name, exercise, verdict, codes, detail, self.isolation)

    def grade(self, inbox, name):
        if name == "a_stuck":
            threading.Event().wait()  # a wait nothing ends, as a hung analysis would
        if name == "b_broken":
            raise RecursionError("maximum recursion depth exceeded")
        return [self.row(name, e.name, "pass") for e, _ in self.exercises]


def test_with_one_job_a_stuck_submission_gets_timeout_rows_and_the_rest_are_graded(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(grade, "WATCHDOG_GRACE", 0.5)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for name in ("a_stuck", "b_broken", "c_fine"):
        (inbox / name).write_text("x")
    out = grade.CsvOut(tmp_path / "grades.csv", resume=False)
    start = time.monotonic()
    rows = grade.grade_folder(inbox, _Stuck(0.5), out, jobs=1, progress=False)
    assert time.monotonic() - start < 10
    found = {(r.submission, r.exercise): r.verdict for r in rows}
    assert found == {("a_stuck", "one"): "timeout", ("a_stuck", "two"): "timeout",
                     ("b_broken", "one"): "error", ("b_broken", "two"): "error",
                     ("c_fine", "one"): "pass", ("c_fine", "two"): "pass"}  # fmt: skip
    assert len(report.read_rows(out.path)) == 6


def test_shards_are_deterministic_and_cover_the_inbox_once():
    keys = [entry_key(f"student{i:03}.ipynb") for i in range(200)]
    parts = [[k for k in keys if shards.shard_of(k, 4) == s] for s in range(4)]
    assert sorted(k for part in parts for k in part) == sorted(keys)
    assert all(30 < len(part) < 70 for part in parts), [len(p) for p in parts]
    assert shards.shard_of(keys[0], 4) == shards.shard_of(keys[0], 4)


def _inbox(root: Path) -> Path:
    inbox = root / "inbox"
    inbox.mkdir()
    (inbox / "untouched.ipynb").write_text(json.dumps(student()))
    (inbox / "corrupt.ipynb").write_text('{"cells": [')
    for i in range(6):
        (inbox / f"notes{i}.txt").write_text("not a notebook")
    return inbox


def _rows(path: Path) -> list[tuple]:
    return sorted(
        (r["key"], r["exercise"], r["verdict"], r["codes"])
        for r in report.read_rows(path)
        if r["key"]
    )


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """Four shards as the job array runs them, merged; and the same inbox in one run."""
    root = tmp_path_factory.mktemp("sharded")
    inbox = _inbox(root)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMM_PYTHON": sys.executable,
           "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0"}  # fmt: skip
    command = ["bash", str(SLURM), str(inbox), str(root / "graded"), "--reference",
               str(HOMEWORK), "--timeout", "120", "--no-isolation"]  # fmt: skip
    tasks = [
        subprocess.Popen(
            command,
            env={**env, "SLURM_ARRAY_TASK_ID": str(k)},
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for k in range(4)
    ]
    for task in tasks:
        log = task.communicate(timeout=600)[0].decode(errors="replace")
        assert task.returncode == 0, log[-3000:]
    parts = sorted((root / "graded").glob("grades.*-of-4.csv"))
    whole = root / "whole.csv"
    argv = [str(inbox), "--reference", str(HOMEWORK), "--out", str(whole), "--timeout", "120",
            "--no-isolation", "--no-progress"]  # fmt: skip
    assert grade.main(argv) == 0
    return {"root": root, "inbox": inbox, "parts": parts, "whole": whole}


def test_four_shards_merged_equal_one_run(sharded):
    merged = sharded["root"] / "merged.csv"
    argv = ["merge", *map(str, sharded["parts"]), "--inbox", str(sharded["inbox"])]
    assert grade.main([*argv, "--out", str(merged)]) == 0
    assert len(sharded["parts"]) == 4
    assert _rows(merged) == _rows(sharded["whole"])
    runs = json.loads(report.companions(merged)["json"].read_text())
    assert sorted(run["shard"] for run in runs) == ["0/4", "1/4", "2/4", "3/4"]
    assert report.companions(sharded["parts"][2])["html"].name == "grades.2-of-4.html"
    assert report.companions(merged)["html"].is_file()


def test_merge_refuses_doubles_and_names_what_is_missing(sharded, capsys):
    parts, inbox = list(map(str, sharded["parts"])), str(sharded["inbox"])
    out = str(sharded["root"] / "refused.csv")
    assert grade.main(["merge", *parts, parts[0], "--inbox", inbox, "--out", out]) == 1
    assert "graded in more than one shard" in capsys.readouterr().err
    fullest = max(sharded["parts"], key=lambda p: len(report.read_rows(p)))
    lost = {r["submission"] for r in report.read_rows(fullest)}
    rest = [str(p) for p in sharded["parts"] if p != fullest]
    assert grade.main(["merge", *rest, "--inbox", inbox, "--out", out]) == 1
    err = capsys.readouterr().err
    assert "have no rows" in err and "run their shard again" in err
    assert all(name in err for name in lost), (lost, err)
    assert not Path(out).exists()


def test_the_kubernetes_job_runs_the_same_entry_point_by_completion_index():
    job = yaml.safe_load(KUBERNETES.read_text())
    spec = job["spec"]
    assert job["kind"] == "Job" and spec["completionMode"] == "Indexed"
    command = " ".join(spec["template"]["spec"]["containers"][0]["args"])
    assert "python -m tmm_course.teach.grade" in command
    assert f'--shard "$JOB_COMPLETION_INDEX/{spec["completions"]}"' in command


def test_the_report_and_the_lms_export(sharded):
    places = report.companions(sharded["whole"])
    text = places["html"].read_text()
    for part in ("Pass rates", "Most common diagnoses", "Sent to timeout or error", "Provenance",
                 "data:image/png;base64,", "course_version", "device"):  # fmt: skip
        assert part in text, part
    assert "http" not in text.replace("http-equiv", "")  # nothing fetched from a network
    with places["lms"].open(newline="") as f:
        lms = list(csv.DictReader(f))
    names = ["transpose_v1", "transpose_v2", "transpose", "scaled_matmul"]
    assert list(lms[0]) == ["Student", "SIS Login ID", *names, "Total"]
    assert len(lms) == len(os.listdir(sharded["inbox"]))
    assert {r["Total"] for r in lms} == {"0"}  # nothing passes in this inbox


def test_the_report_renders_in_chromium_without_a_console_error(sharded):
    from test_browser import CHROMIUM, FLAGS, _need_browser

    _need_browser()
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = chromium.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
        page.goto(report.companions(sharded["whole"])["html"].resolve().as_uri())
        page.wait_for_load_state("load")
        width = page.evaluate("document.querySelector('img').naturalWidth")
        heading = page.inner_text("h1")
        chromium.close()
    assert errors == []
    assert width > 100 and heading == "The class at a glance"


def test_a_worker_that_cannot_start_says_what_it_printed(tmp_path):
    site = tmp_path / "site"  # a course package whose import fails, as a broken install's
    (site / "tmm_course").mkdir(parents=True)
    (site / "tmm_course" / "__init__.py").write_text(
        "raise ImportError('libtriton.so: no such file')\n"
    )
    (tmp_path / "home").mkdir()
    grader = grade.Grader([], "", site, sandbox.Limits(seconds=30), isolated=False)
    worker = clients.Worker(grader, "1")
    with pytest.raises(clients.WorkerGone) as gone:
        worker.start(time.monotonic() + 30)
    worker.stop()
    assert gone.value.verdict == "error"
    assert "ImportError: libtriton.so: no such file" in gone.value.detail, gone.value.detail


class _Where(_Stuck):
    """A stand-in grader that notes the GPU each submission's workers would be handed."""

    def __init__(self) -> None:
        super().__init__(30)
        self.seen: dict[str, str | None] = {}

    def grade(self, inbox, name):
        self.seen[name] = clients._gpu()
        time.sleep(0.2)  # long enough for both slots to be busy at once
        return [self.row(name, e.name, "pass") for e, _ in self.exercises]


def test_one_worker_per_gpu_each_handed_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "gpus", lambda: ["0", "1"])
    jobs, gpus = grade.default_jobs(6 * 2**30)
    assert (jobs, gpus) == (2, ["0", "1"])
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for i in range(4):
        (inbox / f"s{i}").write_text("x")
    where = _Where()
    out = grade.CsvOut(tmp_path / "grades.csv", resume=False)
    grade.grade_folder(inbox, where, out, jobs, progress=False, gpus=gpus)
    assert sorted(where.seen) == ["s0", "s1", "s2", "s3"]
    assert {where.seen["s0"], where.seen["s1"]} == {"0", "1"}
    env = sandbox.worker_environment("/site", "/home", "1")
    assert env["CUDA_VISIBLE_DEVICES"] == "1"


def test_cgroups_that_cannot_cap_a_worker_stop_the_run_before_it_starts(
    tmp_path, monkeypatch, capsys
):
    def broken(name, limits):
        raise sandbox.CgroupError(f"cannot make the cgroup {name}: [Errno 16] busy")

    monkeypatch.setattr(sandbox, "problem", lambda: None)
    monkeypatch.setattr(sandbox, "Cgroup", broken)
    out = tmp_path / "g.csv"
    assert grade.main([str(tmp_path), "--reference", str(HOMEWORK), "--out", str(out)]) == 2
    assert "refusing to grade: cannot make the cgroup" in capsys.readouterr().err
    assert not out.exists()


# a one-node Slurm cluster for the job-array script: Debian's slurm-wlm (munge included), run
# as root on free ports with its state in a temporary folder; skipped without them, except
# where TMM_REQUIRE_SLURM=1 makes their absence a failure
SLURM_DAEMONS = ("munged", "slurmctld", "slurmd")
SLURM_CONF = """ClusterName=tmm
SlurmctldHost={host}
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=grade Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _daemon(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name,) if p.exists()), None
    )


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [d for d in (*SLURM_DAEMONS, "sbatch", "squeue", "sinfo") if _daemon(d) is None]
    if missing or os.geteuid() != 0 or not Path("/etc/munge/munge.key").exists():
        why = f"a one-node Slurm (root, and apt-get install slurm-wlm: missing {missing})"
        if os.environ.get("TMM_REQUIRE_SLURM") == "1":
            pytest.fail(f"the Slurm test needs {why}")
        skip_for_missing(why)
    root = tmp_path_factory.mktemp("slurm")
    (root / "state").mkdir()
    (root / "spool").mkdir()
    host = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(SLURM_CONF.format(host=host, root=root, ports=_free_ports(2),
                                      cpus=os.cpu_count()))  # fmt: skip
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started_munge = subprocess.run("munge -n | unmunge", shell=True, capture_output=True).returncode
    if started_munge:  # no munge daemon here yet: start one, and stop it afterwards
        Path("/run/munge").mkdir(exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", _daemon("munged")], check=True)
    for daemon in ("slurmctld", "slurmd"):
        subprocess.run([_daemon(daemon), "-f", str(conf)], env=env, check=True)
    try:
        for _ in range(120):
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True,
                                   text=True).stdout.strip()  # fmt: skip
            if state == "idle":
                break
            time.sleep(0.25)
        assert state == "idle", (state, (root / "slurmctld.log").read_text()[-2000:])
        yield env
    finally:
        subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True)
        for daemon in ("slurmd", "slurmctld"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((root / f"{daemon}.pid").read_text()), signal.SIGTERM)
        if started_munge:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(Path("/run/munge/munged.pid").read_text()), signal.SIGTERM)


def test_the_job_array_script_grades_an_inbox_on_slurm(slurm, sharded, tmp_path):
    graded = tmp_path / "graded"
    options = ["--reference", str(HOMEWORK), "--timeout", "120", "--no-isolation"]
    env = {**slurm, "PYTHONPATH": str(ROOT), "TMM_PYTHON": sys.executable}
    array = subprocess.run(
        ["sbatch", "--parsable", "--array=0-1", "--cpus-per-task=1", "--mem=0",
         f"--output={tmp_path}/task-%a.log", str(SLURM), str(sharded["inbox"]), str(graded),
         *options],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    merge = (f"{sys.executable} -m tmm_course.teach.grade merge {graded}/grades.*-of-2.csv "
             f"--inbox {sharded['inbox']} --out {graded}/grades.csv")  # fmt: skip
    subprocess.run(
        ["sbatch", "--parsable", f"--dependency=afterok:{array}", "--cpus-per-task=1",
         f"--output={tmp_path}/merge.log", "--wrap", merge],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    for _ in range(1200):
        queued = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True)
        if not queued.stdout.strip():
            break
        time.sleep(0.5)
    logs = "\n".join(p.read_text() for p in sorted(tmp_path.glob("*.log")))
    assert (graded / "grades.csv").is_file(), logs[-3000:]
    assert _rows(graded / "grades.csv") == _rows(sharded["whole"])
    assert "merged 2 shard(s)" in logs


def test_an_exercise_keeps_no_reserve_for_later_ones_left_untouched(tmp_path, monkeypatch):
    # part 1 solved, the other three as handed out: they start no worker, so part 1 may use the
    # whole --timeout (was: a 30 s reserve for each, 30 of 120 s left to part 1)
    reference = graded_notebook.read_reference(HOMEWORK)
    cell_id = exercise("transpose_v1").cell_id
    solution = next(c["source"] for c in solved()["cells"] if c.get("id") == cell_id)
    notebook = with_exercise(student(), "transpose_v1", solution)
    (tmp_path / "one.ipynb").write_text(json.dumps(notebook))
    exercises = grade.graded_exercises(reference)
    grader = grade.Grader(exercises, "", tmp_path, sandbox.Limits(seconds=120), isolated=False,
                          reference=reference)  # fmt: skip
    seen = {}

    def one(name, exercise, spec, sources, replayer, base, deadline):
        seen[exercise.name] = deadline - time.monotonic()
        return grader.row(name, exercise.name, "pass")

    monkeypatch.setattr(grader, "_one", one)
    rows = grader.grade(tmp_path, "one.ipynb")
    assert len(rows) == len(exercises) == 4
    assert seen["transpose_v1"] > 110, seen


def test_the_report_counts_each_failing_submission_under_its_primary_diagnosis():
    row = {"submission": "a.ipynb", "exercise": "transpose", "verdict": "fail", "isolation": "",
           "codes": "out_of_bounds_write ragged_edge", "detail": "lanes outside"}  # fmt: skip
    html = report.page([row, {**row, "submission": "b.ipynb"}], ["transpose"], [], "grades.csv")
    diagnoses = html.split("Most common diagnoses")[1]
    assert "<code>out_of_bounds_write</code></td><td class='n'>2</td>" in diagnoses
    assert "ragged_edge</code>" not in diagnoses  # a symptom of the same cause, not counted
