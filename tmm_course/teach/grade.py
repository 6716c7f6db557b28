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
worker, private mounts). ``--jobs`` grades that many submissions at once (default: one per GPU,
each worker handed its own; else one per core); ``--shard K/N`` grades a deterministic share of
the inbox, and ``merge`` (:mod:`.shards`) combines the shards' CSVs. Beside the CSV go the
class's report, an LMS export and the run's provenance (:mod:`.report`).

The outer loop never waits without a deadline: every read and write on the channel has one,
and a watchdog outside the workers gives each submission ``--timeout`` plus
:data:`WATCHDOG_GRACE` before it kills them, writes ``timeout`` rows and goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import json
import os
import queue
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import tmm_course
from tmm_course.check.exercises import NOTHING_MORE
from tmm_course.compile_ahead import Launched
from tmm_course.exercises import BY_NAME as SPECS
from tmm_course.exercises.spec import Exercise as Spec
from tmm_course.exercises.spec import Goal, generator
from tmm_course.teach import (
    exercise_rules,
    graded_notebook,
    judge,
    report,
    sandbox,
    shards,
    wire,
)
from tmm_course.teach.safe_io import (
    Unreadable,
    clipped,
    csv_cell,
    entry_key,
    kind,
    read_capped,
    remove_tree,
    shown_name,
)

