"""The engine behind tmm_course.check: run a learner's launcher on fresh random cases, into an
output the check owns (poisoned, surrounded by canaries), watch which kernels it launched and,
every lane it loaded and stored (on a GPU, by replaying the case through the interpreter); then
turn what happened into a verdict and one primary diagnosis that names the cause. Nothing here
raises into the notebook.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import torch
import triton

import tmm_course
from tmm_course import hints
from tmm_course.backend import GPU, INTERPRETER
from tmm_course.check import gpu_rules, launches, record, time_limit
from tmm_course.check.buffers import Guarded, guarded_output, padded_input
from tmm_course.check.memory_guard import (
    OutOfBoundsAccess,
    Trace,
    only_these_tensors,
    raised_from,
    unsupported_reason,
)
from tmm_course.check.replay import Replay
from tmm_course.check.result import MESSAGES, Case, CheckResult, Diagnosis
from tmm_course.check.work import mine, shared_work, who_did_the_work
from tmm_course.exercises import spec

# the order diagnoses are reported in: the first one found is the primary diagnosis
PRIORITY = (
    "not_implemented",
    "timed_out",
    "gpu_would_reject",
    # before no_triton_kernel: a buffer whose leftover memory changes the answer also makes a
    # 1x1 case's refilled replay differ, which alone would read as an answer from elsewhere
    "uninitialised_buffer",
    "no_triton_kernel",
    "course_kernel",
    "host_copy",
    "no_descriptor",
    # right values, the work not shared as the exercise asks (split-K's slices)
    "goal_missed",
    # a known mistake matched exactly: strays and crashes elsewhere follow from it
    "transposed",
    "precision",
    "reads_c_when_beta_zero",
    "crashed",
    "out_of_bounds_write",
    "out_of_bounds_read",
    "unwritten",
    "ragged_edge",
    "ignores_strides",
    "wrong_values",
)

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


WrongAnswer = spec.Mistake  # a known mistake: what it stores, and the sentence for its cause


@dataclass
class Trial:
    """A case ready to run: the launcher's inputs, the guarded output and the right answer."""

    case: Case
    inputs: Sequence[torch.Tensor | float]  # tensors get random room around them
    guard: Guarded
    expected: torch.Tensor
    wrong_answers: list[WrongAnswer] = field(default_factory=list)
    atol: float | torch.Tensor = 0.0  # allowed |out - expected|, per cell if a tensor
    # a last look once the values are right, given (out, *inputs): returns (code, problem)
    # for a subtler fault, or None
    extra: Callable[..., tuple[str, str] | None] | None = None
    # what the output holds before the call, for updates like C = alpha*A@B + beta*C
    # (None: the output is poisoned, and a cell still poisoned afterwards was never written)
    initial: torch.Tensor | None = None
    # run only when every earlier case passed (a probe for a subtler fault, which may also
    # be unsafe to run on a kernel that is wrong in a plainer way)
    only_if_all_passed: bool = False
    # C = alpha*A@B + beta*C with beta = 0: the output must not be read
    output_must_not_be_read: bool = False
    # the same case with new values, for the replay of the recorded launches (None: the
    # replay runs on copies of these inputs)
    fresh: Callable[[], Trial] | None = None
    # the exercise's look at how the launches shared the reading once the values are right
    # (spec.Exercise.work), or None
    work: Callable[[spec.Reads], str | None] | None = None


