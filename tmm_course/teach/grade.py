"""Grade a folder of submitted notebooks into a CSV, one row per submission and exercise.

    python -m tmm_course.teach.grade inbox/ --out grades.csv --timeout 300 --jobs 2

Two processes per submission. The judge (this process) never runs student code: it takes the
exercise cells' sources from the submission by cell id, decides on their parsed code whether a
person must look (:mod:`.exercise_rules`), and starts a worker (:mod:`.worker`) in a sandbox
(:mod:`.sandbox`: bubblewrap, a fresh user, its own cgroup, no network, nothing of the host but
the Python it runs and a copy of the course package). The worker runs the reference's setup
cell and the exercise cells; the judge draws fresh secret inputs per exercise, sends them over
pipes it opened, reads the outputs back and decides the verdict itself (:mod:`.judge`).

Verdicts: ``pass``, ``fail`` (diagnosis codes and the first failing case), ``not_implemented``,
``missing`` (no cell with the exercise's id), ``review`` (the code does something an exercise
has no reason to; the reason and what the judge measured are in the detail; never a pass),
``timeout``, ``error`` (the cell is duplicated, the worker died or printed too much),
``invalid`` (not a readable notebook). The ``isolation`` column says ``isolated`` or, with
``--no-isolation``, ``unisolated``. Without root or bubblewrap the grader refuses to run unless
told ``--no-isolation``.

Several graders, on one machine or many, never meet (a fresh user id and cgroup per
submission, private mounts): split the inbox and give each part its own ``--out``.
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

from tmm_course.teach import exercise_rules, graded_notebook, judge, sandbox, wire
from tmm_course.teach.safe_io import Unreadable, csv_cell, kind, read_capped, remove_tree

DEFAULT_REFERENCE = Path("notebooks/05_homework_transpose.ipynb")
FIELDS = ["submission", "exercise", "verdict", "codes", "detail", "isolation"]
NOTEBOOK_CAP = 8 * 2**20
STARTUP_SECONDS = 120.0
REVIEW_SECONDS = 20.0  # how long the judge measures an exercise that goes to review anyway


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

    def start(self, deadline: float) -> None:
        self.stop()
        g = self.grader
        self.running = sandbox.start(g.site, g.limits, f"{g.run}-{self.name}", g.isolated)
        self.output = Output(g.limits.output_bytes)
        self.output.drain(self.running)
        for source in [g.setup, *self.ran]:
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

    exercises: list[tuple[graded_notebook.Exercise, judge.Exercise]]
    setup: str
    site: Path
    limits: sandbox.Limits
    isolated: bool
    run: str = field(default_factory=lambda: secrets.token_hex(4))
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

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
        sources = graded_notebook.exercise_sources(submission, [e for e, _ in self.exercises])
        with self.lock:
            self.counter += 1
            worker = Worker(self, str(self.counter))
        deadline = time.monotonic() + self.limits.seconds
        rows: list[Row] = []
        kernels = exercise_rules.kernel_names(s for s in sources.values() if isinstance(s, str))
        try:
            for exercise, entry in self.exercises:
                source = sources[exercise.name]
                rows.append(self._one(name, exercise, entry, source, worker, deadline, kernels))
        finally:
            worker.stop()
        return rows

    def _one(self, name, exercise, entry: judge.Exercise, source, worker, deadline, kernels) -> Row:
        if source is None:
            return self.row(name, exercise.name, "missing", detail="no exercise cell with its id")
        if isinstance(source, graded_notebook.SourceError):
            return self.row(name, exercise.name, "error", detail=str(source))
        reasons = exercise_rules.review_reasons(
            source, [self.setup], entry.helpers, [entry.launcher], kernels
        )
        if reasons:  # advice for the reviewer only: a short look, not the submission's whole time
            deadline = min(deadline, time.monotonic() + REVIEW_SECONDS)
        try:
            verdict, codes, detail = self._measure(entry, source, worker, deadline)
        except WorkerGone as gone:
            worker.ran = worker.ran[:-1] if worker.ran and worker.ran[-1] == source else worker.ran
            worker.stop()
            verdict, codes, detail = gone.verdict, [], gone.detail
        not_the_fix = judge.fix_problem(entry, source) if verdict == "pass" else None
        if not_the_fix:
            verdict, codes, detail = "fail", ["not_the_fix"], not_the_fix
        if reasons:
            detail = f"needs review: {'; '.join(reasons)} (the judge measured {verdict}: {detail})"
            verdict = "review"
        return self.row(name, exercise.name, verdict, " ".join(codes), detail)

    def _measure(self, entry: judge.Exercise, source: str, worker: Worker, deadline: float):
        if time.monotonic() >= deadline:
            raise WorkerGone("timeout", "no time left in this submission's limit")
        if worker.running is None:
            worker.start(deadline)
        loaded = worker.run(source, deadline)
        cases = entry.cases(judge.seed_generator(secrets.randbits(63)))
        outcomes = []
        for case in cases:
            header, blobs = judge.request(case, entry.launcher)
            try:
                reply, returned = worker.ask(header, blobs, deadline, [len(b) for b in blobs])
            except WorkerGone as gone:
                if not gone.crashed:
                    raise
                outcomes.append(judge.Outcome(case.label, False, "crashed", gone.detail))
                worker.ran = worker.ran[:-1]
                worker.stop()
                break
            ok = reply.get("ok") is True
            if not ok and reply.get("error_type") == "missing":
                problem = "" if loaded.get("ok") else f"; the cell raised {_brief(loaded)}"
                return "missing", [], f"the cell defines no {entry.launcher}{problem}"
            outcomes.append(judge.judge_case(case, returned if ok else None, None if ok else reply))
            if outcomes[0].code == "not_implemented":
                break
        verdict, codes, detail = judge.verdict(cases, outcomes)
        if not loaded.get("ok"):
            detail = f"the cell raised {_brief(loaded)}; {detail}"
        return verdict, codes, detail


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


def graded_exercises(reference: dict) -> list[tuple[graded_notebook.Exercise, judge.Exercise]]:
    """The reference's exercises, each with its judge entry (a clear error if one has none)."""
    found = []
    for exercise in graded_notebook.exercises_of(reference):
        entry = judge.BY_NAME.get(exercise.name)
        if entry is None:
            raise SystemExit(
                f"the judge has no entry for the exercise {exercise.name!r}: add one "
                "to EXERCISES in tmm_course/teach/judge.py"
            )
        if entry.cell_id != exercise.cell_id:
            raise SystemExit(
                f"the exercise {exercise.name!r} is cell {exercise.cell_id} in the "
                f"reference but {entry.cell_id} in the judge's table"
            )
        found.append((exercise, entry))
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
