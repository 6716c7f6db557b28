"""The judge's side of grading: the exercise's cases, the launch records, and the verdict.

The judge never runs student Python. For each exercise it draws the exercise's cases
(:mod:`tmm_course.exercises`: the one spec the learner's check runs too) from a secret seed, and
for each case:

1. has the recording worker call the learner's function on the same case drawn again with other
   values (:meth:`~tmm_course.exercises.spec.Case.again`), only to record which kernels it
   launches (:mod:`tmm_course.check.record`); what that call computed never comes back;
2. reads the record as untrusted data (:func:`record_problem`: the kernels must be Triton,
   :mod:`.triton_only`; a kernel of the course's is ``course_kernel``, by its source);
3. has a replay worker, a process that ran no cell, launch those kernels on the secret case:
   inputs between NaN margins, the output poisoned with NaN inside canary values, every buffer
   the launcher made refilled with poison (a constant fill kept);
4. judges the storages that come back: the inputs unchanged, the canaries intact, the output
   against the float64 reference with the exercise's tolerance, a known mistake named by its
   sentence.

The diagnoses are the check's (:mod:`tmm_course.check.result`), ranked as the check ranks them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace

import torch

from tmm_course.check.buffers import CANARY
from tmm_course.check.result import Case as Result
from tmm_course.exercises.spec import Case, Exercise, Goal
from tmm_course.teach import triton_only

RECORD_BYTES = 4 * 2**20  # the most a launch record may be
# every input sits between NaN margins this many times its longest side long: a lane that
# reads past the view (a mask missing or wrong) reads NaN, which no product or copy hides
INPUT_MARGIN = 64


@dataclass
class Buffer:
    """A tensor as the judge sends it: a 1-D storage and the view the function receives."""

    storage: torch.Tensor
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0

    def view(self, storage: torch.Tensor | None = None) -> torch.Tensor:
        base = self.storage if storage is None else storage
        return torch.as_strided(base, self.size, self.stride, self.offset)

    def covered(self) -> torch.Tensor:
        """Which storage elements the view reaches."""
        mask = torch.zeros(self.storage.numel(), dtype=torch.bool)
        index = torch.arange(self.storage.numel())
        mask[torch.as_strided(index, self.size, self.stride, self.offset).reshape(-1)] = True
        return mask


def framed(t: torch.Tensor) -> Buffer:
    """``t`` (same values, shape and strides) in a storage of NaN: NaN margins before and after
    (:data:`INPUT_MARGIN`), NaN in the gaps of a strided view."""
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True) if s)
    margin = INPUT_MARGIN * max(t.shape, default=1)
    storage = torch.full((margin + span + margin,), float("nan"), dtype=t.dtype)
    buffer = Buffer(storage, tuple(t.shape), tuple(t.stride()), margin)
    buffer.view().copy_(t)
    return buffer


def output_buffer(case: Case, nan: bool = True, gen: torch.Generator | None = None) -> Buffer:
    """The case's output inside canary values (before, after and between rows when the case
    pads them), holding poison (NaN, or with ``nan`` False random numbers, so that no kernel can
    tell the judge's output by its NaN) or, for an update such as C = alpha*A@B + beta*C, C."""
    shape, gap = case.output.shape, case.output.row_gap
    rows, cols = (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0])
    pitch = cols + gap
    margin = 128 * (pitch + 1)  # blocks up to 128 rows and columns overshoot into canaries
    storage = torch.full((margin + rows * pitch + margin,), CANARY, dtype=case.output.dtype)
    stride = (pitch, 1) if len(shape) == 2 else (1,)
    buffer = Buffer(storage, tuple(shape), stride, margin)
    if case.initial is not None:
        buffer.view().copy_(case.initial)
    elif not case.output.dtype.is_floating_point:
        buffer.view().fill_(-1)
    elif nan:
        buffer.view().fill_(float("nan"))
    else:
        buffer.view().copy_(torch.randn(tuple(shape), generator=gen).to(case.output.dtype))
    return buffer