def trial(case: spec.Case) -> Trial:
    """A case of an exercise, ready to run on this machine's device: inputs with random room
    around them, a poisoned output inside canaries, the answers where the output lies."""
    device = tmm_course.DEVICE

    def here(x):
        return x.to(device) if isinstance(x, torch.Tensor) else x

    shape = case.output.shape
    guard = guarded_output(
        (1, shape[0]) if len(shape) == 1 else shape, case.output.dtype, case.output.row_gap
    )
    if len(shape) == 1:
        guard.out = guard.out[0]  # the 1-D view the launcher fills
    mistakes = [
        spec.Mistake(m.code, m.value.to(device), m.cause, m.explains, m.ambiguous, m.refine)
        for m in case.mistakes
    ]
    return Trial(
        case=Case(case.label, case.shape, ragged=case.ragged, strided=case.strided),
        inputs=tuple(
            padded_input(x, device) if isinstance(x, torch.Tensor) else x for x in case.inputs
        ),
        guard=guard,
        expected=case.expected.to(device),
        wrong_answers=mistakes,
        atol=here(case.atol),
        extra=case.probe,
        initial=here(case.initial),
        only_if_all_passed=case.only_if_all_passed,
        output_must_not_be_read=case.output_must_not_be_read,
        fresh=lambda: trial(case.again(spec.fresh_generator())),
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
        [replace(trial(c), work=exercise.work) for c in cases],
        exercise.tensors,
        messages=exercise.messages,
        allow_course_kernels=allow_course_kernels,
        gather=exercise.gather,
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


def _unwritten(out: torch.Tensor) -> torch.Tensor:
    return out.isnan() if out.is_floating_point() else out == -1


def _isclose(a: torch.Tensor, b: torch.Tensor, atol: float | torch.Tensor) -> torch.Tensor:
    return (a.double() - b.double()).abs() <= atol  # NaN compares False


def _close(a: torch.Tensor, b: torch.Tensor, atol: float | torch.Tensor) -> bool:
    return bool(_isclose(a, b, atol).all())


def where(cell: tuple[int, int] | None, shape: tuple[int, ...]) -> str:
    """'row 33, column 0 (below the last row)' for a cell just outside a view."""
    if cell is None:
        return "an address between its cells"
    row, col = cell
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
    "{who} did not finish within {seconds:g} s{where}: a loop that never ends? Check every loop's "
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
    gather: bool = False,
    gpus: tuple[str, ...] | None = None,
) -> CheckResult:
    """Run ``fn(*inputs, out)`` on every trial and judge it. ``names`` name the tensors among
    the inputs, then the output (for messages and pictures); ``messages`` replace the generic
    sentence of a code with one written for this exercise; ``allow_course_kernels`` accepts an
    output written by the course's own kernels (the pitfalls lab checks those); ``gather`` says
    the exercise is to read strided inputs in place (a contiguous copy made on the host is
    named); ``gpus``: the GPUs its kernels are compiled for (None: every one the course
    names)."""
    cases = [t.case for t in trials]
    compiler = gpu_rules.Compiler() if gpus is None else gpu_rules.Compiler(gpus)
    try:
        for index, trial in enumerate(trials):
            if _run_trial(fn, trial, names, compiler, allow_course_kernels, gather, cases[:index]):
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
    except KeyboardInterrupt:
        raise KeyboardInterrupt(INTERRUPTED) from None
    result = _verdict(exercise, cases, messages or {})
    result.compiled = compiler.rows()
    return result


def _run_trial(
    fn: Callable,
    trial: Trial,
    names: Sequence[str],
    compiler: gpu_rules.Compiler,
    allow_course_kernels: bool,
    gather: bool,
    earlier: list[Case],
) -> bool:
    """Run and judge one trial; True when the cases after it cannot run."""
    case = trial.case
    if trial.only_if_all_passed and not all(c.passed for c in earlier):
        case.code, case.problem = "skipped", "not run: fix the other cases first"
        return False
    inputs = [padded_input(x) if isinstance(x, torch.Tensor) else x for x in trial.inputs]
    if trial.fresh is not None:  # drawn by trial(): the inputs have their room already
        inputs = list(trial.inputs)
    if trial.initial is not None:
        trial.guard.out.copy_(trial.initial)
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    views = dict(zip(names, [*tensors, trial.guard.out], strict=True))
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
    recorder = record.Recorder(views)
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
    _judge(trial, launched, trace, views, allow_course_kernels, snapshot.get("out"), gather)
    if case.code is None and not allow_course_kernels:
        _course_inside(case, recorder)
    _compile_verdict(case, compiler, launched)
    if case.passed:
        return _replayed(trial, recorder, names)
    if case.code in (None, "wrong_values"):  # wrong values, no cause named yet
        _name_empty_buffer(trial, recorder, names, trace)
    return False


