"""The engine behind tmm_course.check: call a learner's launcher on fresh random cases, into an
output the check owns (poisoned, surrounded by canaries), note which kernels it launched, launch
those itself on fresh inputs of its own and watch every lane they load and store (on a GPU, by
replaying the case through the interpreter); then turn what happened into a verdict and one
primary diagnosis that names the cause. Nothing here raises into the notebook.

On the interpreter a case costs one interpreter pass: the launcher is called with every launch
noted and none run, as the grader's recording worker calls it, and the noted kernels run once,
in the check's replay. Only a launcher that did work of its own the replay does not redo (it
wrote, on the host, a tensor its kernels were handed; it raised; a buffer it made was refilled
with poison and the replay failed) is run for real, to say what happened.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import torch
import triton

import tmm_course
from tmm_course import hints
from tmm_course.backend import GPU, INTERPRETER
from tmm_course.check import causes, gpu_rules, launches, record, time_limit, verdict
from tmm_course.check.buffers import Guarded, guarded_output, padded_input, same_bits
from tmm_course.check.memory_guard import (
    OutOfBoundsAccess,
    Trace,
    only_these_tensors,
    raised_from,
    unsupported_reason,
)
from tmm_course.check.replay import Replay
from tmm_course.check.result import Case, CheckResult
from tmm_course.check.work import mine, shared_work, who_did_the_work
from tmm_course.exercises import spec

GPU_CONTEXT_LOST = (
    "CUDA: illegal memory access. The kernel touched memory outside its tensors, and the GPU "
    "cannot be used again in this Python session: restart the kernel. To see which load or "
    "store strayed, run the check on the interpreter (TMM_BACKEND=interpreter), which stops "
    "the access and names it."
)
RESTART = "The GPU cannot be used again in this Python session: restart the kernel."
GPU_CANNOT_SEE = (
    "(on a GPU the check sees stores through the canaries around the output, but not loads "
    "outside the inputs: run it on the interpreter to see those)"
)


def replays() -> bool:
    """On a GPU, whether each case is also replayed through the interpreter (the memory guard
    must know this Triton's interpreter)."""
    return tmm_course.BACKEND == GPU and unsupported_reason() is None


@dataclass
class Trial:
    """A case ready to run: the exercise, its case as drawn (the answers, on the CPU), the
    launcher's inputs with room around them, and the guarded output."""

    exercise: spec.Exercise
    source: spec.Case
    case: Case  # what the check saw
    inputs: Sequence[torch.Tensor | float]
    guard: Guarded
    # the same case with new values, for the replay of the recorded launches (None: the
    # replay runs on copies of these inputs)
    fresh: Callable[[], Trial] | None = None

    @property
    def initial(self) -> torch.Tensor | None:
        """What the output holds before the call (C = alpha*A@B + beta*C), or None: poison."""
        initial = self.source.initial
        return None if initial is None else initial.to(tmm_course.DEVICE)


def trial(exercise: spec.Exercise, case: spec.Case) -> Trial:
    """A case of ``exercise``, ready to run on this machine's device: inputs with room around
    them, a poisoned output inside canaries."""
    device = tmm_course.DEVICE
    shape = case.output.shape
    guard = guarded_output(shape, case.output.dtype, case.output.row_gap)
    return Trial(
        exercise,
        case,
        Case(case.label, case.shape, ragged=case.ragged, strided=case.strided),
        tuple(padded_input(x, device) if isinstance(x, torch.Tensor) else x for x in case.inputs),
        guard,
        fresh=lambda: trial(exercise, case.again(spec.fresh_generator())),
    )


def run_exercise(
    exercise: spec.Exercise,
    fn: Callable,
    *,
    allow_course_kernels: bool = False,
    name: str | None = None,
) -> CheckResult:
    """Judge the learner's ``fn`` on fresh cases of ``exercise`` (see :func:`run_trials`)."""
    cases = exercise.draw(spec.fresh_generator(), tmm_course.BACKEND)

    def call(*everything):
        return fn(*exercise.arguments(everything[:-1], everything[-1]))

    return run_trials(
        name or exercise.name,
        call,
        [trial(exercise, c) for c in cases],
        exercise.tensors,
        messages=exercise.messages,
        allow_course_kernels=allow_course_kernels,
        gpus=exercise.gpus,
    )


def _gpu_context_lost(error: BaseException) -> bool:
    return "illegal memory access" in str(error) or "illegal address" in str(error).lower()


def _from_triton(error: BaseException) -> bool:
    """Whether ``error`` was raised inside Triton's own code (not the learner's)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return False
    package = os.path.dirname(triton.__file__)
    return os.path.abspath(frames[-1].filename).startswith(package + os.sep)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[-1] if text else ''}"


def where(cell: tuple[int, int] | None, shape: tuple[int, ...]) -> str:
    """'row 33, column 0 (below the last row)' for a cell just outside a view; 'element 7
    (past the end)' for one of a 1-D view."""
    if cell is None:
        return "an address between its cells"
    row, col = cell
    if len(shape) == 1:
        side = " (past the end)" if col >= shape[0] else " (before the first)" if col < 0 else ""
        return f"element {col}{side}"
    rows, cols = shape[0], shape[1] if len(shape) > 1 else 1
    side = []
    if row < 0:
        side.append("above the first row")
    elif row >= rows:
        side.append("below the last row")
    if col < 0:
        side.append("left of the first column")
    elif col >= cols:
        side.append("right of the last column")
    return f"row {row}, column {col}" + (f" ({', '.join(side)})" if side else "")


def watch(views: Mapping[str, torch.Tensor]):
    """Record launches on every backend; on the interpreter also every load and store, and
    refuse what a GPU would not compile."""
    stack = contextlib.ExitStack()
    launched = stack.enter_context(launches.recording())
    trace = None
    if tmm_course.BACKEND == INTERPRETER:
        trace = stack.enter_context(only_these_tensors(views, launched))
    return stack, launched, trace


TIMED_OUT = (
    "{who} did not finish within {limit}{where}: a loop that never ends? Check every loop's "
    "bounds and that its counter advances (for k in range(0, tl.cdiv(K, BLOCK_K)), not a while "
    "loop on a value that never changes)."
)
INTERRUPTED = "the check was interrupted (its cases stopped where they were)"


def run_trials(
    exercise: str,
    fn: Callable,
    trials: Sequence[Trial],
    names: Sequence[str],
    *,
    messages: Mapping[str, str] | None = None,
    allow_course_kernels: bool = False,
    gpus: tuple[str, ...] | None = None,
) -> CheckResult:
    """Run ``fn(*inputs, out)`` on every trial and judge it. ``names`` name the tensors among
    the inputs, then the output (for messages and pictures); ``messages`` replace the generic
    sentence of a code with one written for this exercise; ``allow_course_kernels`` accepts an
    output written by the course's own kernels (the pitfalls lab checks those); ``gpus``: the
    GPUs its kernels are compiled for (None: every one the course names)."""
    cases = [t.case for t in trials]
    compiler = gpu_rules.Compiler() if gpus is None else gpu_rules.Compiler(gpus)
    try:
        for index, trial in enumerate(trials):
            if _run_trial(fn, trial, names, compiler, allow_course_kernels, cases[:index]):
                for later in cases[index + 1 :]:
                    later.code = later.code or "skipped"
                    if not later.problem:
                        later.problem = "not run: " + (
                            "an earlier case did not finish"
                            if trial.case.code == "timed_out"
                            else "the GPU context was lost"
                        )
                break
        if all(c.passed for c in cases):  # every specialization launched, compiled too
            for report, refused in compiler.further():
                for case in refused:
                    case.passed, case.code = False, "gpu_would_reject"
                    case.problem = case.cause = report.refusal() or ""
        verdict.too_many_programs(cases, names[-1])  # right values: a grid far too large?
    except KeyboardInterrupt:
        raise KeyboardInterrupt(INTERRUPTED) from None
    result = verdict.decide(exercise, cases, messages or {}, names[-1])
    result.compiled = compiler.rows()
    return result


def _run_trial(
    fn: Callable,
    trial: Trial,
    names: Sequence[str],
    compiler: gpu_rules.Compiler,
    allow_course_kernels: bool,
    earlier: list[Case],
) -> bool:
    """Run and judge one trial; True when the cases after it cannot run."""
    case = trial.case
    if trial.source.only_if_all_passed and not all(c.passed for c in earlier):
        case.code, case.problem = "skipped", "not run: fix the other cases first"
        return False
    again: Again | None = None
    if tmm_course.BACKEND == INTERPRETER and not replays():  # one pass: record, then replay
        done = _recorded_then_replayed(fn, trial, names, compiler, allow_course_kernels)
        if isinstance(done, bool):
            return done
        again = done  # the launcher did work a replay does not redo: run it to say what
    inputs = list(trial.inputs)  # framed by trial() or _copy_of()
    if trial.initial is not None:
        trial.guard.out.copy_(trial.initial)
    views = _views(trial, names)
    replayed: Trace | OutOfBoundsAccess | None = None
    if replays():  # on the CPU first, under the time limit: a GPU kernel cannot be stopped
        replay = Replay.before(inputs, trial.guard.out)
        try:
            with time_limit.time_limit():
                replayed = replay.run(fn, names)
        except time_limit.CaseTimedOut as stop:
            case.code = "timed_out"
            case.problem = _timed_out(stop, " when replayed on the interpreter")
            return True
    stack, launched, trace = watch(views)
    recorder = record.Recorder(views, host_work=allow_course_kernels)
    launched.listeners.append(recorder.note)
    snapshot: dict[str, torch.Tensor] = {}

    def after(launch: launches.Launch) -> None:
        if mine(launch, allow_course_kernels):
            snapshot["out"] = trial.guard.out.detach().cpu().clone()

    launched.finished.append(after)
    try:
        with stack, time_limit.time_limit(tmm_course.BACKEND == INTERPRETER):
            fn(*inputs, trial.guard.out)
        if tmm_course.DEVICE.type == "cuda":
            torch.cuda.synchronize()
    except time_limit.CaseTimedOut as stop:
        case.code, case.problem = "timed_out", _timed_out(stop, "")
        return True
    except Exception as error:  # a learner's bug must not crash the notebook
        seen = replayed if isinstance(replayed, Trace) else trace
        lost = _failed(case, error, seen, views)
        _compile_verdict(case, compiler, launched)
        return lost
    if isinstance(replayed, OutOfBoundsAccess):  # right on the GPU by luck
        case.code = f"out_of_bounds_{'read' if replayed.kind == 'load' else 'write'}"
        case.problem = f"{replayed} (found by replaying the case on the interpreter)"
        return False
    if replays():
        trace = replayed if isinstance(replayed, Trace) else None
    case.trace = trace
    _judge(trial, launched, trace, views, allow_course_kernels, snapshot.get("out"))
    _name_cause(trial, trace, views, recorder, allow_course_kernels)
    _compile_verdict(case, compiler, launched)
    if case.passed:
        return _replayed(trial, recorder, names, again)
    if case.code in (None, "wrong_values"):  # wrong values, no cause named yet
        _name_empty_buffer(trial, recorder, names, again)
    return False


def _recorded_then_replayed(
    fn: Callable,
    trial: Trial,
    names: Sequence[str],
    compiler: gpu_rules.Compiler,
    allow_course_kernels: bool,
) -> bool | Again | None:
    """On the interpreter, one pass: the launcher called with every launch noted and none run
    (as the grader's recording worker calls it), then the noted kernels launched once, on
    fresh inputs of the check's own, every buffer the launcher made refilled
    (:func:`tmm_course.check.record.replay`), under the memory guard and the time limit; what
    they store and touch decides the case. True or False as :func:`_run_trial` returns.

    None, or the replay when it failed (:class:`Again`), where the launcher did work of its
    own that no replay redoes and a run of it says better what happened: it raised, it could
    not be recorded, it wrote on the host a tensor its kernels were handed (the case's, or a
    buffer of its own once a kernel had it), or a replay that refilled a buffer it made with
    poison failed (an answer handed in, or memory read before it was written)."""
    case, out = trial.case, trial.guard.out
    if trial.initial is not None:
        out.copy_(trial.initial)
    poison = out.clone()
    if trial.initial is None and out.is_floating_point():
        # numbers, not NaN: arithmetic on the host (out += 1) must change what it holds
        out.copy_(torch.randn(out.shape, generator=torch.Generator().manual_seed(0)))
    views = _views(trial, names)
    untouched = _Untouched(views.values())
    recorder = record.Recorder(views, host_work=allow_course_kernels)
    raised = False
    try:
        with launches.recording(dry=True) as launched, time_limit.time_limit():
            launched.listeners += [recorder.note, untouched.note]
            fn(*trial.inputs, out)
    except time_limit.CaseTimedOut as stop:
        case.code, case.problem = "timed_out", _timed_out(stop, "")
        return True
    except Exception:  # the launcher's own error: its run names it
        raised = True
    written = untouched.written()
    untouched.restore()  # a run of the launcher, if one follows, starts from the case drawn
    out.copy_(poison)
    if raised or recorder.problem is not None or written:
        return None
    data = recorder.record()
    fresh = trial.fresh() if trial.fresh is not None else _copy_of(trial)
    again = _launch_again(fresh, data, recorder, names)
    poisoned = verdict.poisoned(data) > 0
    if isinstance(again.stopped, time_limit.CaseTimedOut):
        case.code, case.problem = "timed_out", _timed_out(again.stopped, "")
        return True
    if again.stopped is not None:
        if poisoned:
            return again
        lost = _failed(case, again.stopped, again.trace, again.views)
        _compile_verdict(case, compiler, launched)
        return lost
    judged = replace(fresh, case=case)
    case.trace = again.trace
    _judge(judged, launched, again.trace, again.views, allow_course_kernels, None)
    _name_cause(trial, again.trace, again.views, recorder, allow_course_kernels)
    if not case.passed and poisoned:
        _unjudged(trial)
        return again
    _compile_verdict(case, compiler, launched)
    if case.passed:
        case.trace = None  # the record of failures only
    return False


class _Untouched:
    """The bytes of every storage a dry run's kernels were handed (the case's from the start,
    a buffer of the launcher's from the first launch given it), to tell at the end whether the
    launcher wrote one on the host: no kernel runs in a dry run. What an autotuner's
    ``reset_to_zero`` zeroes is taken as it is then: the replay zeroes it too."""

    def __init__(self, tensors: Iterable[torch.Tensor]) -> None:
        self.kept: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for tensor in tensors:
            self._keep(tensor)

    def _keep(self, tensor: torch.Tensor, again: bool = False) -> None:
        storage = tensor.untyped_storage()
        if storage.data_ptr() in self.kept and not again:
            return
        whole = torch.empty(0, dtype=torch.uint8, device=storage.device)
        whole.set_(storage, 0, (storage.nbytes(),), (1,))
        self.kept[storage.data_ptr()] = (whole, whole.clone())

    def note(self, launch: launches.Launch) -> None:
        zeroed = set(launch.hooks.get("zero", ()))
        try:
            named = launches.arguments(launch) if zeroed else {}
        except TypeError:
            named = {}
        for name, value in named.items():
            if name in zeroed and (tensor := launches.tensors_of(value)) is not None:
                self._keep(tensor, again=True)
        for tensor in launch.tensors:
            self._keep(tensor)

    def written(self) -> bool:
        return any(not torch.equal(now, then) for now, then in self.kept.values())

    def restore(self) -> None:
        for now, then in self.kept.values():
            now.copy_(then)


def _unjudged(trial: Trial) -> None:
    """Forget what was found of the trial's case (its launcher is run again to judge it)."""
    case = trial.case
    case.passed, case.problem, case.code, case.cause = False, "", None, ""
    case.trace, case.explains, case.ambiguous, case.secondary = None, (), False, False
    case.known, case.programs, case.idle, case.alike = False, 0, 0, None


def _name_cause(
    trial: Trial,
    trace: Trace | None,
    views: Mapping[str, torch.Tensor],
    recorder: record.Recorder,
    allow_course_kernels: bool,
) -> None:
    """Once the values are judged: the cause a failed case's trace points to
    (:mod:`~tmm_course.check.causes`), then the host work the launch record shows."""
    case = trial.case
    if trace is not None:
        learner = {i for i, x in enumerate(trace.launches) if mine(x, allow_course_kernels)}
        grids = causes.grids_of(trace.launches)
        case.programs, case.idle = causes.idle_programs(trace, learner, grids)
        seen = causes.seen(trace, views, learner, grids)
        strided = bool(case.strided)
        own = trial.exercise.stray_cause
        found = (None if case.passed or case.cause
                 else causes.first(seen, case.code, strided, own))  # fmt: skip
        if found is not None:
            case.code, case.cause, case.explains = found.code, found.sentence, found.explains
            case.ambiguous = found.ambiguous
    if not allow_course_kernels:  # before values, as the grader's judge decides it
        _host_work(trial, recorder)


def _name_empty_buffer(
    trial: Trial, recorder: record.Recorder, names: Sequence[str], again: Again | None
) -> None:
    """Wrong values, where the launcher made buffers with ``torch.empty`` (or the like): the
    verdict's ``uninitialised_buffer`` (:func:`_uninitialised`) when the replay of its
    launches (``again``, else one launched here) is wrong and one with those buffers zeroed
    is right."""
    if recorder.problem is not None:
        return
    data = recorder.record()
    if not verdict.poisoned(data):
        return
    if again is None:
        again = _launch_again(_copy_of(trial), data, recorder, names)
    if again.stopped is not None:
        return  # the first run's diagnosis stands
    named = _uninitialised(again, _judged_again(again), data, recorder, names)
    if named is not None:
        case = trial.case
        case.code, case.problem, case.cause = named.code, named.problem, named.cause


def _host_work(trial: Trial, recorder: record.Recorder) -> None:
    """What the launch record shows (:func:`~tmm_course.check.verdict.host_work`): a course
    kernel did the work (launched, called inside a learner's, or copied under other names),
    or an input was remade on the host for a kernel. It comes before what the values say."""
    if recorder.problem is not None:
        return
    found = verdict.host_work(trial.exercise, trial.source, recorder.record())
    if found is not None:
        case = trial.case
        case.passed, case.code, case.explains = False, found.code, ()
        case.problem = case.cause = found.cause


REPLAYED = (
    "{bad} of {cells} cells of {output} were wrong when the check launched your kernels "
    "again itself, on fresh inputs, with every buffer your launcher made refilled: their "
    "answer came from outside the kernels (computed in Python, torch or numpy and handed to "
    "a kernel, or kept from an earlier call). The kernels must compute it from the inputs."
)


@dataclass
class Again:
    """The recorded launches, launched again by the check on a trial of its own: the trial,
    its views, the memory guard's trace, and what stopped the launches (None: they finished;
    a :class:`~tmm_course.check.time_limit.CaseTimedOut`, or what a kernel raised)."""

    fresh: Trial
    views: dict[str, torch.Tensor]
    trace: Trace | None
    stopped: BaseException | None = None


def _launch_again(
    fresh: Trial,
    data: dict,
    recorder: record.Recorder,
    names: Sequence[str],
    empty: float | None = None,
) -> Again:
    """The recorded launches (``data``) again on ``fresh``'s tensors, every buffer the
    launcher allocated made anew (:func:`tmm_course.check.record.replay`), under the memory
    guard and the time limit."""
    if fresh.initial is not None:
        fresh.guard.out.copy_(fresh.initial)
    views = _views(fresh, names)
    stack, _, trace = watch(views)
    again = Again(fresh, views, trace)
    try:
        with stack, time_limit.time_limit(tmm_course.BACKEND == INTERPRETER):
            record.replay(data, views, recorder.kernels, empty)
    except (time_limit.CaseTimedOut, Exception) as stop:
        again.stopped = stop
    return again


def _views(trial: Trial, names: Sequence[str]) -> dict[str, torch.Tensor]:
    """The trial's tensors by name: its inputs, then its output."""
    tensors = [x for x in trial.inputs if isinstance(x, torch.Tensor)]
    return dict(zip(names, [*tensors, trial.guard.out], strict=True))


def _replayed(
    trial: Trial, recorder: record.Recorder, names: Sequence[str], again: Again | None = None
) -> bool:
    """Launch the recorded kernels again on fresh inputs the check owns, every buffer the
    launcher allocated poisoned (a constant or a copy of an input kept), unless ``again``
    holds that replay already: the case passes only if what those launches store is right.
    True when the cases after it cannot run."""
    case = trial.case
    case.trace = None  # the record of failures only
    if recorder.problem is not None:
        case.passed, case.code, case.problem = False, "crashed", recorder.problem
        return False
    data = recorder.record()
    if again is None:
        fresh = trial.fresh() if trial.fresh is not None else _copy_of(trial)
        again = _launch_again(fresh, data, recorder, names)
    fresh, stop = again.fresh, again.stopped
    output = names[-1]
    if isinstance(stop, time_limit.CaseTimedOut):
        case.passed, case.code = False, "timed_out"
        case.problem = _timed_out(stop, " when the check replayed your kernels")
        return True
    if stop is not None:  # poison sent a kernel astray: its answer was not its own
        case.passed, case.code = False, "no_triton_kernel"
        case.problem = case.cause = (
            REPLAYED.format(bad="some", cells=fresh.guard.out.numel(), output=output)
            + f" (the replay stopped: {_first_line(stop)})"
        )
        return _gpu_context_lost(stop)
    found = _judged_again(again)
    if found.passed:
        return False
    case.passed = False
    answer, out = fresh.source, fresh.guard.out
    # a known mistake the kernels made on their own: a value-dependent slip (a bias added
    # after the ReLU) can be right by chance on the first draw and wrong on this one
    if verdict.known_mistake(answer, found):
        case.code, case.problem, case.cause = found.code, found.cause, found.cause
        case.known = found.known
        return False
    named = _uninitialised(again, found, data, recorder, names)  # right on torch.empty's zeros
    if named is not None:
        case.code, case.problem, case.cause = named.code, named.problem, named.cause
        return False
    bad = int(verdict.wrong_cells(answer, out).sum())
    case.code = "no_triton_kernel"
    case.problem = case.cause = REPLAYED.format(bad=bad, cells=out.numel(), output=output)
    return False


def _judged_again(again: Again) -> Case:
    """The one judge's verdict on what the recorded launches, launched again, stored."""
    fresh = again.fresh
    answer = fresh.source
    stored = verdict.Stored(
        fresh.guard.out,
        fresh.guard.poison if answer.initial is None else None,
        canaries_intact=fresh.guard.canaries_intact(),
        stray_store=_stray(again.trace, "store", again.views),
    )
    return verdict.judge_stored(fresh.exercise, answer, stored)


def _uninitialised(
    again: Again, found: Case, data: dict, recorder: record.Recorder, names: Sequence[str]
) -> Case | None:
    """:func:`~tmm_course.check.verdict.uninitialised`, where the replay ``again`` (judged
    ``found``) :func:`~tmm_course.check.verdict.may_need_zeros`: launched once more with the
    buffers it poisoned zeroed."""
    fresh = again.fresh
    if not verdict.may_need_zeros(fresh.source, found, data):
        return None
    zeroed = _launch_again(_copy_of(fresh), data, recorder, names, empty=0.0)
    if zeroed.stopped is not None:
        return None
    guard = zeroed.fresh.guard
    stored = verdict.Stored(guard.out, None, canaries_intact=guard.canaries_intact())
    return verdict.uninitialised(fresh.exercise, fresh.source, data, fresh.guard.out, stored)


def _copy_of(trial: Trial) -> Trial:
    """The trial again on copies of its inputs and a fresh poisoned output (a trial that
    cannot draw new values)."""
    output = trial.source.output
    guard = guarded_output(output.shape, output.dtype, output.row_gap)
    inputs = tuple(padded_input(x) if isinstance(x, torch.Tensor) else x for x in trial.inputs)
    return Trial(trial.exercise, trial.source, trial.case, inputs, guard)


def _timed_out(stop: time_limit.CaseTimedOut, where: str) -> str:
    """The sentence for a case stopped by its time limit (on a GPU the replay is limited: a
    kernel running on the device cannot be stopped from the host)."""
    who = f"program {stop.program[:2]}" if stop.program is not None else "the case"
    return TIMED_OUT.format(who=who, limit=stop.limit, where=where)


def _compile_verdict(case: Case, compiler: gpu_rules.Compiler, launched: launches.Launches) -> None:
    """A GPU compiler's refusal of a kernel this case launched fails the case, in the
    compiler's words; unless the learner's own NotImplementedError stopped it first."""
    if case.code in ("not_implemented", "timed_out", "course_kernel", "host_copy"):
        return  # decided from the record, as the grader's judge does before it compiles
    if case.code == "crashed" and "NotImplementedError" in case.problem:
        return  # this Triton lacks the feature everywhere: its own sentence says so
    known = {r.kernel for r in compiler.reports.values() if not r.refused}
    refused = compiler.judge(launched.seen, case)
    if refused is None:
        return
    case.passed = False
    case.code, case.problem = "gpu_would_reject", refused.refusal() or ""
    case.cause = case.problem
    # the same kernel compiled for another dtype: a refusal for this one is a consequence
    case.secondary = refused.kernel in known


def _failed(case: Case, error: Exception, trace: Trace | None, views) -> bool:
    """Record why the launcher raised; True if the GPU can no longer be used."""
    case.trace = trace
    if (unfinished := raised_from(error, NotImplementedError)) is not None:
        if not _from_triton(unfinished):
            case.code, case.problem, case.trace = "not_implemented", "NotImplementedError", None
            return False
        case.code = "crashed"  # Triton's own: a feature this Triton does not have
        case.problem = f"Triton {triton.__version__} says: {_first_line(unfinished)}"
        return False
    if gpu_rules.NOT_CONSTEXPR in str(error):  # refused on both backends, in Triton's words
        case.code, case.problem = "gpu_would_reject", gpu_rules.not_constexpr(str(error))
        return False
    if (stray := raised_from(error, OutOfBoundsAccess)) is not None:
        case.code = f"out_of_bounds_{'read' if stray.kind == 'load' else 'write'}"
        case.problem = f"{stray} (stopped: it points outside every tensor)"
        return False
    case.code, case.problem = "crashed", _first_line(error)
    slip = hints.slip(error, tmm_course.BACKEND)  # a first-timer's slip, in plain words
    if slip is not None:  # a known slip: its sentence heads the verdict, not "read the error"
        case.cause = slip
        if slip not in case.problem:
            case.problem = f"{slip} (it raised {case.problem})"
    if _gpu_context_lost(error):
        case.problem = GPU_CONTEXT_LOST
        for kind in ("store", "load"):  # the replay on the interpreter saw where
            if (stray := _stray(trace, kind, views)) is not None:
                case.code = f"out_of_bounds_{'write' if kind == 'store' else 'read'}"
                case.problem = f"{stray}. {RESTART}"
                break
        return True
    case.problem += "  (" + traceback.extract_tb(error.__traceback__)[-1].name + ")"
    return False


def _judge(
    trial: Trial,
    launched: launches.Launches,
    trace: Trace | None,
    views: Mapping[str, torch.Tensor],
    allow_course_kernels: bool,
    after_last_launch: torch.Tensor | None = None,
) -> None:
    """Reduce the case to what its kernels stored (:class:`~tmm_course.check.verdict.Stored`)
    and let the one judge decide it."""
    case, out = trial.case, trial.guard.out
    output = list(views)[-1]
    if not launched.seen:
        case.code = "no_triton_kernel"
        case.problem = "no kernel[grid](...) launch was seen"
        return
    if not allow_course_kernels and all(launch.from_the_course for launch in launched.seen):
        case.code = "course_kernel"
        names = ", ".join(sorted({f"{x.module}.{x.kernel}" for x in launched.seen}))
        case.problem = f"launched only the course's {names}"
        return
    stray_store = _stray(trace, "store", views)
    if stray_store is None and not trial.guard.canaries_intact():
        stray_store = "memory around the output changed" + ("" if trace else " " + GPU_CANNOT_SEE)
    inputs = list(views.values())[:-1]
    stored = verdict.Stored(
        out,
        trial.guard.poison if trial.initial is None else None,
        inputs_changed=not all(
            same_bits(x, given) for x, given in zip(inputs, trial.source.tensors, strict=True)
        ),
        stray_store=stray_store,
        stray_load=_stray(trace, "load", views),
        output_loaded=None if trace is None else trace.touched("load", output) > 0,
        unstored=None if trace is None else int((~trace.cells("store", output)).sum()),
    )
    if stray_store is None and stored.stray_load is None:  # read only once the values are right
        stored.elsewhere = who_did_the_work(
            trace, views, after_last_launch, course_too=allow_course_kernels
        )
        stored.unshared = shared_work(trace, list(views)[:-1], trial.exercise.work)
    stored.trace = trace
    found = verdict.judge_stored(trial.exercise, trial.source, stored)
    case.passed, case.code, case.problem = found.passed, found.code, found.problem
    case.cause, case.explains, case.ambiguous = found.cause, found.explains, found.ambiguous
    case.known, case.alike = found.known, found.alike


def _stray(trace: Trace | None, kind: str, views: Mapping[str, torch.Tensor]) -> str | None:
    """Where lanes of ``kind`` ("load" or "store") fell outside a view, or None."""
    outside = trace.outside(kind) if trace is not None else {}
    if not outside:
        return None
    name, lanes = next(iter(outside.items()))
    straying = trace.first_straying(kind, name)
    first = where(straying.strays[0] if straying else None, tuple(views[name].shape))
    verb = "stored" if kind == "store" else "loaded"
    return f"{verb} {lanes} lane(s) outside {name}, first at {first}; not performed"
