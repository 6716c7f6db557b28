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
from tmm_course.exercises import BY_NAME as SPECS
from tmm_course.exercises.spec import Exercise as Spec
from tmm_course.teach import (
    exercise_rules,
    graded_notebook,
    report,
    sandbox,
    shards,
)
from tmm_course.teach.clients import (
    Replayer,
    Ticket,
    Worker,
    WorkerGone,
    grade_exercise,
    hand_out,
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
        base = Worker(self, self._number("setup"))  # each exercise's recorder forks from it
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
                rows.append(self._one(name, exercise, spec, sources, replayer, base, deadline))
        finally:
            replayer.stop()
            base.stop()
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

    def _one(self, name, exercise, spec: Spec, sources, replayer: Replayer, base: Worker,
             deadline) -> Row:  # fmt: skip
        settled = self._settled(name, exercise, sources)
        if settled is not None:
            return settled
        source = sources[exercise.name]
        carried = graded_notebook.carried(self.reference, sources, exercise, self.setup)
        recorder = Worker(self, self._number(exercise.name), base=base)
        try:
            replayer.warm()
            state, codes, detail = grade_exercise(
                spec, [*carried, source], recorder, replayer, deadline
            )
        except WorkerGone as gone:
            state, codes, detail = gone.verdict, [], gone.detail
            replayer.stop()  # a replay that ran past its time: the next exercise gets a fresh one
        finally:
            recorder.stop()
        advice = exercise_rules.advice(source, [self.setup], carried, [spec.function])
        if advice and state != "pass":
            detail = f"{detail} (advice: {'; '.join(advice)})"
        return self.row(name, exercise.name, state, " ".join(codes), detail)


def package_copy(into: Path) -> Path:
    """A read-only copy of the tmm_course package the grader imports (no notebooks beside it)."""

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


WATCHDOG_GRACE = 60.0  # past --timeout, for the ending of a worker, before the loop moves on


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
        hand_out(gpus[slot % len(gpus)] if gpus else None, ticket)
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


@contextlib.contextmanager
def grading(reference: dict, exercises: list, limits: sandbox.Limits, isolated: bool):
    """A :class:`Grader` for ``reference``'s ``exercises``, with its read-only copy of the
    package (and, unisolated, the workers' home) in a scratch folder removed afterwards."""
    scratch = Path(
        tempfile.mkdtemp(prefix="tmm-grade-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    )
    try:
        os.chmod(scratch, stat.S_IRWXU)
        site = package_copy(scratch / "site")
        (scratch / "home").mkdir(mode=0o700)
        setup = graded_notebook.setup_source(reference)
        yield Grader(exercises, setup, site, limits, isolated=isolated, reference=reference)
    finally:  # removed without recursion
        with contextlib.suppress(OSError):
            os.chmod(scratch, stat.S_IRWXU)
            remove_tree(scratch)


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
    started = time.time()
    with grading(reference, exercises, limits, isolated=not args.no_isolation) as grader:
        out = CsvOut(args.out, args.resume)
        names = entries_to_grade(args.submissions, out, args.shard)
        rows = grade_folder(args.submissions, grader, out, jobs, not args.no_progress, names, gpus)
        code = report.code_version(grader.site)
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