def _name_empty_buffer(
    trial: Trial, recorder: record.Recorder, names: Sequence[str], trace: Trace | None
) -> None:
    """Wrong values from kernels that store or add (``tl.atomic_add``) into a buffer the
    launcher made with ``torch.empty``, reading what it held: replayed with that buffer full
    of NaN, cells that were numbers turn NaN. (A buffer a kernel only reads holds what the
    host put there: the answer, when it is right; that is a copied answer, not this.)"""
    if recorder.problem is not None or trace is None:
        return
    if not any(access.kind == "store" for access in trace.scratch):
        return
    data = recorder.record()
    empty = [b for b in data["buffers"] if b["fill"].get("kind") == "poison"]
    if not empty:
        return
    fresh = _copy_of(trial)
    try:
        _launch_again(fresh, data, recorder, names)
    except Exception:  # the first run's diagnosis stands
        return
    before, after = trial.guard.out, fresh.guard.out
    turned = int((after.isnan() & ~before.isnan()).sum())
    if turned:
        case = trial.case
        case.code = "uninitialised_buffer"
        case.problem = case.cause = UNINITIALISED.format(
            bad=turned, cells=after.numel(), output=names[-1], count=len(empty)
        )


def _course_inside(case: Case, recorder: record.Recorder) -> None:
    """A learner kernel that calls one of the course's ``@triton.jit`` functions inside it
    (or a course kernel launched under another name) did not do the exercise itself."""
    found = record.course_kernels(recorder.record()) if recorder.problem is None else None
    if found:
        case.passed = False
        case.code = "course_kernel"
        case.problem = case.cause = f"{found}: the exercise is your own kernel, all the way down."


REPLAYED = (
    "{bad} of {cells} cells of {output} were wrong when the check launched your kernels "
    "again itself, on fresh inputs, with every buffer your launcher made refilled: their "
    "answer came from outside the kernels (computed in Python, torch or numpy and handed to "
    "a kernel, or kept from an earlier call). The kernels must compute it from the inputs."
)


def _launch_again(
    fresh: Trial, data: dict, recorder: record.Recorder, names: Sequence[str]
) -> tuple[dict[str, torch.Tensor], Trace | None]:
    """The recorded launches (``data``) again on ``fresh``'s tensors, every buffer the
    launcher allocated made anew (:func:`tmm_course.check.record.replay`), under the memory
    guard and the time limit: the views they were given and the guard's trace."""
    if fresh.initial is not None:
        fresh.guard.out.copy_(fresh.initial)
    tensors = [x for x in fresh.inputs if isinstance(x, torch.Tensor)]
    views = dict(zip(names, [*tensors, fresh.guard.out], strict=True))
    stack, _, trace = watch(views)
    with stack, time_limit.time_limit(tmm_course.BACKEND == INTERPRETER):
        record.replay(data, views, recorder.kernels)
    return views, trace


def _replayed(trial: Trial, recorder: record.Recorder, names: Sequence[str]) -> bool:
    """Launch the recorded kernels again on fresh inputs the check owns, every buffer the
    launcher allocated poisoned (a constant or a copy of an input kept): the case passes only
    if what those launches store is right. True when the cases after it cannot run."""
    case = trial.case
    case.trace = None  # the record of failures only
    if recorder.problem is not None:
        case.passed, case.code, case.problem = False, "crashed", recorder.problem
        return False
    data = recorder.record()
    fresh = trial.fresh() if trial.fresh is not None else _copy_of(trial)
    output = names[-1]
    try:
        views, trace = _launch_again(fresh, data, recorder, names)
    except time_limit.CaseTimedOut as stop:
        case.passed, case.code = False, "timed_out"
        case.problem = _timed_out(stop, " when the check replayed your kernels")
        return True
    except Exception as error:  # poison sent a kernel astray: its answer was not its own
        case.passed, case.code = False, "no_triton_kernel"
        case.problem = case.cause = (
            REPLAYED.format(bad="some", cells=fresh.guard.out.numel(), output=output)
            + f" (the replay stopped: {_first_line(error)})"
        )
        return _gpu_context_lost(error)
    out = fresh.guard.out
    strayed = _stray(trace, "store", views) is not None or not fresh.guard.canaries_intact()
    if strayed or not _close(out, fresh.expected, fresh.atol):
        # a known mistake the kernels made on their own: a value-dependent slip (a bias added
        # after the ReLU) can be right by chance on the first draw and wrong on this one
        mistake = None if strayed else next(
            (m for m in fresh.wrong_answers if m.value.shape == out.shape
             and _close(out, m.value, fresh.atol)), None)  # fmt: skip
        case.passed = False
        if mistake is not None:
            case.code, case.problem, case.cause = mistake.code, mistake.cause, mistake.cause
            return False
        bad = int((~_isclose(out, fresh.expected, fresh.atol)).sum())
        case.code = "no_triton_kernel"
        case.problem = case.cause = REPLAYED.format(bad=bad, cells=out.numel(), output=output)
    return False


