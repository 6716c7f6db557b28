"""The engine behind tmm_course.check: run a learner's launcher on fresh random cases, with the
output poisoned (NaN or -1) and surrounded by canary memory, and turn what happened into a
verdict and diagnoses. A launcher fills an output the check allocates, so the check owns the
poison and the canaries. Nothing here raises into the notebook.
"""

from __future__ import annotations

import contextlib
import html
import math
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

import tmm_course
from tmm_course.backend import INTERPRETER
from tmm_course.check.memory_guard import OutOfBoundsAccess, only_these_tensors

CANARY = 12345.0  # written around every output; a store that lands outside changes it

MESSAGES = {
    "not_implemented": "The exercise is not done yet: the launcher still raises "
    "NotImplementedError. Fill in the kernel and its launch, then run the check again.",
    "crashed": "The launcher raised an error (shown in the case list); read its last line first.",
    "wrong_values": "Some cells hold wrong values, on aligned and ragged shapes alike: re-check "
    "the formula each lane computes and which index goes with which axis.",
    "transposed": "The result is the transpose of the right answer: rows and columns are swapped, "
    "so an index or a stride is paired with the wrong axis. Pair offs_m with the row stride "
    "(stride 0) and offs_n with the column stride (stride 1).",
    "unwritten": "Some cells were never stored (they still hold the poison the check wrote): "
    "the grid may be too small, or the store mask too strict.",
    "out_of_bounds_write": "The kernel wrote outside the output (the canary memory around it "
    "changed): a lane past the edge was not masked, or an offset is wrong.",
    "out_of_bounds_read": "The kernel loaded from memory outside its inputs (the check stopped "
    "it before it could crash): a load mask is missing, or an offset or stride is wrong.",
    "ragged_edge": "Right when the sizes are multiples of the block, wrong otherwise: edge "
    "tiles need masks on every axis, (offs_m[:, None] < M) & (offs_n[None, :] < N) on stores, "
    "and for a matmul the K lanes of both loads masked too, with other=0.0.",
    "precision": "The values are close but the error grows with K, the signature of a float16 "
    "accumulator: keep acc in float32 (tl.zeros(..., dtype=tl.float32)) and cast only when "
    "storing.",
    "ignores_strides": "Right for contiguous tensors, wrong for transposed or sliced views: "
    "compute addresses from x.stride(0) and x.stride(1), not from the shape.",
}


RESULT_MIMETYPE = "application/vnd.tmm-course.check+json"

# codes a single case can earn by itself, in the order they are reported
CASE_CODES = (
    "crashed",
    "out_of_bounds_read",
    "out_of_bounds_write",
    "unwritten",
    "transposed",
    "precision",
)


@dataclass(frozen=True)
class Diagnosis:
    """One finding: a stable code and a sentence a learner understands."""

    code: str
    message: str


@dataclass
class Case:
    """One run of the launcher and what the check saw."""

    label: str
    shape: tuple[int, ...]
    ragged: bool = False
    strided: bool = False
    passed: bool = False
    problem: str = ""
    code: str | None = None  # the diagnosis this case alone points to


@dataclass
class CheckResult:
    """The verdict of a check, the cases it tried and its diagnoses."""

    exercise: str
    passed: bool
    cases: list[Case]
    diagnoses: list[Diagnosis] = field(default_factory=list)

    @property
    def codes(self) -> list[str]:
        return [d.code for d in self.diagnoses]

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        lines = [
            f"{self.exercise}: {verdict} ({sum(c.passed for c in self.cases)}/"
            f"{len(self.cases)} cases)"
        ]
        lines += [f"  [{d.code}] {d.message}" for d in self.diagnoses]
        for case in self.cases:
            mark = "ok  " if case.passed else "FAIL"
            lines.append(f"  {mark} {case.label}" + (f": {case.problem}" if case.problem else ""))
        return "\n".join(lines)

    __repr__ = __str__

    def as_dict(self) -> dict:
        """The result as plain data (what the batch grader reads from a notebook's outputs)."""
        return {
            "exercise": self.exercise,
            "passed": self.passed,
            "codes": self.codes,
            "cases": [
                {"label": c.label, "passed": c.passed, "problem": c.problem} for c in self.cases
            ],
        }

    @classmethod
    def from_dict(cls, data: dict) -> CheckResult:
        """The inverse of :meth:`as_dict` (diagnosis messages are looked up by code)."""
        cases = [
            Case(c["label"], (), passed=c["passed"], problem=c["problem"]) for c in data["cases"]
        ]
        diagnoses = [Diagnosis(code, MESSAGES.get(code, "")) for code in data["codes"]]
        return cls(data["exercise"], data["passed"], cases, diagnoses)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {
            "text/plain": str(self),
            "text/html": self._repr_html_(),
            RESULT_MIMETYPE: self.as_dict(),
        }

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        verdict = "PASS" if self.passed else "FAIL"
        rows = "".join(
            f"<tr><td>{'✔' if c.passed else '✘'}</td><td>{html.escape(c.label)}</td>"
            f"<td>{html.escape(c.problem)}</td></tr>"
            for c in self.cases
        )
        found = "".join(
            f"<li><code>{d.code}</code>: {html.escape(d.message)}</li>" for d in self.diagnoses
        )
        return (
            f"<div><b style='color:{colour}'>{verdict}</b> {html.escape(self.exercise)}"
            f"<ul>{found}</ul><table>{rows}</table></div>"
        )


