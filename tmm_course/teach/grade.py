"""Grade a folder of submitted notebooks into a CSV, one row per submission and exercise.

    python -m tmm_course.teach.grade inbox/ --out grades.csv --timeout 300 --jobs 2

The verdict is what the submission's kernels compute when the judge launches them. The judge
(this process) never runs student code: it takes the exercise cells' sources from the submission
by cell id, and for each exercise starts a fresh worker (:mod:`.worker`) in a sandbox
(:mod:`.sandbox`: bubblewrap, a fresh user, its own cgroup, no network, nothing of the host but
the Python it runs and a copy of the course package) that runs the reference's setup cell, the
definitions the exercise cell uses from earlier cells (as source) and the exercise cell. For
each of the exercise's cases (:mod:`tmm_course.exercises`, drawn from a secret seed) that worker
calls the learner's function on the case drawn again with other values, only to record which
Triton kernels it launches; the judge reads the record as data, and a second worker that ran no
cell replays those kernels on the secret case, compiled ahead for a GPU first, every buffer the
launcher made poisoned. The judge decides from the storages it gets back (:mod:`.judge`).
Nothing the first worker computes, prints or claims reaches a verdict; the rules on the source
(:mod:`.exercise_rules`) are advice in the detail, never a verdict.

Verdicts: ``pass``, ``fail`` (diagnosis codes, the primary first, and the first failing case),
``not_implemented``, ``missing`` (no cell with the exercise's id), ``timeout``, ``error`` (the
cell is duplicated, the worker died or printed too much), ``invalid`` (not a readable notebook).
The ``isolation`` column says ``isolated`` or, with ``--no-isolation``, ``unisolated``. Without
root or bubblewrap the grader refuses to run unless told ``--no-isolation``.

Several graders, on one machine or many, never meet (a fresh user id and cgroup per
worker, private mounts): split the inbox and give each part its own ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import json
import os
import secrets
import shutil
import stat
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import tmm_course
from tmm_course.exercises import BY_NAME as SPECS
from tmm_course.exercises.spec import Exercise as Spec
from tmm_course.exercises.spec import generator
from tmm_course.teach import exercise_rules, graded_notebook, judge, sandbox, wire
from tmm_course.teach.safe_io import Unreadable, csv_cell, kind, read_capped, remove_tree

DEFAULT_REFERENCE = Path("notebooks/05_homework_transpose.ipynb")
FIELDS = ["submission", "exercise", "verdict", "codes", "detail", "isolation"]
NOTEBOOK_CAP = 8 * 2**20
STARTUP_SECONDS = 120.0
RESERVE_SECONDS = 30.0  # kept for each later exercise while one runs


@dataclass(frozen=True)
class Row:
    submission: str
    exercise: str
    verdict: str
    codes: str = ""
    detail: str = ""
    isolation: str = "isolated"


@dataclass
class Output:
    """Counts what a worker prints, keeps none of it, and stops it past the cap."""

    cap: int
    printed: int = 0
    over: bool = False
    thread: threading.Thread | None = None

    def drain(self, running: sandbox.Running) -> None:
        def pump() -> None:
            stream = running.process.stdout
            while stream is not None:
                try:
                    chunk = stream.read1(1 << 16)
                except (OSError, ValueError):
                    return
                if not chunk:
                    return
                self.printed += len(chunk)
                if self.printed > self.cap and not self.over:
                    self.over = True
                    running.stop()
                    return

        self.thread = threading.Thread(target=pump, daemon=True)
        self.thread.start()


@dataclass
class Worker:
    """One worker process and the sources it has run (to start a fresh one where it left)."""

    grader: Grader
    name: str
    running: sandbox.Running | None = None
    output: Output | None = None
    ran: list[str] = field(default_factory=list)
    setup: bool = True  # run the reference's setup cell first (a replay worker runs no cell)

    def start(self, deadline: float) -> None:
        self.stop()
        g = self.grader
        self.running = sandbox.start(g.site, g.limits, f"{g.run}-{self.name}", g.isolated)
        self.output = Output(g.limits.output_bytes)
        self.output.drain(self.running)
        for source in [g.setup] * self.setup + self.ran:
            self.run(source, min(deadline, time.monotonic() + STARTUP_SECONDS), remember=False)

    def run(self, source: str, deadline: float, remember: bool = True) -> dict:
        reply = self.ask({"op": "run", "source": source}, [], deadline, [])
        if remember:
            self.ran.append(source)
        return reply[0]

    def ask(self, header: dict, blobs: list[bytes], deadline: float, sizes: list[int]):
        assert self.running is not None
        try:
            wire.send(self.running.to_worker, header, blobs)
            reply, returned = wire.receive(self.running.from_worker, deadline, sizes)
        except (OSError, wire.ChannelError) as error:
            raise self._why(error) from None
        if reply.get("ok") is True and len(returned) != len(sizes):
            raise WorkerGone("error", "the worker sent back a wrong number of tensors")
        return reply, returned

    def record(self, header: dict, blobs: list[bytes], deadline: float) -> tuple[dict, bytes]:
        """Ask for a launch record: a reply with its size, then the record (at most
        :data:`judge.RECORD_BYTES`)."""
        reply, _ = self.ask(header, blobs, deadline, [])
        if reply.get("ok") is not True:
            return reply, b""
        size = reply.get("size")
        if type(size) is not int or not 0 < size <= judge.RECORD_BYTES:
            return {"ok": False, "error_type": "record", "error": f"a record of {size} bytes"}, b""
        assert self.running is not None
        try:
            _, (data,) = wire.receive(self.running.from_worker, deadline, [size])
        except (OSError, ValueError, wire.ChannelError) as error:
            raise self._why(error) from None
        return reply, data

    def _why(self, error: Exception) -> WorkerGone:
        if isinstance(error, wire.Timeout):
            return WorkerGone("timeout", "ran past the time limit")
        if self.output is not None and self.output.over:
            return WorkerGone("error", f"printed more than {self.grader.limits.output_bytes} bytes")
        code = self.running.process.poll() if self.running else None
        if self.running is not None and code is None:
            with contextlib.suppress(Exception):
                code = self.running.process.wait(timeout=2)
        signals = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV"}
        number = -code if code is not None and code < 0 else (code or 0) - 128
        if number in signals:  # bwrap reports its child's signal as 128 + the number
            return WorkerGone("fail", f"the worker crashed ({signals[number]}): a kernel read or "
                              "wrote outside its tensors", crashed=True)  # fmt: skip
        return WorkerGone("error", f"the worker ended ({_ended(code)}): {error}"[:300])

    def stop(self) -> None:
        if self.running is not None:
            with contextlib.suppress(Exception):
                wire.send(self.running.to_worker, {"op": "bye"})
            self.running.end()
            self.running = None


class WorkerGone(RuntimeError):
    """The worker stopped answering: ``crashed`` when a signal such as SIGSEGV ended it (a
    kernel's stray access: the submission's fault, a fail)."""

    def __init__(self, verdict: str, detail: str, crashed: bool = False) -> None:
        super().__init__(detail)
        self.verdict, self.detail, self.crashed = verdict, detail, crashed


def _ended(code: int | None) -> str:
    if code is None:
        return "still running, stopped"
    if code < 0 or code == 137:
        return "killed, perhaps for memory"
    return f"exit code {code}"


@dataclass
class Grader:
    """What one grading run shares: the reference's exercises and setup, the package copy."""

    exercises: list[tuple[graded_notebook.Exercise, Spec]]
    setup: str
    site: Path
    limits: sandbox.Limits
    isolated: bool
    run: str = field(default_factory=lambda: secrets.token_hex(4))
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    reference: dict = field(default_factory=dict)  # its earlier cells' definitions are carried

    @property
    def isolation(self) -> str:
        return "isolated" if self.isolated else "unisolated"

    def row(self, submission: str, exercise: str, verdict: str, codes: str = "", detail: str = ""):
        return Row(submission, exercise, verdict, codes, detail[:500], self.isolation)

    def grade(self, inbox: Path, name: str) -> list[Row]:
        """Grade one inbox entry; always returns its rows."""
        if not name.endswith(".ipynb") or kind(inbox, name) != "file":
            return [
                self.row(name, "*", "invalid", detail=f"not a notebook file ({kind(inbox, name)})")
            ]
        try:
            submission = json.loads(read_capped(inbox, name, NOTEBOOK_CAP).decode("utf-8"))
            if not isinstance(submission, dict) or not isinstance(submission.get("cells"), list):
                raise ValueError("no list of cells")
        except (Unreadable, ValueError, UnicodeDecodeError, RecursionError) as error:
            return [self.row(name, "*", "invalid", detail=f"not a readable notebook: {error}")]
        exercises = [e for e, _ in self.exercises]
        sources = graded_notebook.exercise_sources(submission, exercises)
        start = time.monotonic()
        replayer = Replayer(self, self._number("replay"), start + self.limits.seconds)
        rows: list[Row] = []
        try:
            for index, (exercise, spec) in enumerate(self.exercises):
                # what is left, but for a reserve kept for each exercise after this one (its
                # share of what is left, at most RESERVE_SECONDS): one that runs forever leaves
                # the others their time, a slow honest one may take most of it
                left = max(start + self.limits.seconds - time.monotonic(), 0.0)
                later = len(self.exercises) - index - 1
                reserve = later * min(left / (later + 1), RESERVE_SECONDS)
                deadline = time.monotonic() + left - reserve
                rows.append(self._one(name, exercise, spec, sources, replayer, deadline))
        finally:
            replayer.stop()
        return rows

    def _number(self, what: str) -> str:
        with self.lock:
            self.counter += 1
            return f"{self.counter}-{what}"

    def _one(self, name, exercise, spec: Spec, sources, replayer: Replayer, deadline) -> Row:
        source = sources[exercise.name]
        if source is None:
            return self.row(name, exercise.name, "missing", detail="no exercise cell with its id")
        if isinstance(source, graded_notebook.SourceError):
            return self.row(name, exercise.name, "error", detail=str(source))
        if graded_notebook.untouched(self.reference, exercise, source):
            return self.row(name, exercise.name, "not_implemented", "not_implemented",
                            "the exercise cell is as the course hands it out")  # fmt: skip
        carried = graded_notebook.carried(self.reference, sources, exercise, self.setup)
        recorder = Worker(self, self._number(exercise.name))
        replayer.warm()
        try:
            verdict, codes, detail = self._measure(
                spec, [*carried, source], recorder, replayer, deadline
            )
        except WorkerGone as gone:
            verdict, codes, detail = gone.verdict, [], gone.detail
            replayer.stop()  # a replay that ran past its time: the next exercise gets a fresh one
        finally:
            recorder.stop()
        advice = exercise_rules.advice(source, [self.setup], carried, [spec.function])
        if advice and verdict != "pass":
            detail = f"{detail} (advice: {'; '.join(advice)})"
        return self.row(name, exercise.name, verdict, " ".join(codes), detail)

    def _measure(self, spec: Spec, sources: list[str], recorder: Worker, replayer, deadline):
        """Record the cell's launches case by case and replay them on the secret cases."""
        if time.monotonic() >= deadline:
            raise WorkerGone("timeout", "no time left in this submission's limit")
        recorder.start(deadline)
        loaded = {"ok": True}
        for source in sources:
            loaded = recorder.run(source, deadline)
        secret = generator(secrets.randbits(63))
        decoys = generator(secrets.randbits(63))
        cases = spec.draw(secret, tmm_course.BACKEND)
        results: list = []
        last = None  # the last record read: lesson 9 judges the kernel it launched
        nan = bool(secrets.randbits(1))  # NaN poison in every other output, from a random start
        for case in cases:
            nan = not nan
            if case.only_if_all_passed and not all(r.passed for r in results):
                results.append(
                    judge.result(case, code="skipped", problem="not run: fix the other cases first")
                )
                continue
            header, blobs = judge.Trial.of(spec, case.again(decoys)).request("record")
            try:
                reply, data = recorder.record(header, blobs, deadline)
            except WorkerGone as gone:
                if not gone.crashed:
                    raise
                results.append(judge.result(case, code="crashed", problem=gone.detail))
                break
            if not reply.get("ok"):
                if reply.get("error_type") == "missing":
                    problem = "" if loaded.get("ok") else f"; the cell raised {_brief(loaded)}"
                    return "missing", [], f"the cell defines no {spec.function}{problem}"
                if reply.get("error_type") == "NotImplementedError":
                    results.append(judge.result(case, code="not_implemented"))
                    break
                results.append(judge.result(case, code="crashed", problem=_brief(reply)))
                continue
            record = judge.read_record(data)
            if isinstance(record, tuple):
                code, problem = record
                results.append(judge.result(case, code=code, problem=problem, cause=problem))
                continue
            last = record
            trial = judge.Trial.of(spec, case, nan, secret)
            results.append(self._replay(trial, record, replayer, deadline))
            if results[-1].code == "timed_out":  # as the check: the cases after it do not run
                break
        for case in cases[len(results) :]:  # after a crash or an unfinished exercise
            results.append(judge.result(case, code="skipped", problem="not run"))
        verdict, codes, detail = judge.verdict(spec, results, last)
        if not loaded.get("ok"):
            detail = f"the cell raised {_brief(loaded)}; {detail}"
        return verdict, codes, detail

    def _replay(self, trial: judge.Trial, record: dict, replayer: Replayer, deadline: float):
        """One case's verdict: its record's kernels replayed on the trial's case."""
        case = trial.case
        early = judge.judge_record(trial, record)
        if early is not None:
            return early
        try:
            reply, returned = replayer.replay(trial, record, deadline)
        except WorkerGone as gone:
            if not gone.crashed:
                raise
            replayer.stop()
            return judge.result(case, code="crashed", problem=gone.detail)
        return judge.judge_replay(trial, reply, returned if reply.get("ok") else None)