UNINITIALISED = (
    "{bad} of {cells} cells of {output} turned NaN when the check launched your kernels "
    "again with the {count} buffer(s) your launcher made with torch.empty (or the like) "
    "filled with NaN: torch.empty hands out memory as it was, zeros only by chance. A kernel "
    "added into such a buffer (tl.atomic_add) or read it before writing it: make it with "
    "torch.zeros, or store into it first."
)


def _copy_of(trial: Trial) -> Trial:
    """The trial again on copies of its inputs and a fresh poisoned output (a trial that
    cannot draw new values)."""
    out = trial.guard.out
    guard = guarded_output(tuple(out.shape) if out.dim() == 2 else (1, out.numel()), out.dtype)
    if out.dim() != 2:
        guard.out = guard.out[0]
    if out.dim() == 2 and out.stride(0) != out.shape[1]:  # rows padded: keep the gap
        guard = guarded_output(tuple(out.shape), out.dtype, out.stride(0) - out.shape[1])
    inputs = tuple(padded_input(x) if isinstance(x, torch.Tensor) else x for x in trial.inputs)
    return Trial(trial.case, inputs, guard, trial.expected, atol=trial.atol, initial=trial.initial)


def _timed_out(stop: time_limit.CaseTimedOut, where: str) -> str:
    """The sentence for a case stopped by its time limit (on a GPU the replay is limited: a
    kernel running on the device cannot be stopped from the host)."""
    who = f"program {stop.program[:2]}" if stop.program is not None else "the case"
    return TIMED_OUT.format(who=who, seconds=stop.seconds, where=where)


def _compile_verdict(case: Case, compiler: gpu_rules.Compiler, launched: launches.Launches) -> None:
    """A GPU compiler's refusal of a kernel this case launched fails the case, in the
    compiler's words; unless the learner's own NotImplementedError stopped it first."""
    if case.code in ("not_implemented", "timed_out", "course_kernel"):
        return  # a course kernel called inside: the cause (a compile refusal follows from it)
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
    gather: bool = False,
) -> None:
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
    if (stray := _stray(trace, "store", views)) is not None:
        case.code, case.problem = "out_of_bounds_write", stray
        _name_stray_cause(trial, case)
        return
    if not trial.guard.canaries_intact():
        case.code = "out_of_bounds_write"
        case.problem = "memory around the output changed" + ("" if trace else " " + GPU_CANNOT_SEE)
        return
    if trial.output_must_not_be_read:
        read = trace is not None and trace.touched("load", output) > 0
        all_nan = trace is None and bool(_unwritten(out).all())
        if read or all_nan:
            case.code = "reads_c_when_beta_zero"
            case.problem = (
                f"{output} was loaded although beta == 0"
                if read
                else f"every cell is NaN: {output} (full of NaN) was read and scaled by beta = 0"
            )
            return
    if (stray := _stray(trace, "load", views)) is not None:
        case.code, case.problem = "out_of_bounds_read", stray
        return
    if _close(out, trial.expected, trial.atol):
        found = who_did_the_work(
            trace, views, after_last_launch, course_too=allow_course_kernels, gather=gather
        )
        if found is None and trial.extra:
            found = trial.extra(out, *trial.inputs)
        if found is None and (said := shared_work(trace, list(views)[:-1], trial.work)):
            found = "goal_missed", said
        if found:
            case.code, case.problem = found
            if case.code in ("no_triton_kernel", "course_kernel", "host_copy", "goal_missed"):
                case.cause = case.problem  # what happened, in this case's words
        else:
            case.passed = True
        return
    for wrong in trial.wrong_answers:
        if wrong.code == "out_of_bounds_write":  # named only when stores strayed
            continue
        if wrong.value.shape == out.shape and _close(out, wrong.value, trial.atol):
            _matched(case, wrong, trace)
            return
    stored = trace.cells("store", output) if trace is not None else None
    if stored is not None:  # judged from the lanes stored, not from values
        holes = int((~stored).sum())
    elif trial.initial is None:
        holes = int(_unwritten(out).sum())
    else:  # cells left as they were although they should have changed
        stale = (out == trial.initial) & ~_isclose(trial.initial, trial.expected, trial.atol)
        holes = int(stale.sum())
    if holes:
        case.code = "unwritten"
        case.problem = f"{holes} of {out.numel()} cells never written"
        return
    if stored is not None and trial.initial is None and bool(_unwritten(out).any()):
        written_nan = int(_unwritten(out).sum())
        case.problem = f"{written_nan} of {out.numel()} cells were stored as NaN"
        return
    bad = int((~_isclose(out, trial.expected, trial.atol)).sum())
    case.problem = f"{bad} of {out.numel()} cells wrong"