@dataclass
class Guarded:
    """An output view inside a larger buffer of canary values (rows may be padded)."""

    buffer: torch.Tensor
    out: torch.Tensor
    region: torch.Tensor  # True where the buffer belongs to ``out``

    def canaries_intact(self) -> bool:
        outside = self.buffer[~self.region]
        return bool((outside == CANARY).all())


def _margin(pitch: int) -> int:
    """Canary room on each side: enough for blocks of up to 128 rows and columns to overshoot
    without touching memory that is not ours (the interpreter would crash on that)."""
    return 128 * (pitch + 1)


def guarded_output(shape: tuple[int, int], dtype: torch.dtype, row_gap: int = 0) -> Guarded:
    """An ``shape`` output poisoned with NaN (or -1), canaries before, after and between rows.

    ``row_gap > 0`` makes the output non-contiguous: its row stride is ``N + row_gap``.
    """
    m, n = shape
    pitch = n + row_gap
    margin = _margin(pitch)
    size = margin + m * pitch + margin
    device = tmm_course.DEVICE
    buffer = torch.full((size,), CANARY, dtype=dtype, device=device)
    out = buffer[margin : margin + m * pitch].view(m, pitch)[:, :n]
    region = torch.zeros(size, dtype=torch.bool, device=device)
    region[margin : margin + m * pitch].view(m, pitch)[:, :n] = True
    out.fill_(math.nan if dtype.is_floating_point else -1)
    return Guarded(buffer, out, region)


def padded_input(x: torch.Tensor) -> torch.Tensor:
    """``x`` with the same values, shape and strides, in a storage with random room around it,
    so that a load past its edge reads junk instead of crashing."""
    span = 1 + sum(
        (size - 1) * abs(stride) for size, stride in zip(x.shape, x.stride(), strict=True)
    )
    margin = _margin(max(x.stride(), default=1))
    buffer = torch.randn(margin + span + margin, device=x.device).to(x.dtype)
    view = buffer.as_strided(x.shape, x.stride(), margin)
    view.copy_(x)
    return view


GPU_CONTEXT_LOST = (
    "CUDA: illegal memory access. The kernel touched memory outside its tensors, and the GPU "
    "cannot be used again in this Python session: restart the kernel. To see which load or "
    "store strayed, run the check on the interpreter (TMM_BACKEND=interpreter), which stops "
    "the access and names it."
)


def _gpu_context_lost(error: BaseException) -> bool:
    return "illegal memory access" in str(error) or "illegal address" in str(error).lower()


def _memory_guard(tensors: list[torch.Tensor]):
    """Bounds-check every load and store on the interpreter (a wild pointer there would crash
    the notebook); on a GPU the canaries and poison do the catching."""
    if tmm_course.BACKEND == INTERPRETER:
        return only_these_tensors(tensors)
    return contextlib.nullcontext()


def _out_of_bounds(error: BaseException) -> OutOfBoundsAccess | None:
    while error is not None:
        if isinstance(error, OutOfBoundsAccess):
            return error
        error = error.__cause__ or error.__context__
    return None


def _unwritten(out: torch.Tensor) -> torch.Tensor:
    return out.isnan() if out.is_floating_point() else out == -1


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[-1] if text else ''}"


@dataclass
class Trial:
    """A case ready to run: the launcher's inputs, the guarded output and the right answer."""

    case: Case
    inputs: Sequence[torch.Tensor | float]  # tensors get random room around them
    guard: Guarded
    expected: torch.Tensor
    # known mistakes: (code, what that mistake would have stored)
    wrong_answers: list[tuple[str, torch.Tensor]] = field(default_factory=list)
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