@dataclass
class Trial:
    """One case as the judge sends it: the tensors' buffers (inputs, then the output) and the
    function's arguments."""

    exercise: Exercise
    case: Case
    buffers: list[Buffer]
    poison: torch.Tensor | None = None  # what the output held before the launches

    @classmethod
    def of(cls, exercise: Exercise, case: Case, nan: bool = True, gen=None) -> Trial:
        out = output_buffer(case, nan, gen)
        poison = out.view().clone() if case.initial is None else None
        return cls(exercise, case, [framed(t) for t in case.tensors] + [out], poison)

    def request(self, op: str, extra_blobs: Sequence[bytes] = (),
                values: bool = True) -> tuple[dict, list[bytes]]:  # fmt: skip
        """The frame that hands this case to a worker: every tensor's storage (after
        ``extra_blobs``; with ``values`` False its size alone, for a call whose launches never
        run), the scalars, and the order the function takes them in."""
        args: list[dict] = []
        tensors = iter(range(len(self.buffers)))
        for value in [*self.case.inputs, None]:
            if isinstance(value, torch.Tensor) or value is None:
                index = next(tensors)
                args.append(spec(self.buffers[index], len(extra_blobs) + index))
                if not values:
                    args[-1]["numel"] = self.buffers[index].storage.numel()
            else:
                args.append({"kind": "scalar", "value": value})
        order = self.exercise.arguments(list(range(len(args) - 1)), len(args) - 1)
        blobs = [*extra_blobs, *(b.storage.numpy().tobytes() if values else b""
                                 for b in self.buffers)]  # fmt: skip
        header = {"op": op, "exercise": self.exercise.name, "name": self.exercise.function,
                  "args": args, "order": order, "tensors": list(self.exercise.tensors)}  # fmt: skip
        return header, blobs

    def sizes(self) -> list[int]:
        return [b.storage.numel() * b.storage.element_size() for b in self.buffers]


def spec(buffer: Buffer, blob: int) -> dict:
    return {
        "kind": "tensor",
        "dtype": str(buffer.storage.dtype).removeprefix("torch."),
        "size": list(buffer.size),
        "stride": list(buffer.stride),
        "offset": buffer.offset,
        "blob": blob,
    }


def read_record(data: bytes) -> dict | tuple[str, str]:
    """The launch record the recording worker sent, or (code, why) when it is not one:
    ``gpu_would_reject`` for a kernel that is not Triton, ``crashed`` for anything else."""
    try:
        record = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        return ("crashed", f"the launch record is not JSON: {error}"[:300])
    problem = triton_only.record_problem(record)
    if problem is None:
        return record
    code = "gpu_would_reject" if problem.startswith("the kernel ") else "crashed"
    return (code, problem)


def result(case: Case, **found) -> Result:
    return Result(case.label, case.shape, case.ragged, case.strided, **found)


def judge_record(trial: Trial, record: dict) -> Result | None:
    """A verdict from the record alone (no kernel, a course kernel), or None when the
    record's kernels are to be replayed."""
    case = trial.case
    if not record["launches"]:
        return result(case, code="no_triton_kernel", problem="no kernel[grid](...) launch was seen")
    output = trial.exercise.tensors[-1]
    if not any(_hands(value, output) for x in record["launches"]
               for value in [*x["args"], *x["kwargs"].values()]):  # fmt: skip
        problem = (
            f"no kernel was handed {output}: it was filled some other way (torch, say), or not "
            f"at all. The kernel must store the answer into {output} itself."
        )
        return result(case, code="no_triton_kernel", problem=problem, cause=problem)
    # lesson 9 starts from a course kernel's source: there a copy of one is judged a repair
    course = course_kernels(
        record, by_source=trial.exercise.fix_of is None, own=trial.exercise.solution_kernels
    )
    if course:
        return result(case, code="course_kernel", problem=course, cause=course)
    copied = host_copy(trial, record) if trial.exercise.gather else None
    if copied:
        return result(case, code="host_copy", problem=copied, cause=copied)
    return None


def _hands(value: object, name: str) -> bool:
    """Whether a recorded argument is the case tensor ``name`` (or a view of it, or a
    descriptor over one)."""
    if not isinstance(value, dict):
        return False
    if isinstance(value.get("tensor"), dict):
        return value["tensor"].get("case") == name
    if isinstance(value.get("descriptor"), dict):
        return _hands(value["descriptor"].get("base"), name)
    return False


def host_copy(trial: Trial, record: Mapping) -> str | None:
    """Where the exercise is to read inputs through their strides: a copy of an input the
    launcher made on the host (transposed, or of a strided view) that a kernel then read."""
    names = dict(zip(trial.exercise.tensors, trial.case.tensors, strict=False))
    for buffer in record["buffers"]:
        fill = buffer.get("fill") or {}
        name = fill.get("of")
        if fill.get("kind") != "copy" or name not in names:
            continue
        if fill.get("transposed") or not names[name].is_contiguous():
            how = f"{name}.t().contiguous()" if fill.get("transposed") else f"{name}.contiguous()"
            return (
                f"the launcher made a copy of {name} on the host ({how} or the like) for a "
                f"kernel to read: the exercise is to read {name} where it lies, through "
                f"{name}.stride(0) and {name}.stride(1). Pass {name} itself and its strides."
            )
    return None