def _matched(case: Case, wrong: WrongAnswer, trace: Trace | None) -> None:
    case.code, case.cause, case.problem = wrong.code, wrong.cause, wrong.cause
    case.explains, case.ambiguous = wrong.explains, wrong.ambiguous
    if wrong.refine is not None and trace is not None:
        precise = wrong.refine(trace)
        if precise:
            case.cause = case.problem = precise
            case.ambiguous = False


def _name_stray_cause(trial: Trial, case: Case) -> None:
    """Stores strayed: a known mistake whose in-bounds cells match names their cause."""
    out = trial.guard.out
    for wrong in trial.wrong_answers:
        if wrong.code != "out_of_bounds_write" or wrong.value.shape != out.shape:
            continue
        inside = ~torch.isnan(wrong.value)
        if bool(inside.any()) and _close(out[inside], wrong.value[inside], 0.0):
            case.cause = wrong.cause
            return


def _stray(trace: Trace | None, kind: str, views: Mapping[str, torch.Tensor]) -> str | None:
    """Where lanes of ``kind`` ("load" or "store") fell outside a view, or None."""
    outside = trace.outside(kind) if trace is not None else {}
    if not outside:
        return None
    name, lanes = next(iter(outside.items()))
    first = where(trace.first_stray(kind, name), tuple(views[name].shape))
    verb = "stored" if kind == "store" else "loaded"
    return f"{verb} {lanes} lane(s) outside {name}, first at {first}; not performed"


def _verdict(exercise: str, cases: list[Case], messages: Mapping[str, str]) -> CheckResult:
    result = CheckResult(exercise, passed=all(c.passed for c in cases), cases=cases)
    if result.passed:
        return result
    if all(c.code in ("not_implemented", "skipped") for c in cases):
        codes = ["not_implemented"]
    else:
        failed = [c for c in cases if not c.passed and c.code != "skipped"]
        found = {c.code for c in failed} | set(_where_wrong(failed, cases))
        for c in failed:  # a cause that explains another finding
            found -= set(c.explains)
        codes = [code for code in PRIORITY if code in found]
        codes = _cause_first(codes)
        codes = _consequences_last(codes, failed)
    result.diagnoses = [Diagnosis(code, _message(code, cases, messages)) for code in codes]
    return result


def _consequences_last(codes: list[str], failed: list[Case]) -> list[str]:
    """A GPU's refusal of a kernel for one dtype only (float16 results from float32 inputs,
    say), found beside a known mistake, follows from that mistake: name the mistake first."""
    refusals = [c for c in failed if c.code == "gpu_would_reject"]
    known = {"transposed", "precision", "reads_c_when_beta_zero"}
    if refusals and all(c.secondary for c in refusals) and known & set(codes):
        codes = [c for c in codes if c != "gpu_would_reject"] + ["gpu_would_reject"]
    return codes