class Replayer(Worker):
    """A submission's replay worker: it runs no cell, only kernels the judge has read, and
    starts (importing Triton) in the background while the first exercise that runs is
    recorded; a fresh one follows a crash or a replay that ran past its time."""

    def __init__(self, grader: Grader, name: str, deadline: float) -> None:
        super().__init__(grader, name, setup=False)
        self.defined: dict[str, str] = {}
        self.deadline = deadline
        self.warming: threading.Thread | None = None

    def warm(self) -> None:
        """Start (in the background) unless started: called as an exercise starts running."""
        if self.running is None and self.warming is None:
            self.warming = threading.Thread(target=self._warm, args=(self.deadline,), daemon=True)
            self.warming.start()

    def _warm(self, deadline: float) -> None:
        with contextlib.suppress(Exception):
            self.start(deadline)
            self.ask({"op": "prepare"}, [], deadline, [])

    def stop(self) -> None:
        if self.warming is not None:
            self.warming.join()
            self.warming = None
        self.defined = {}
        super().stop()

    def replay(self, trial: judge.Trial, record: dict, deadline: float):
        if self.warming is not None:
            self.warming.join()
            self.warming = None
        if self.running is None or self.running.process.poll() is not None:
            self.start(deadline)
            self.defined = {}
        plan = json.dumps(record).encode()
        kernels = {k: e["source"] for k, e in record["kernels"].items()}
        if any(self.defined.get(k) != v for k, v in kernels.items()):
            reply, _ = self.ask({"op": "kernels"}, [plan], deadline, [])
            if not reply.get("ok"):
                text = f"the kernels could not be defined: {_brief(reply)}"
                return {"ok": False, "error_type": "gpu_would_reject", "error": text}, None
            self.defined.update(kernels)
        header, blobs = trial.request("replay", [plan])
        header["plan"] = 0  # the plan is the first blob
        return self.ask(header, blobs, deadline, trial.sizes())