DEFAULT_REFERENCE = Path("notebooks/05_homework_transpose.ipynb")
FIELDS = ["submission", "exercise", "verdict", "codes", "detail", "isolation", "key"]
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
    """Counts what a worker prints, keeps only its last lines (what a worker that cannot start
    said), and stops it past the cap."""

    cap: int
    printed: int = 0
    over: bool = False
    thread: threading.Thread | None = None
    tail: bytes = b""

    def last_lines(self, count: int = 5) -> str:
        """The last ``count`` lines it printed, as text (waits briefly for the pump to drain)."""
        if self.thread is not None:
            self.thread.join(timeout=2)
        lines = self.tail.decode("utf-8", "backslashreplace").strip().splitlines()
        return " | ".join(line.strip() for line in lines[-count:])

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
                self.tail = (self.tail + chunk)[-TAIL_BYTES:]
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
    ticket: Ticket = field(init=False, repr=False)  # the submission's, for the watchdog
    running: sandbox.Running | None = None
    output: Output | None = None
    ran: list[str] = field(default_factory=list)
    setup: bool = True  # run the reference's setup cell first (a replay worker runs no cell)

    def start(self, deadline: float) -> None:
        self.stop()
        g = self.grader
        try:  # a cgroup name of its own each time (sandbox.start adds a random suffix)
            running = sandbox.start(g.site, g.limits, f"{g.run}-{self.name}", g.isolated, _gpu())
        except sandbox.CgroupError as error:
            raise WorkerGone("error", f"not graded without its caps: {error}") from None
        if self.ticket.given_up.is_set():  # the watchdog gave up on this submission meanwhile
            running.end()
            raise WorkerGone("timeout", "ran past the time limit")
        self.running = running
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
            wire.send(self.running.to_worker, header, blobs, deadline)
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
        said = self.output.last_lines() if self.output is not None else ""
        said = f"; it printed: {said}" if said else ""
        return WorkerGone("error", f"the worker ended ({_ended(code)}): {error}{said}"[:500])

    def stop(self) -> None:
        if self.running is not None:
            with contextlib.suppress(Exception):
                wire.send(self.running.to_worker, {"op": "bye"}, [], time.monotonic() + 1)
            self.running.end()
            self.running = None

    def abandon(self) -> None:
        """From the watchdog's thread: kill the worker's processes (the submission's own thread
        then sees its channel end, and closes it)."""
        running = self.running
        if running is not None:
            running.stop()

    def __post_init__(self) -> None:
        self.ticket = getattr(_SLOT, "ticket", None) or Ticket()
        self.ticket.workers.append(self)  # the watchdog of the submission's thread stops us


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
        return Row(submission, exercise, verdict, codes, clipped(detail, 2000), self.isolation)

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
        runs = [self._settled(name, exercise, sources) is None for exercise in exercises]
        try:
            for index, (exercise, spec) in enumerate(self.exercises):
                # what is left, but for a reserve kept for each later exercise that will run a
                # worker (its share of what is left, at most RESERVE_SECONDS; an untouched or
                # missing one needs none): one that runs forever leaves the others their time,
                # a slow honest one may take most of it
                left = max(start + self.limits.seconds - time.monotonic(), 0.0)
                later = sum(runs[index + 1 :])
                reserve = later * min(left / (later + 1), RESERVE_SECONDS)
                deadline = time.monotonic() + left - reserve
                rows.append(self._one(name, exercise, spec, sources, replayer, deadline))
        finally:
            replayer.stop()
        return rows

    def _settled(self, name: str, exercise: graded_notebook.Exercise, sources) -> Row | None:
        """The row of an exercise graded without a worker (its cell missing, unreadable or as
        handed out), or None when grading it starts one."""
        source = sources[exercise.name]
        if source is None:
            return self.row(name, exercise.name, "missing", detail="no exercise cell with its id")
        if isinstance(source, graded_notebook.SourceError):
            return self.row(name, exercise.name, "error", detail=str(source))
        if graded_notebook.untouched(self.reference, exercise, source):
            return self.row(name, exercise.name, "not_implemented", "not_implemented",
                            "the exercise cell is as the course hands it out")  # fmt: skip
        return None

    def _number(self, what: str) -> str:
        with self.lock:
            self.counter += 1
            return f"{self.counter}-{what}"

    def _one(self, name, exercise, spec: Spec, sources, replayer: Replayer, deadline) -> Row:
        settled = self._settled(name, exercise, sources)
        if settled is not None:
            return settled
        source = sources[exercise.name]
        carried = graded_notebook.carried(self.reference, sources, exercise, self.setup)
        recorder = Worker(self, self._number(exercise.name))
        try:
            replayer.warm()
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
        goals = None
        if spec.at_scale is not None and not {r.code for r in results} & NOTHING_MORE:
            goals = self._at_scale(spec, recorder, replayer, deadline)
        verdict, codes, detail = judge.verdict(spec, results, last, goals)
        if not loaded.get("ok"):
            detail = f"the cell raised {_brief(loaded)}; {detail}"
        return verdict, codes, detail

    def _at_scale(self, spec: Spec, recorder: Worker, replayer, deadline: float) -> list[Goal]:
        """The goals of ``spec.at_scale``, as the check judges them: the cell's launches on
        its problem recorded (not run), the kernels compiled by the replay worker."""
        at = spec.at_scale
        trial = judge.Trial.of(spec, at.problem())
        header, blobs = trial.request("record", values=False)  # noted, never run
        failed = at.failed
        try:
            reply, data = recorder.record(header, blobs, deadline)
        except WorkerGone as gone:
            if not gone.crashed:
                raise
            return failed(gone.detail)
        if not reply.get("ok"):
            return failed(f"the call raised {_brief(reply)}")
        record = judge.read_record(data)
        if isinstance(record, tuple):
            return failed(record[1])
        early = judge.judge_record(trial, record)
        if early is not None:
            return failed(early.problem)
        try:
            reply = replayer.launched(trial, record, deadline, at.targets)
        except WorkerGone as gone:
            if not gone.crashed:
                raise
            replayer.stop()
            return failed(gone.detail)
        if not reply.get("ok"):
            return failed(f"compiling its kernels raised {_brief(reply)}")
        try:
            return at.judge([Launched.of_data(x) for x in reply.get("launched", [])])
        except (KeyError, TypeError, ValueError) as error:
            return failed(f"the compiled figures could not be read: {error}")

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
        return self._ask(trial, record, deadline, "replay")

    def launched(self, trial: judge.Trial, record: dict, deadline: float, targets) -> dict:
        """The record's launches on the trial's tensors, compiled for ``targets``, not run."""
        reply, _ = self._ask(trial, record, deadline, "launched", {"targets": list(targets)})
        return reply

    def _ask(self, trial, record: dict, deadline: float, op: str, extra: dict | None = None):
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
        header, blobs = trial.request(op, [plan], values=op != "launched")
        header["plan"] = 0  # the plan is the first blob
        header.update(extra or {})
        return self.ask(header, blobs, deadline, trial.sizes() if op == "replay" else [])


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
    """Rows appended as each submission finishes, flushed at once; resumable. Each row carries
    its entry's key (:func:`.safe_io.entry_key`: the raw name, percent-encoded), which
    ``--resume`` and ``merge`` match on; the ``submission`` column is the name for people."""

    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.done: set[str] = set()
        if resume and path.exists():
            with path.open(newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                if "key" not in (reader.fieldnames or []):
                    raise SystemExit(f"{path} has no key column: grade again without --resume")
                self.done = {row["key"] for row in reader if row["key"]}
        else:
            with path.open("w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerow(FIELDS)

    def write(self, rows: list[Row], entry: bool = True) -> None:
        """Append ``rows``; ``entry``: they grade an inbox entry (else a note, with no key)."""
        with self.lock, self.path.open("a", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(
                [
                    csv_cell(v)
                    for v in (shown_name(r.submission), r.exercise, r.verdict, r.codes,
                              r.detail, r.isolation)
                ]
                + [entry_key(r.submission) if entry else ""]
                for r in rows
            )  # fmt: skip
            f.flush()
            os.fsync(f.fileno())


@dataclass
class Ticket:
    """One submission in the loop: its workers, and whether the watchdog gave up on it."""

    workers: list[Worker] = field(default_factory=list)
    given_up: threading.Event = field(default_factory=threading.Event)

    def give_up(self) -> None:
        self.given_up.set()
        for worker in list(self.workers):
            worker.abandon()


# what a submission's thread grades under: its GPU (None: none to hand out) and its ticket
_SLOT = threading.local()
TAIL_BYTES = 4096  # what a worker printed last, kept for the row of one that cannot start
WATCHDOG_GRACE = 60.0  # past --timeout, for the ending of a worker, before the loop moves on


def _gpu() -> str | None:
    return getattr(_SLOT, "gpu", None)


def entries_to_grade(inbox: Path, out: CsvOut, shard: tuple[int, int] | None) -> list[str]:
    """The inbox's entries in order, without those ``out`` holds, in ``shard`` (K, N) alone."""
    names = sorted(os.listdir(inbox), key=os.fsencode)
    if shard is not None:
        names = [n for n in names if shards.shard_of(entry_key(n), shard[1]) == shard[0]]
    return [n for n in names if entry_key(n) not in out.done]


def default_jobs(memory_bytes: int) -> tuple[int, list[str]]:
    """Submissions at once on this machine, and the GPUs to hand out: one worker per GPU where
    there are GPUs; else one per core, as many as the memory holds at ``memory_bytes`` each."""
    found = sandbox.gpus()
    if found:
        return len(found), found
    cores = len(os.sched_getaffinity(0))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cores, memory // max(1, memory_bytes))), []


def grade_folder(
    inbox: Path,
    grader: Grader,
    out: CsvOut,
    jobs: int,
    progress: bool = True,
    names: list[str] | None = None,
    gpus: list[str] | None = None,
) -> list[Row]:
    """Grade ``names`` (default: every entry of ``inbox`` not yet in ``out``), ``jobs`` at a
    time, each in a thread of its own; slot ``i`` hands its workers GPU ``gpus[i]`` where there
    are GPUs. A watchdog outside every worker gives a submission ``--timeout`` plus
    :data:`WATCHDOG_GRACE`: past that its workers are killed, it gets ``timeout`` rows and the
    loop goes on without it, so the run always ends and every entry gets its rows."""
    from tqdm.auto import tqdm

    todo = list(entries_to_grade(inbox, out, None) if names is None else names)
    jobs = max(1, jobs)
    exercises = [e.name for e, _ in grader.exercises]
    finished: queue.Queue[tuple[str, list[Row]]] = queue.Queue()
    free = list(range(jobs))
    running: dict[str, tuple[float, int, Ticket]] = {}  # name: (watchdog deadline, slot, ticket)
    rows: list[Row] = []
    limit = grader.limits.seconds + WATCHDOG_GRACE
    given_up = (f"the grader stopped waiting after {limit:.0f} s (--timeout and "
                f"{WATCHDOG_GRACE:.0f} s for its worker to end)")  # fmt: skip

    def one(name: str, slot: int, ticket: Ticket) -> None:
        _SLOT.gpu, _SLOT.ticket = (gpus[slot % len(gpus)] if gpus else None), ticket
        try:
            graded = grader.grade(inbox, name)
        except BaseException as error:  # the grader's own fault: still its rows, and go on
            problem = f"grader: {type(error).__name__}: {error}"
            graded = [grader.row(name, e, "error", detail=problem) for e in exercises]
        finished.put((name, graded))

    def settle(name: str, graded: list[Row]) -> None:
        _, slot, _ = running.pop(name)
        free.append(slot)
        out.write(graded)
        rows.extend(graded)
        bar.update(1)

    with tqdm(total=len(todo), desc="submissions", unit="nb", disable=not progress) as bar:
        try:
            while todo or running:
                while todo and free:
                    name, slot, ticket = todo.pop(0), free.pop(0), Ticket()
                    running[name] = (time.monotonic() + limit, slot, ticket)
                    threading.Thread(target=one, args=(name, slot, ticket), daemon=True).start()
                wait = min(d for d, _, _ in running.values()) - time.monotonic()
                try:
                    name, graded = finished.get(timeout=max(0.05, wait))
                    if name in running:  # not given up on already
                        settle(name, graded)
                except queue.Empty:
                    for name, (deadline, _, ticket) in list(running.items()):
                        if time.monotonic() >= deadline:
                            ticket.give_up()
                            settle(name, [grader.row(name, e, "timeout", detail=given_up)
                                          for e in exercises])  # fmt: skip
        except BaseException:  # Ctrl-C, or a scheduler's SIGTERM: no worker outlives the run
            for _, _, ticket in running.values():
                ticket.give_up()
            raise
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


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        problem = f"{text!r} is not K/N (0/4 is the first of four)"
        raise argparse.ArgumentTypeError(problem) from None
    if not 0 <= k < n:
        raise argparse.ArgumentTypeError(f"{text!r}: K counts from 0 to N - 1")
    return k, n


def _terminated(number: int, _frame: object) -> None:
    raise SystemExit(128 + number)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return shards.main(argv[1:])
    parser = argparse.ArgumentParser(
        description="Grade a folder of submitted notebooks ('merge' as the first argument: "
        "combine the CSVs of --shard runs; merge --help says how)."
    )
    parser.add_argument("submissions", type=Path, help="folder of submissions")
    parser.add_argument(
        "--reference",
        type=Path,
        default=DEFAULT_REFERENCE,
        help="the course notebook (with its solutions) the submissions answer",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="CSV to write (default grades.csv; with --shard K/N, grades.K-of-N.csv); the "
        "report (.html), the LMS export (-lms.csv) and the run's provenance (.json) beside it",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds per submission")
    parser.add_argument("--memory-gib", type=float, default=6, help="memory per submission")
    parser.add_argument(
        "--jobs",
        type=int,
        help="submissions graded at once (default: one per GPU; without GPUs one per core, "
        "as many as the memory holds)",
    )
    parser.add_argument("--resume", action="store_true", help="skip submissions in --out")
    parser.add_argument(
        "--shard",
        type=_shard,
        metavar="K/N",
        help="grade share K (0 to N-1) of N of the inbox alone (a job array's task index)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--roster", type=Path, help=report.ROSTER_HELP)
    parser.add_argument(
        "--no-isolation",
        action="store_true",
        help="run submissions as this user, unsandboxed (rows say unisolated)",
    )
    args = parser.parse_args(argv)
    with _terminate_as_exit():
        return _grade(args, parser)


@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM (how Slurm ends a task at its time limit, Kubernetes a pod it evicts) ends the
    run as Ctrl-C does: workers killed, scratch removed; ``--resume`` goes on from there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _grade(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if not args.submissions.is_dir():
        parser.error("name the folder of submitted notebooks")
    roster = report.roster_or_exit(args.roster, parser)  # before a long run, not after
    if not args.reference.is_file():
        parser.error(f"no reference notebook at {args.reference}: pass --reference PATH")
    if args.out is None:
        args.out = Path("grades.csv" if args.shard is None else shards.shard_file(*args.shard))
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
    if not args.no_isolation:
        try:  # a host whose cgroups cannot cap a worker fails here, not in every row
            sandbox.Cgroup(f"probe-{secrets.token_hex(4)}", limits).kill()
        except sandbox.CgroupError as error:
            print(f"refusing to grade: {error}; this host offers cgroups but they could not cap "
                  "a worker (memory, processes, CPU). Fix their delegation to this process, "
                  "or grade where they work.", file=sys.stderr)  # fmt: skip
            return 2
    jobs, gpus = default_jobs(limits.memory_bytes)
    jobs = args.jobs or jobs
    before = digest(args.submissions)
    scratch = Path(
        tempfile.mkdtemp(prefix="tmm-grade-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    )
    started = time.time()
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
        names = entries_to_grade(args.submissions, out, args.shard)
        rows = grade_folder(args.submissions, grader, out, jobs, not args.no_progress, names, gpus)
        code = report.code_version(site)
    finally:
        # the package copy, and (unisolated) the workers' home: removed without recursion
        with contextlib.suppress(OSError):
            os.chmod(scratch, stat.S_IRWXU)
            remove_tree(scratch)
    after = digest(args.submissions)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        shown = ", ".join(shown_name(k) for k in changed)
        out.write([grader.row("(inbox)", "*", "inbox_changed", detail=shown)], entry=False)
        print(f"warning: the inbox changed while grading: {shown}", file=sys.stderr)
    provenance = report.provenance(
        run=grader.run, code=code, started=started, graded=len({r.submission for r in rows}),
        jobs=jobs, gpus=gpus, limits=limits,
        shard=args.shard, isolated=grader.isolated, reference=args.reference,
    )  # fmt: skip
    earlier = report.companions(args.out)["json"]  # a resumed CSV holds earlier runs' rows
    runs = json.loads(earlier.read_text()) if args.resume and earlier.is_file() else []
    written = report.write_all(
        args.out, [e.name for e, _ in exercises], [*runs, provenance], roster
    )
    print(
        f"graded {len({r.submission for r in rows})} submission(s) into {args.out} "
        f"(run {grader.run}); the report: {written}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