def _cause_first(codes: list[str]) -> list[str]:
    """Where the failures cluster names their cause better than what they did: strided
    tensors explain strays of either kind, ragged edges explain stray reads (a stray write on
    a ragged edge is named as such: an unmasked store)."""
    place = next((c for c in ("ignores_strides", "ragged_edge") if c in codes), None)
    strays = ("out_of_bounds_write", "out_of_bounds_read")
    if place == "ragged_edge":
        strays = ("out_of_bounds_read",)
    first = next((c for c in codes if c in strays), None)
    if place is None or first is None or codes.index(place) < codes.index(first):
        return codes
    codes = [c for c in codes if c != place]
    codes.insert(codes.index(first), place)
    return codes


def _message(code: str, cases: list[Case], messages: Mapping[str, str]) -> str:
    """A case's precise cause, else the exercise's sentence, else the generic one."""
    causes = sorted((c for c in cases if c.code == code and c.cause), key=lambda c: c.ambiguous)
    cause = causes[0].cause if causes else ""
    if cause:
        return cause
    if (mixup := messages.get(f"{code} when M != N")) and _only_when_not_square(cases):
        return mixup
    if code == "ragged_edge":
        return _axes_message(cases, messages)
    if code == "ignores_strides":
        return _strides_message(cases, messages)
    return cause or messages.get(code) or MESSAGES[code]


LOCATED = (None, "unwritten", "out_of_bounds_read", "out_of_bounds_write")


def _located(cases: list[Case]) -> list[Case]:
    """Failed cases whose place (ragged axes, strided tensors) may explain them."""
    return [c for c in cases if not c.passed and c.code in LOCATED]


def _where_wrong(failed: list[Case], cases: list[Case]) -> list[str]:
    """Where plain wrong values cluster: only on ragged axes, only on strided tensors, or not
    at all. Cases with a cause of their own say nothing about place."""
    located = _located(failed)
    passed = [c for c in cases if c.passed]
    if not located:
        return []
    if all(c.ragged for c in located) and any(not c.ragged for c in passed):
        return ["ragged_edge"]
    if all(c.strided for c in located) and any(not c.strided for c in passed):
        return ["ignores_strides"]
    if any(c.code is None for c in located):
        return ["wrong_values"]
    return []


def _only_when_not_square(cases: list[Case]) -> bool:
    """Every failure has M != N, and some M == N case passed: the two sizes were mixed up."""
    failed = [c for c in cases if not c.passed and c.code != "skipped"]
    square = [c.shape[0] == c.shape[1] for c in failed]
    return (
        bool(failed)
        and not any(square)
        and any(c.passed and c.shape[0] == c.shape[1] for c in cases)
    )


def _strayed(cases: list[Case]) -> str:
    reads = [c for c in _located(cases) if c.code == "out_of_bounds_read"]
    if not reads:
        return ""
    return " (Those cases also loaded lanes outside the inputs, which the check did not perform.)"


def _common(sets: list[tuple[str, ...]]) -> list[str]:
    common = set(sets[0]).intersection(*sets[1:]) if sets else set()
    union = set().union(*sets) if sets else set()
    return sorted(common or union)


def _axes_message(cases: list[Case], messages: Mapping[str, str]) -> str:
    axes = _common([c.ragged for c in _located(cases)])
    which = " or ".join(axes)
    fix = messages.get(f"ragged_edge {'/'.join(axes)}") or messages.get("ragged_edge", "")
    return f"Right when every size is a multiple of the block, wrong when {which} is not: " + (
        fix or MESSAGES["ragged_edge"]
    )


def _strides_message(cases: list[Case], messages: Mapping[str, str]) -> str:
    tensors = _common([c.strided for c in _located(cases)])
    which = " or ".join(tensors)
    fix = messages.get("ignores_strides") or (
        "compute every address from the tensor's .stride(0) and .stride(1), not its shape."
    )
    return f"Right for contiguous tensors, wrong when {which} is not contiguous: {fix}" + _strayed(
        cases
    )
