"""The two kinds of worker a grade runs in the sandbox; neither holds a key or decides a verdict.

    python -m tmm_course.teach.worker READ_FD WRITE_FD

A *recording* worker runs what the judge sends, in one namespace, as a notebook would: the
reference's setup cell, then the cells one exercise needs; then, for each case, it calls the
exercise's function on tensors shaped like the judge's case (other values: it never sees the
ones judged) with every launch noted and not run, and sends back the launch record (plain data
and the kernels' sources, :mod:`tmm_course.check.record`). What the function computed stays
here. For an exercise whose answer is data (lesson 6's predict_knob), it sends back the value
the cell bound, as JSON: the judge reads it as data and compiles what it is judged against.
On the interpreter, one recording worker per submission runs the setup cell and then forks a
child for each exercise (``fork``, ``leave``): every exercise starts from that state, and
Triton is imported once.

A *replay* worker runs no cell. It is given kernel sources the judge has read
(:mod:`.triton_only`) and, per case, the launch plan and the judge's secret inputs; it defines
the kernels, passes each launch through the check's compile gate (every GPU the course names,
:class:`tmm_course.check.gpu_rules.Compiler`) with a compiler that calls nothing but Triton,
launches them (on the interpreter, every load and store inside the case's tensors or the plan's
buffers, :mod:`tmm_course.check.memory_guard`) and sends back every storage it was given and
what the guard saw. The judge compares.
"""

from __future__ import annotations

import contextlib
import json
import linecache
import sys
import traceback


def _display(*values: object, **_: object) -> None:
    """``display()`` as a notebook has it, printing plainly."""
    for value in values:
        print(repr(value))


def _tensors(header: dict, blobs: list[bytes]):
    import torch

    import tmm_course

    args = []
    storages = []
    for spec in header["args"]:
        if spec["kind"] == "scalar":
            args.append(spec["value"])
            continue
        dtype = getattr(torch, spec["dtype"])
        if "numel" in spec:  # its shape alone: zeros for a call whose launches never run
            storage = torch.zeros(int(spec["numel"]), dtype=dtype, device=tmm_course.DEVICE)
        else:
            storage = torch.frombuffer(bytearray(blobs[spec["blob"]]), dtype=dtype).to(
                tmm_course.DEVICE
            )
        storages.append(storage)
        args.append(torch.as_strided(storage, spec["size"], spec["stride"], spec["offset"]))
    return args, storages


def _only_tensors(args: list) -> list:
    import torch

    return [a for a in args if isinstance(a, torch.Tensor)]


def _error(error: BaseException) -> dict:
    return {
        "ok": False,
        "error_type": type(error).__name__,
        "error": str(error)[:400],
        "where": "".join(traceback.format_exception_only(type(error), error))[-400:],
    }


def _record(fn, header: dict, blobs: list[bytes]) -> bytes:
    """Call the exercise's function on the case under the recorder: the record, as JSON."""
    from tmm_course.check.record import Recorder

    args, _ = _tensors(header, blobs)
    views = dict(zip(header["tensors"], _only_tensors(args), strict=True))
    recorder = Recorder(views)
    with noting_only() as seen:
        seen.listeners.append(recorder.note)
        fn(*[args[i] for i in header["order"]])
    if recorder.problem is not None:
        raise TypeError(recorder.problem)
    return json.dumps(recorder.record()).encode()


def noting_only():
    """Inside the block every ``kernel[grid](...)`` is noted and not run: the judge replays
    what was noted, so running it here would only cost time (and a stray lane could crash
    this worker before the record is sent)."""
    from tmm_course.check import launches

    return launches.recording(dry=True)


class Refused(RuntimeError):
    """A replayed launch that a GPU's compiler refuses (or that calls what is not Triton)."""