def _brief(reply: dict) -> str:
    return f"{reply.get('error_type', 'an error')}: {reply.get('error', '')}"[:200]


def package_copy(into: Path) -> Path:
    """A read-only copy of the tmm_course package the grader imports (no notebooks beside it)."""
    import tmm_course

    source = Path(tmm_course.__file__).resolve().parent
    target = into / "tmm_course"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    for path in [into, *into.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return into


def digest(folder: Path) -> dict[str, str]:
    """sha256 of each regular file directly in ``folder``; other entries by their kind."""
    found = {}
    for name in sorted(os.listdir(folder)):
        what = kind(folder, name)
        if what == "file":
            try:
                found[name] = hashlib.sha256(read_capped(folder, name, 64 * 2**20)).hexdigest()
            except Unreadable as error:
                found[name] = f"unreadable: {error}"
        else:
            found[name] = what
    return found


class CsvOut:
    """Rows appended as each submission finishes, flushed at once; resumable."""

    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.done: set[str] = set()
        if resume and path.exists():
            with path.open(newline="", encoding="utf-8") as f:
                self.done = {row["submission"] for row in csv.DictReader(f)}
        else:
            with path.open("w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerow(FIELDS)

    def write(self, rows: list[Row]) -> None:
        with self.lock, self.path.open("a", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(
                [
                    csv_cell(v)
                    for v in (r.submission, r.exercise, r.verdict, r.codes, r.detail, r.isolation)
                ]
                for r in rows
            )
            f.flush()
            os.fsync(f.fileno())


def grade_folder(inbox: Path, grader: Grader, out: CsvOut, jobs: int, progress: bool = True):
    """Grade every entry of ``inbox`` not yet in ``out``, ``jobs`` at a time."""
    from tqdm.auto import tqdm

    entries = [n for n in sorted(os.listdir(inbox)) if csv_cell(n) not in out.done]

    def one(name: str) -> list[Row]:
        try:
            graded = grader.grade(inbox, name)
        except Exception as error:  # the grader's own fault: still a row, and go on
            graded = [
                grader.row(name, "*", "error", detail=f"grader: {type(error).__name__}: {error}")
            ]
        out.write(graded)
        return graded

    rows: list[Row] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for graded in tqdm(
            pool.map(one, entries), total=len(entries), desc="submissions", disable=not progress
        ):
            rows += graded
    return rows


def graded_exercises(reference: dict) -> list[tuple[graded_notebook.Exercise, Spec]]:
    """The reference's exercises, each with its spec (a clear error if one has none)."""
    found = []
    for exercise in graded_notebook.exercises_of(reference):
        spec = SPECS.get(exercise.name)
        if spec is None:
            raise SystemExit(
                f"no exercise spec is named {exercise.name!r} (the reference's check:"
                f"{exercise.name} tag): add one to tmm_course/exercises, or grade another "
                "notebook"
            )
        if spec.cells is not None and spec.cells.exercise != exercise.cell_id:
            raise SystemExit(
                f"the exercise {exercise.name!r} is cell {exercise.cell_id} in the "
                f"reference but {spec.cells.exercise} in its spec"
            )
        found.append((exercise, spec))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade a folder of submitted notebooks.")
    parser.add_argument("submissions", type=Path, help="folder of submissions")
    parser.add_argument(
        "--reference",
        type=Path,
        default=DEFAULT_REFERENCE,
        help="the course notebook (with its solutions) the submissions answer",
    )
    parser.add_argument("--out", type=Path, default=Path("grades.csv"), help="CSV to write")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per submission")
    parser.add_argument("--memory-gib", type=float, default=6, help="memory per submission")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once")
    parser.add_argument("--resume", action="store_true", help="skip submissions in --out")
    parser.add_argument(
        "--no-isolation",
        action="store_true",
        help="run submissions as this user, unsandboxed (rows say unisolated)",
    )
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error("name the folder of submitted notebooks")
    if not args.reference.is_file():
        parser.error(f"no reference notebook at {args.reference}: pass --reference PATH")
    problem = sandbox.problem()
    if problem and not args.no_isolation:
        print(
            f"refusing to grade: {problem}, so submissions could not be isolated from the "
            "grader, from each other and from this machine. Run as root with bubblewrap, or "
            "pass --no-isolation to grade without a sandbox (every row then says unisolated; "
            "only for submissions you trust).",
            file=sys.stderr,
        )
        return 2
    reference = graded_notebook.read_reference(args.reference)
    exercises = graded_exercises(reference)
    if not exercises:
        parser.error(f"{args.reference} has no exercise cell followed by a solution and a check")
    limits = sandbox.Limits(args.timeout, int(args.memory_gib * 2**30))
    before = digest(args.submissions)
    scratch = Path(
        tempfile.mkdtemp(prefix="tmm-grade-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    )
    try:
        os.chmod(scratch, stat.S_IRWXU)
        site = package_copy(scratch / "site")
        (scratch / "home").mkdir(mode=0o700)
        grader = Grader(
            exercises,
            graded_notebook.setup_source(reference),
            site,
            limits,
            isolated=not args.no_isolation,
            reference=reference,
        )
        out = CsvOut(args.out, args.resume)
        rows = grade_folder(args.submissions, grader, out, args.jobs)
    finally:
        # the package copy, and (unisolated) the workers' home: removed without recursion
        with contextlib.suppress(OSError):
            os.chmod(scratch, stat.S_IRWXU)
            remove_tree(scratch)
    after = digest(args.submissions)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        out.write([grader.row("(inbox)", "*", "inbox_changed", detail=", ".join(changed))])
        print(f"warning: the inbox changed while grading: {', '.join(changed)}", file=sys.stderr)
    print(f"graded {len({r.submission for r in rows})} submission(s) into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
