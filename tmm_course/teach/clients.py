"""The grader's two worker clients (:mod:`.worker`, in the sandbox: :mod:`.sandbox`) and the
conversation it has with them for one exercise, case by case (:func:`grade_exercise`).

A recording :class:`Worker` runs the reference's setup cell and the cells an exercise needs and
records the launches of the learner's function on each case drawn again with other values; a
:class:`Replayer`, which ran no cell, replays the recorded kernels on the secret case. What
comes back is reduced by :mod:`.judge` and decided by the one judge
(:mod:`tmm_course.check.verdict`); nothing here decides a verdict.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import tmm_course
from tmm_course.check import verdict
from tmm_course.check.exercises import NOTHING_MORE
from tmm_course.check.result import Case as Result
from tmm_course.compile_ahead import Launched
from tmm_course.exercises.spec import Exercise, Goal, generator
from tmm_course.teach import judge, sandbox, wire

if TYPE_CHECKING:
    from tmm_course.teach.grade import Grader

STARTUP_SECONDS = 120.0
LEAVE_SECONDS = 5.0  # how long a forked worker has to leave when its exercise is graded
TAIL_BYTES = 4096  # what a worker printed last, kept for the row of one that cannot start


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
    # the submission's recording process, its setup cell run: this worker is its child, forked
    # for one exercise (one import of Triton per submission, not per exercise), where it can
    base: Worker | None = None
    forked: bool = False
    broken: bool = False  # its channel failed: stopping it ends the base too
    forks: bool = True  # as a base: whether its process can fork (False once it refused)

    def start(self, deadline: float) -> None:
        self.stop()
        inherited = self.base is not None and self.base.forks
        if inherited:
            self._from_base(deadline)
        else:
            self._spawn()
        for source in [self.grader.setup] * (self.setup and not inherited) + self.ran:
            self.run(source, min(deadline, time.monotonic() + STARTUP_SECONDS), remember=False)

    def _spawn(self) -> None:
        """A process of its own, in a sandbox of its own."""
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

    def _from_base(self, deadline: float) -> None:
        """Start where the base's setup cell left: as its forked child, or, where it cannot fork
        (a GPU's backend), as the base's process itself (later exercises then spawn their own)."""
        base = self.base
        assert base is not None
        if base.running is None or base.running.process.poll() is not None:
            base.start(deadline)
        waited = min(deadline, time.monotonic() + STARTUP_SECONDS)
        reply, _ = base.ask({"op": "fork"}, [], waited, [])
        self.running, self.output = base.running, base.output
        if reply.get("ok") is not True:  # the process is this worker's now
            base.forks, base.running, base.output = False, None, None
            return
        self.forked, self.broken = True, False
        assert self.output is not None
        self.output.printed = 0  # the cap on what it prints is each exercise's

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
            self.broken = True
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
            self.broken = True
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
        if self.forked:  # the child leaves; the base waits for the next exercise
            self.forked = False
            ended = self.broken
            if not ended:
                try:
                    self.ask({"op": "leave"}, [], time.monotonic() + LEAVE_SECONDS, [])
                except WorkerGone:
                    ended = True
            if ended:
                assert self.base is not None
                self.base.stop()
            self.running = None
            return
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

    def replay(self, trial: judge.Trial, record: dict, deadline: float, empty: float | None = None):
        """The record's launches on the trial's case; ``empty``: what the launcher's buffers
        that would hold poison hold instead."""
        extra = None if empty is None else {"empty": empty}
        return self._ask(trial, record, deadline, "replay", extra)

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


def hand_out(gpu: str | None, ticket: Ticket) -> None:
    """What the workers this thread starts get: a GPU (None: none) and their submission's
    ticket (the watchdog's hold on them)."""
    _SLOT.gpu, _SLOT.ticket = gpu, ticket


def _gpu() -> str | None:
    return getattr(_SLOT, "gpu", None)


def grade_exercise(
    spec: Exercise, sources: list[str], recorder: Worker, replayer: Replayer, deadline: float
) -> tuple[str, list[str], str]:
    """(verdict, codes, detail) of one exercise: ``sources`` run in ``recorder``, the
    function's launches recorded case by case, replayed by ``replayer`` on the secret cases and
    judged (:mod:`tmm_course.check.verdict`). Raises :class:`WorkerGone` when a worker stops
    answering for a reason other than a kernel's crash."""
    if time.monotonic() >= deadline:
        raise WorkerGone("timeout", "no time left in this submission's limit")
    recorder.start(deadline)
    loaded = {"ok": True}
    for source in sources:
        loaded = recorder.run(source, deadline)
    if spec.predicts is not None:
        return _predicted(spec, recorder.ask({"op": "answer", "name": spec.function}, [],
                                             deadline, [])[0], loaded)  # fmt: skip
    secret = generator(secrets.randbits(63))
    decoys = generator(secrets.randbits(63))
    cases = spec.draw(secret, tmm_course.BACKEND)
    results: list = []
    last = None  # the last record read: lesson 9 judges the kernel it launched
    nan = bool(secrets.randbits(1))  # NaN poison in every other output, from a random start
    for case in cases:
        nan = not nan
        if case.only_if_all_passed and not all(r.passed for r in results):
            problem = "not run: fix the other cases first"
            results.append(verdict.result(case, code="skipped", problem=problem))
            continue
        header, blobs = judge.Trial.of(spec, case.again(decoys)).request("record")
        try:
            reply, data = recorder.record(header, blobs, deadline)
        except WorkerGone as gone:
            if not gone.crashed:
                raise
            results.append(verdict.result(case, code="crashed", problem=gone.detail))
            break
        if not reply.get("ok"):
            if reply.get("error_type") == "missing":
                problem = "" if loaded.get("ok") else f"; the cell raised {_brief(loaded)}"
                return "missing", [], f"the cell defines no {spec.function}{problem}"
            if reply.get("error_type") == "NotImplementedError":
                results.append(verdict.result(case, code="not_implemented"))
                break
            results.append(verdict.result(case, code="crashed", problem=_brief(reply)))
            continue
        record = judge.read_record(data)
        if isinstance(record, tuple):
            code, problem = record
            results.append(verdict.result(case, code=code, problem=problem, cause=problem))
            continue
        last = record
        trial = judge.Trial.of(spec, case, nan, secret)
        results.append(_replay(trial, record, replayer, deadline))
        if results[-1].code == "timed_out":  # as the check: the cases after it do not run
            break
    for case in cases[len(results) :]:  # after a crash or an unfinished exercise
        results.append(verdict.result(case, code="skipped", problem="not run"))
    goals = None
    if spec.at_scale is not None and not {r.code for r in results} & NOTHING_MORE:
        goals = _at_scale(spec, recorder, replayer, deadline)
    state, codes, detail = verdict.grade(spec, results, last, goals)
    if not loaded.get("ok"):
        detail = f"the cell raised {_brief(loaded)}; {detail}"
    return state, codes, detail


def _at_scale(spec: Exercise, recorder: Worker, replayer: Replayer, deadline: float) -> list[Goal]:
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


def _replay(trial: judge.Trial, record: dict, replayer: Replayer, deadline: float) -> Result:
    """One case's verdict: its record's kernels replayed on the trial's case; replayed again
    with the launcher's poisoned buffers zeroed where that may explain a failure
    (:func:`~tmm_course.check.verdict.may_need_zeros`)."""
    case = trial.case
    early = judge.judge_record(trial, record)
    if early is not None:
        return early
    poisoned = _asked(replayer, trial, record, deadline)
    if isinstance(poisoned, WorkerGone):
        return verdict.result(case, code="crashed", problem=poisoned.detail)
    found = judge.judge_replay(trial, *poisoned)
    if not poisoned[0].get("ok") or not verdict.may_need_zeros(case, found, record):
        return found
    zeroed = _asked(replayer, trial, record, deadline, empty=0.0)
    if isinstance(zeroed, WorkerGone):
        return found  # zeros sent a kernel astray: they explain nothing
    return judge.judge_zeroed(trial, record, found, poisoned, zeroed)


def _asked(
    replayer: Replayer,
    trial: judge.Trial,
    record: dict,
    deadline: float,
    empty: float | None = None,
) -> judge.Replied | WorkerGone:
    """The replay worker's answer, or how a kernel crashed it (a fresh one replaces it)."""
    try:
        reply, returned = replayer.replay(trial, record, deadline, empty)
    except WorkerGone as gone:
        if not gone.crashed:
            raise
        replayer.stop()
        return gone
    return reply, returned if reply.get("ok") else None


def _predicted(spec: Exercise, reply: dict, loaded: dict) -> tuple[str, list[str], str]:
    """(verdict, codes, detail) of an exercise whose answer is data, from the worker's reply:
    the value judged by the check's own :func:`tmm_course.check.prediction.goals` (the
    compiles are the course's kernel's, done here)."""
    from tmm_course.check.prediction import goals
    from tmm_course.check.result import from_goals

    if not reply.get("ok"):
        problem = "" if loaded.get("ok") else f"; the cell raised {_brief(loaded)}"
        if reply.get("error_type") == "missing":
            return "missing", [], f"the cell binds no {spec.function}{problem}"
        return "error", [], f"its value could not be read: {_brief(reply)}{problem}"
    checked = from_goals(spec.name, goals(spec, reply.get("answer")))
    met = sum(c.passed for c in checked.cases)
    detail = f"{met}/{len(checked.cases)} predictions right"
    if checked.passed:
        return "pass", [], detail
    if checked.codes in (["not_implemented"], ["crashed"]):  # unanswered, or not a prediction
        state = "not_implemented" if checked.codes == ["not_implemented"] else "fail"
        return state, checked.codes, checked.primary.message
    return "fail", checked.codes, f"{detail}; {checked.primary.message}"[:500]