class Checked:
    """A kernel that, before each launch, goes through the check's compile gate
    (:class:`tmm_course.check.gpu_rules.Compiler`: every GPU the course names, each with its
    limits) under the strict compiler: nothing that a GPU refuses runs."""

    def __init__(self, kernel, name: str, replayer: Replayer) -> None:
        self.kernel, self.name, self.replayer = kernel, name, replayer

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            if self.replayer.noting is not None:  # an exercise's AtScale: compiled, not run
                from tmm_course.check.compiled import launched
                from tmm_course.teach import triton_only

                targets, found = self.replayer.noting
                with triton_only.strict():
                    found.append(launched(self.kernel, self.name, args, kwargs, grid, targets))
                return None
            self.check(args, kwargs, grid)
            return self.kernel[grid](*args, **kwargs)

        return launch

    def check(self, args: tuple, kwargs: dict, grid) -> None:
        from tmm_course.check.launches import Launch, tensors_of
        from tmm_course.teach import triton_only

        fn = getattr(self.kernel, "fn", self.kernel)
        launch = Launch(
            self.name,
            getattr(fn, "__module__", "") or "",
            tuple(t for a in (*args, *kwargs.values()) if (t := tensors_of(a)) is not None),
            self.kernel,
            args,
            kwargs,
            grid,
        )
        try:
            with triton_only.strict():
                refused = self.replayer.compiler.judge([launch])
        except Exception as error:  # an argument the compiler cannot type, or not Triton
            raise Refused(f"{self.name} does not compile: {error}") from None
        if refused is not None:
            raise Refused(refused.refusal() or f"a GPU's compiler refuses {self.name}")
        requires = self.replayer.requires
        if requires is not None:
            from tmm_course import compile_ahead

            key = (id(self.kernel), compile_ahead.specialize(self.kernel, args, kwargs).key()[:2],
                   int(kwargs.get("num_warps", 4)), int(kwargs.get("num_stages", 3)))  # fmt: skip
            if key not in self.replayer.shown:
                from tmm_course.check.compiled import shown

                with triton_only.strict():
                    self.replayer.shown[key] = shown(requires, self.kernel, args, kwargs)[0]
            self.replayer.used.append(key)