def judge_replay(trial: Trial, reply: dict, returned: list[bytes] | None) -> Result:
    """The verdict on one case from the replay worker's answer: the storages it sent back (the
    values judged) and what the memory guard saw (strays, which only fail a case)."""
    case = trial.case
    if not reply.get("ok"):
        kind = reply.get("error_type", "error")
        text = f"{reply.get('error', '')}"[:300]
        if kind in ("gpu_would_reject", "timed_out"):
            return result(case, code=kind, problem=text, cause=text)
        return result(case, code="crashed", problem=f"{kind}: {text}")
    assert returned is not None
    stored = [
        torch.frombuffer(bytearray(data), dtype=b.storage.dtype)
        for b, data in zip(trial.buffers, returned, strict=True)
    ]
    *inputs, out = trial.buffers
    for buffer, storage in zip(inputs, stored, strict=False):
        if not _same(storage, buffer.storage):
            return result(case, code="modified_input", problem="an input was changed")
    stray = reply.get("stray")
    outside = reply.get("outside") or {}
    if (stray and stray.get("kind") == "store") or outside.get("store"):
        where = stray.get("text") if stray else f"stored lanes outside {_names(outside['store'])}"
        return result(case, code="out_of_bounds_write", problem=str(where)[:300])
    region = out.covered()
    if not _same(stored[-1][~region], out.storage[~region]):
        return result(case, code="out_of_bounds_write", problem="memory around the output changed")
    got = out.view(stored[-1]).double()
    if case.output_must_not_be_read and (reply.get("output_loaded") or bool(got.isnan().all())):
        return result(
            case, code="reads_c_when_beta_zero", problem="C was loaded although beta == 0"
        )
    if stray or outside.get("load"):
        where = stray.get("text") if stray else f"loaded lanes outside {_names(outside['load'])}"
        return result(case, code="out_of_bounds_read", problem=str(where)[:300])
    found = _values(case, got, trial.poison, int(reply.get("unstored", -1)))
    requires = trial.exercise.requires
    if found.passed and requires is not None and not reply.get("shows"):
        return result(case, code=requires.code, problem=requires.fix, cause=requires.fix)
    if found.passed and (unshared := reply.get("unshared")):  # the exercise's work, unshared
        return result(case, code="goal_missed", problem=str(unshared), cause=str(unshared))
    return found


def _names(counts: object) -> str:
    return ", ".join(str(k) for k in counts) if isinstance(counts, dict) else "a tensor"


def _values(case: Case, got: torch.Tensor, poison: torch.Tensor | None, unstored: int) -> Result:
    expected = case.expected
    close = (got - expected).abs() <= case.atol  # NaN compares False
    if bool(close.all()):
        found = case.probe(got, *case.inputs) if case.probe is not None else None
        if found:
            return result(case, code=found[0], problem=found[1])
        return result(case, passed=True)
    for mistake in case.mistakes:
        if mistake.code == "out_of_bounds_write" or mistake.value.shape != got.shape:
            continue
        if bool(((got - mistake.value).abs() <= case.atol).all()):
            return result(case, code=mistake.code, problem=mistake.cause, cause=mistake.cause,
                          explains=mistake.explains, ambiguous=mistake.ambiguous)  # fmt: skip
    before = case.initial if poison is None else poison  # cells still holding it: unwritten
    if unstored >= 0 and case.initial is None:
        holes = unstored  # the memory guard saw which cells were stored
    else:
        before = before.double()
        same = (got == before) | (got.isnan() & before.isnan())
        holes = int((same & ~((before - expected).abs() <= case.atol)).sum())
    if holes:
        return result(
            case, code="unwritten", problem=f"{holes} of {got.numel()} cells never written"
        )
    bad = ~close
    where = tuple(bad.nonzero()[0].tolist())
    return result(
        case,
        problem=f"{int(bad.sum())} of {got.numel()} cells wrong, e.g. at {where}: "
        f"{float(got[where]):.4g} instead of {float(expected[where]):.4g}",
    )


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return bool(torch.equal(a.view(bits[a.element_size()]), b.view(bits[b.element_size()])))