def run_trials(exercise: str, fn: Callable, trials: Sequence[Trial]) -> CheckResult:
    """Run ``fn`` on every trial and turn what happened into a verdict and diagnoses."""
    cases = [t.case for t in trials]
    for index, trial in enumerate(trials):
        case = trial.case
        if trial.only_if_all_passed and not all(c.passed for c in cases[:index]):
            case.code, case.problem = "skipped", "not run: fix the other cases first"
            continue
        inputs = [padded_input(x) if isinstance(x, torch.Tensor) else x for x in trial.inputs]
        if trial.initial is not None:
            trial.guard.out.copy_(trial.initial)
        try:
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            with _memory_guard([*tensors, trial.guard.buffer]):
                fn(*inputs, trial.guard.out)
            if tmm_course.DEVICE.type == "cuda":
                torch.cuda.synchronize()
        except NotImplementedError:
            case.code, case.problem = "not_implemented", "NotImplementedError"
            continue
        except Exception as error:  # a learner's bug must not crash the notebook
            stray = _out_of_bounds(error)
            if stray is not None:
                case.code = f"out_of_bounds_{'read' if stray.kind == 'load' else 'write'}"
                case.problem = str(stray)
                continue
            case.code, case.problem = "crashed", _first_line(error)
            if _gpu_context_lost(error):
                case.problem = GPU_CONTEXT_LOST
                for later in cases[index + 1 :]:
                    later.code, later.problem = "crashed", "not run: the GPU context was lost"
                break
            case.problem += "  (" + traceback.extract_tb(error.__traceback__)[-1].name + ")"
            continue
        _judge(trial)
    return _verdict(exercise, cases)


def _judge(trial: Trial) -> None:
    case, out = trial.case, trial.guard.out
    if not trial.guard.canaries_intact():
        case.code, case.problem = "out_of_bounds_write", "memory around the output changed"
        return
    if trial.initial is None:
        holes = int(_unwritten(out).sum())
    else:  # cells left as they were although they should have changed
        stale = (out == trial.initial) & ~_isclose(trial.initial, trial.expected, trial.atol)
        holes = int(stale.sum())
    if holes:
        case.code = "unwritten"
        case.problem = f"{holes} of {out.numel()} cells never written"
        return
    if _close(out, trial.expected, trial.atol):
        found = trial.extra(out, *trial.inputs) if trial.extra else None
        if found:
            case.code, case.problem = found
        else:
            case.passed = True
        return
    for code, answer in trial.wrong_answers:
        if answer.shape == out.shape and _close(out, answer, trial.atol):
            case.code, case.problem = code, "matches a known mistake"
            return
    bad = int((~_isclose(out, trial.expected, trial.atol)).sum())
    case.problem = f"{bad} of {out.numel()} cells wrong"


def _isclose(a: torch.Tensor, b: torch.Tensor, atol: float | torch.Tensor) -> torch.Tensor:
    return (a.double() - b.double()).abs() <= atol  # NaN compares False


def _close(a: torch.Tensor, b: torch.Tensor, atol: float | torch.Tensor) -> bool:
    return bool(_isclose(a, b, atol).all())


def _verdict(exercise: str, cases: list[Case]) -> CheckResult:
    result = CheckResult(exercise, passed=all(c.passed for c in cases), cases=cases)
    if result.passed:
        return result
    if all(c.code in ("not_implemented", "skipped") for c in cases):
        codes = ["not_implemented"]
    else:
        failed = [c for c in cases if not c.passed and c.code != "skipped"]
        codes = [code for code in CASE_CODES if any(c.code == code for c in failed)]
        codes += _where_wrong(failed, [c for c in cases if c.passed])
    result.diagnoses = [Diagnosis(code, MESSAGES[code]) for code in codes]
    return result


def _where_wrong(failed: list[Case], passed: list[Case]) -> list[str]:
    """Where the wrong cases cluster: only at ragged edges, only on strided views, or not at
    all (plain wrong values). Crashes and precision faults say nothing about place."""
    located = [c for c in failed if c.code not in ("crashed", "precision", "not_implemented")]
    if not located:
        return []
    if all(c.ragged for c in located) and any(not c.ragged for c in passed):
        return ["ragged_edge"]
    if all(c.strided for c in located) and any(not c.strided for c in passed):
        return ["ignores_strides"]
    if any(c.code is None for c in located):
        return ["wrong_values"]
    return []