class Replayer:
    """The replay worker's kernels, each defined once, each specialization compiled once."""

    def __init__(self) -> None:
        from tmm_course.check.gpu_rules import Compiler

        self.kernels: dict = {}
        # the check's compile gate, one per set of GPUs an exercise names (Exercise.gpus)
        self.compilers: dict[tuple[str, ...] | None, Compiler] = {}
        self.compiler = Compiler()
        # what the exercise asks of a compiled kernel beyond its values (lesson 7), whether
        # each specialization shows it, and those the replay under way launched
        self.requires = None
        self.shown: dict = {}
        self.used: list = []
        # while a record is read at scale: the GPUs to compile for, and the launches compiled
        self.noting: tuple[list[str], list] | None = None

    def define(self, data: dict) -> None:
        from tmm_course.teach import triton_only

        for key, kernel in triton_only.define_record(data).items():
            name = data["kernels"][key]["name"]
            self.kernels[key] = Checked(kernel, name, self)

    def replay(self, header: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        import tmm_course
        from tmm_course.backend import INTERPRETER
        from tmm_course.check import causes, launches, time_limit
        from tmm_course.check.memory_guard import OutOfBoundsAccess, only_these_tensors, raised_from
        from tmm_course.check.record import replay as run_plan
        from tmm_course.check.work import shared_work
        from tmm_course.exercises import BY_NAME

        args, storages = _tensors(header, blobs)
        views = dict(zip(header["tensors"], _only_tensors(args), strict=True))
        facts: dict = {"ok": True}
        # the launcher's buffers that would hold poison hold this instead (the judge asks
        # whether they only needed zeros: tmm_course.check.verdict.uninitialised)
        empty = header.get("empty")
        empty = float(empty) if type(empty) in (int, float) else None
        exercise = BY_NAME.get(header.get("exercise", ""))
        self.requires = getattr(exercise, "requires", None)
        gpus = getattr(exercise, "gpus", None)
        if gpus not in self.compilers:  # as the check: every GPU the course names, or these
            from tmm_course.check.gpu_rules import Compiler

            self.compilers[gpus] = Compiler() if gpus is None else Compiler(gpus)
        self.compiler = self.compilers[gpus]
        self.used = []
        with contextlib.ExitStack() as stack:
            launched = stack.enter_context(launches.recording())
            trace = None
            if tmm_course.BACKEND == INTERPRETER:
                trace = stack.enter_context(only_these_tensors(views, launched))
            try:
                with time_limit.time_limit(tmm_course.BACKEND == INTERPRETER):
                    run_plan(json.loads(blobs[header["plan"]]), views, self.kernels, empty)
            except time_limit.CaseTimedOut as stop:  # a program that never ends, as the check
                return {"ok": False, "error_type": "timed_out", "error": str(stop)}, []
            except Refused as refused:
                return {"ok": False, "error_type": "gpu_would_reject", "error": str(refused)}, []
            except Exception as error:
                stray = raised_from(error, OutOfBoundsAccess)
                if stray is None:
                    raise
                facts["stray"] = {"kind": stray.kind, "text": str(stray)[:300]}
        _synchronize()
        from tmm_course.teach import triton_only

        with triton_only.strict():  # the specializations new in this case, as the check does
            refused = self.compiler.further()
        if refused:
            said = refused[0][0].refusal() or "a GPU's compiler refuses a kernel"
            return {"ok": False, "error_type": "gpu_would_reject", "error": said}, []
        if self.requires is not None:
            facts["shows"] = bool(self.used) and all(self.shown[key] for key in self.used)
        if trace is not None:
            output = header["tensors"][-1]
            facts["outside"] = {kind: trace.outside(kind) for kind in ("load", "store")}
            facts["output_loaded"] = trace.touched("load", output) > 0
            facts["unstored"] = int((~trace.cells("store", output)).sum())
            every = set(range(len(trace.launches)))  # the record's kernels: the learner's
            grids = causes.grids_of(trace.launches)
            facts["programs"], facts["idle"] = causes.idle_programs(trace, every, grids)
            work = getattr(exercise, "work", None)
            facts["unshared"] = shared_work(trace, header["tensors"][:-1], work)
        from tmm_course.check.buffers import as_bytes

        return facts, [as_bytes(s) for s in storages]

    def launched(self, header: dict, blobs: list[bytes]) -> dict:
        """A record's launches on the case's tensors, each compiled ahead for
        ``header["targets"]`` and not run (an exercise's
        :class:`~tmm_course.exercises.spec.AtScale`): their figures, as plain data."""
        from tmm_course.check.record import replay as run_plan

        args, _ = _tensors(header, blobs)
        views = dict(zip(header["tensors"], _only_tensors(args), strict=True))
        self.noting = ([str(t) for t in header["targets"]], [])
        try:
            run_plan(json.loads(blobs[header["plan"]]), views, self.kernels)
            return {"ok": True, "launched": [x.data() for x in self.noting[1]]}
        finally:
            self.noting = None


class Session:
    """One worker's state (the namespace its cells ran in, the replayer's kernels) and its
    answer to each request of the judge's, the same whether the request came down a pipe
    (:func:`serve`) or from a judge in this process (a test's)."""

    def __init__(self) -> None:
        self.namespace: dict = {"__name__": "__main__", "display": _display}
        self.replayer: Replayer | None = None
        self.count = 0

    def answer(self, header: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        """The reply to one request and the blobs that go with it; never raises (what the
        student's code raised is the answer)."""
        op = header.get("op")
        reply: dict = {"ok": True}
        out: list[bytes] = []
        try:
            if op == "run":
                self.count += 1
                filename = f"<cell {self.count}: {header.get('name', '')}>"
                source = header["source"]
                linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                exec(compile(source, filename, "exec"), self.namespace)  # the judge's order
            elif op == "record":
                fn = self.namespace.get(header["name"])
                if not callable(fn):
                    reply = {"ok": False, "error_type": "missing",
                             "error": f"no function named {header['name']}"}  # fmt: skip
                else:
                    out = [_record(fn, header, blobs)]
                    reply = {"ok": True, "size": len(out[0])}
            elif op == "answer":  # an answer that is data: its value, as plain JSON
                if header["name"] not in self.namespace:
                    reply = {"ok": False, "error_type": "missing",
                             "error": f"no value named {header['name']}"}  # fmt: skip
                else:
                    value = self.namespace[header["name"]]
                    reply = {"ok": True, "answer": json.loads(json.dumps(value))}
            elif op == "prepare":  # a replay worker's imports, before it is needed
                import tmm_course
                from tmm_course import compile_ahead  # noqa: F401
                from tmm_course.check import memory_guard, record  # noqa: F401
                from tmm_course.teach import triton_only  # noqa: F401
            elif op == "kernels":
                import tmm_course  # noqa: F401 - first: it picks the backend

                self.replayer = self.replayer or Replayer()
                self.replayer.define(json.loads(blobs[0]))
            elif op == "replay":
                assert self.replayer is not None, "no kernels defined"
                reply, out = self.replayer.replay(header, blobs)
            elif op == "launched":
                assert self.replayer is not None, "no kernels defined"
                reply = self.replayer.launched(header, blobs)
        except BaseException as error:  # the student's code: any failure is an answer
            if isinstance(error, SystemExit | KeyboardInterrupt) and op == "run":
                reply = _error(RuntimeError(f"{type(error).__name__} raised"))
            else:
                reply = _error(error)
            out = []
        sys.stdout.flush()
        return reply, out


def _fork_refused() -> str | None:
    """Why this process may not fork a child per exercise, or None: only on the interpreter
    (CUDA does not survive a fork) and with no other thread running."""
    import threading

    import tmm_course

    if tmm_course.BACKEND != "interpreter":
        return f"the {tmm_course.BACKEND} backend cannot fork"
    if threading.active_count() > 1:
        return "more than one thread is running"
    return None


def _forked(write_fd: int) -> bool:
    """The ``fork`` request: True in the child, which answers and serves the exercise on this
    channel; the parent waits for it and returns False once it has left (``leave``), or ends
    as the child ended (a signal, an exit code), so the judge sees the crash it would see."""
    import os
    import signal

    from tmm_course.teach import wire

    refused = _fork_refused()
    if refused is not None:
        wire.send(write_fd, {"ok": False, "error_type": "fork", "error": refused})
        return False
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        wire.send(write_fd, {"ok": True})
        return True
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # the signal that ended the child ends this process too
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        os._exit(128 - code)
    if code != 0:
        os._exit(code)
    return False


def serve(read_fd: int, write_fd: int) -> None:
    """Answer the judge's requests until ``bye``. ``fork`` makes a child that starts from this
    process's state (the setup cell run) and serves one exercise until ``leave``."""
    import os

    from tmm_course.teach import wire

    session = Session()
    child = False
    while True:
        try:
            header, blobs = wire.receive(read_fd)
        except wire.ChannelError:
            return
        op = header.get("op")
        if op == "bye":
            return
        if op in ("fork", "leave"):
            if op == "fork" and not child:
                child = _forked(write_fd)
            elif op == "leave" and child:
                wire.send(write_fd, {"ok": True})
                sys.stdout.flush()
                os._exit(0)
            else:
                wire.send(write_fd, {"ok": False, "error_type": op, "error": f"no {op} here"})
            continue
        reply, out = session.answer(header, blobs)
        if op == "record" and out:  # any size: its size first, then the data
            wire.send(write_fd, reply)
            wire.send(write_fd, {}, out)
        else:
            wire.send(write_fd, reply, out)


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