def verdict(
    exercise: Exercise,
    cases: list[Result],
    record: Mapping | None = None,
    goals: list[Goal] | None = None,
) -> tuple[str, list[str], str]:
    """(verdict, codes, detail) of one exercise from its cases, ranked as the check ranks them
    (the first code is the primary diagnosis); lesson 9's, once every case passed, from the
    kernel the last ``record`` launched; with ``goals`` (an exercise's
    :class:`~tmm_course.exercises.spec.AtScale`), those too, as the check adds them."""
    found = _verdict(exercise, cases, record)
    if goals is None:
        return found
    from tmm_course.check.result import from_goals

    checked = from_goals(exercise.name, goals)
    state, codes, detail = found
    detail += f"; {sum(g.met for g in goals)}/{len(goals)} goals met at scale"
    if checked.passed:
        return state, codes, detail
    if state == "pass":
        return "fail", checked.codes, f"{detail}; {checked.primary.message}"[:500]
    return state, list(dict.fromkeys([*codes, *checked.codes])), detail[:500]


def _verdict(
    exercise: Exercise, cases: list[Result], record: Mapping | None
) -> tuple[str, list[str], str]:
    from tmm_course.check import engine

    if cases and all(c.passed for c in cases) and record is not None:
        not_the_fix = fix_problem(exercise, record)
        if not_the_fix:
            return (
                "fail",
                ["not_the_fix"],
                f"{len(cases)}/{len(cases)} cases passed, but {not_the_fix}",
            )
    if cases and cases[0].code == "not_implemented":
        return "not_implemented", ["not_implemented"], "the function raised NotImplementedError"
    # as the check: a refusal of one case's dtypes, where the others compiled, is secondary
    compiled = any(c.passed or c.code not in ("gpu_would_reject", "skipped", "crashed")
                   for c in cases)  # fmt: skip
    for c in cases:
        c.secondary = c.secondary or (c.code == "gpu_would_reject" and compiled)
    checked = engine._verdict(exercise.name, cases, exercise.messages)
    passed = sum(c.passed for c in cases)
    detail = f"{passed}/{len(cases)} cases passed"
    if checked.passed:
        return "pass", [], detail
    first = next((c for c in cases if not c.passed and c.code != "skipped"), None)
    if checked.primary is not None:
        detail += f"; {checked.primary.message}"
    if first is not None and first.problem:
        detail += f" First failure: {first.label}: {first.problem}"
    return "fail", checked.codes, detail


@cache
def _course_kernels() -> dict[str, str]:
    """Every ``@triton.jit`` function the course ships, by its normalised source."""
    import importlib
    import pkgutil

    import tmm_course.capstone
    import tmm_course.kernels

    found: dict[str, str] = {}
    for package in (tmm_course.kernels, tmm_course.capstone):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, value in vars(module).items():
                fn = getattr(value, "fn", None)
                if type(value).__name__ in ("JITFunction", "InterpretedFunction") and fn:
                    key = _normalised(getattr(value, "src", None) or _source(fn))
                    if key:
                        found.setdefault(key, f"{module.__name__}.{name}")
    return found


def _source(fn) -> str:
    import inspect

    from tmm_course.source import source_of

    try:
        return source_of(fn)
    except (OSError, TypeError):
        return inspect.getsource(fn)


def _normalised(source: str) -> str | None:
    """A kernel's source with its name, decorators, comments, layout and the names it binds
    left out (:func:`tmm_course.check.record.abstracted`)."""
    from tmm_course.check.record import abstracted

    return abstracted(source)


def course_kernels(record: Mapping, by_source: bool = True, own: Sequence[str] = ()) -> str | None:
    """A sentence naming the course's kernels among the record's (launched or called inside a
    launched one): those the record says ship with the course and, ``by_source``, any whose
    source is a course kernel's under another name; None if none."""
    index = _course_kernels() if by_source else {}
    found = []
    for entry in record["kernels"].values():
        course = index.get(_normalised(entry["source"]) or "")
        course = None if course in own else course  # the exercise's own solution, copied
        if course or entry.get("course"):
            found.append(f"{entry['name']} is the course's {course or entry['module']}")
    if not found:
        return None
    return "; ".join(sorted(set(found))) + ": the exercise is to write the kernel yourself"


def fix_problem(exercise: Exercise, record: Mapping) -> str | None:
    """Lesson 9: why the kernels the function really launched are not a repair of the broken
    one (None if they are): :func:`tmm_course.check.fixes.not_a_repair`."""
    if exercise.fix_of is None:
        return None
    from tmm_course.check import fixes
    from tmm_course.kernels import pitfalls

    broken = getattr(pitfalls, exercise.fix_of)
    entries = [
        record["kernels"][key] for key in dict.fromkeys(x["kernel"] for x in record["launches"])
    ]
    kernels = [
        (e["name"], SimpleNamespace(src=e["source"])) for e in entries if not e.get("course")
    ]
    found = fixes.not_a_repair(broken, kernels)
    return None if found is None else found[0]
