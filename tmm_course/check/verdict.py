"""The one judge: what a case's launches stored, as plain data, decides the case; the cases
decide the verdict, its ranked codes and one sentence per code.

The learner's check (:mod:`tmm_course.check.engine`), the batch grader's judge
(:mod:`tmm_course.teach.judge`) and, through the grader, nbgrader's locked cells each reduce a
case to a :class:`Stored` (the output as the replayed kernels left it, what it held before, and
what the memory guard saw) and call :func:`judge_stored`; the cases go to :func:`decide` (the
check) or :func:`grade` (the grader's row, lesson 9's repair and the goals at scale added).
The rules that read a launch record rather than values are here too, once: a course kernel did
the work (:func:`course_kernel`), a copy of an input made on the host (:func:`host_copy`), a
repair that is not one (:func:`not_the_fix`); and those that weigh more than one replay: a
buffer made with torch.empty that needed zeros (:func:`uninitialised`, from a replay with it
zeroed) and a grid whose programs mostly idle as the problem grows (:func:`too_many_programs`,
over the cases).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import SimpleNamespace

import torch

from tmm_course.check.result import MESSAGES, OWN_STRIDES, CheckResult, Diagnosis
from tmm_course.check.result import Case as Result
from tmm_course.exercises.spec import Case, Exercise, Goal, Mistake

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
    "too_many_programs",
    # a known mistake matched exactly: strays and crashes elsewhere follow from it
    "transposed",
    "precision",
    "reads_c_when_beta_zero",
    "crashed",
    "modified_input",
    "out_of_bounds_write",
    "out_of_bounds_read",
    "unwritten",
    "ragged_edge",
    "ignores_strides",
    "wrong_values",
)


def result(case: Case, **found) -> Result:
    """A case's outcome, labelled as the exercise's case is."""
    return Result(case.label, case.shape, case.ragged, case.strided, **found)


# --- one case, from what its kernels stored --------------------------------------------------
@dataclass
class Stored:
    """What one case's launches left, as plain data (whoever launched them)."""

    out: torch.Tensor  # the output view after the launches
    before: torch.Tensor | None  # what it held before them (the poison); None: case.initial
    inputs_changed: bool = False
    canaries_intact: bool = True
    stray_store: str | None = None  # where a store fell outside every view (memory guard)
    stray_load: str | None = None
    output_loaded: bool | None = None  # None: loads not traced
    unstored: int | None = None  # cells no lane stored into (None: stores not traced)
    # once the values are right: who did the work when not the learner's kernels (code,
    # sentence), how the launches shared it (the exercise's ``work``), whether the compiled
    # kernels show the exercise's requirement (None: not asked)
    elsewhere: tuple[str, str] | None = None
    unshared: str | None = None
    shows: bool | None = None
    # the memory guard's record where the judge holds it (the check, in-process): a known
    # mistake with two possible causes asks it which (Mistake.refine)
    trace: object | None = field(default=None, repr=False)


def judge_stored(exercise: Exercise, case: Case, stored: Stored) -> Result:
    """The outcome of one case of ``exercise`` from what its launches stored: strays and
    canaries first, then the values against the reference with the exercise's tolerance, a
    known mistake named by its sentence, cells never written counted; which inputs share
    the output's strides noted (:func:`_borrowed_strides` reads that across cases)."""
    found = _judged(exercise, case, stored)
    strides = tuple(stored.out.stride())
    pairs = zip(exercise.tensors, case.tensors, strict=False)
    found.alike = tuple(n for n, x in pairs if x.dim() > 1 and x.stride() == strides)
    return found


def _judged(exercise: Exercise, case: Case, stored: Stored) -> Result:
    if stored.inputs_changed:
        return result(case, code="modified_input", problem="an input was changed")
    got = stored.out.detach().cpu().double()
    if stored.stray_store or not stored.canaries_intact:
        problem = stored.stray_store or "memory around the output changed"
        known = _stray_mistake(case, got)
        cause, explains = (known.cause, known.explains) if known else ("", ())
        return result(case, code="out_of_bounds_write", problem=problem, cause=cause,
                      explains=explains, known=known is not None)  # fmt: skip
    if case.output_must_not_be_read:
        loaded = stored.output_loaded
        if loaded or (loaded is None and bool(got.isnan().all())):
            return result(case, code="reads_c_when_beta_zero",
                          problem="C was loaded although beta == 0")  # fmt: skip
    if stored.stray_load:
        return result(case, code="out_of_bounds_read", problem=stored.stray_load)
    expected = case.expected.double()
    close = ~wrong_cells(case, got)
    if bool(close.all()):
        return _right_values(exercise, case, got, stored)
    for mistake in case.mistakes:
        if mistake.code == "out_of_bounds_write" or mistake.value.shape != got.shape:
            continue
        if bool(_within(got, mistake.value, case.atol).all()):
            cause, ambiguous = mistake.cause, mistake.ambiguous
            precise = mistake.refine(stored.trace) if mistake.refine and stored.trace else None
            if precise:  # the trace tells which of two causes it was
                cause, ambiguous = precise, False
            return result(case, code=mistake.code, problem=cause, cause=cause,
                          explains=mistake.explains, ambiguous=ambiguous, known=True)  # fmt: skip
    before = case.initial if stored.before is None else stored.before
    if stored.unstored is not None and case.initial is None:
        holes = stored.unstored  # the memory guard saw which cells were stored
    else:  # cells still holding what was there, although they should have changed
        before = before.double()
        same = (got == before) | (got.isnan() & before.isnan())
        holes = int((same & ~_within(before, expected, case.atol)).sum())
        if stored.unstored is not None:  # a cell stored its old value again: by chance, written
            holes = min(holes, stored.unstored)
    if holes:
        return result(
            case, code="unwritten", problem=f"{holes} of {got.numel()} cells never written"
        )
    nan = int(got.isnan().sum())
    if nan and case.initial is None:
        return result(case, problem=f"{nan} of {got.numel()} cells were stored as NaN")
    bad = ~close
    where = tuple(bad.nonzero()[0].tolist())
    return result(
        case,
        problem=f"{int(bad.sum())} of {got.numel()} cells wrong, e.g. at {where}: "
        f"{float(got[where]):.4g} instead of {float(expected[where]):.4g}",
    )


def wrong_cells(case: Case, out: torch.Tensor) -> torch.Tensor:
    """Where ``out`` is not within the exercise's tolerance of the reference (NaN never is)."""
    return ~_within(out.detach().cpu().double(), case.expected, case.atol)


def _within(got: torch.Tensor, value: torch.Tensor, atol: float | torch.Tensor) -> torch.Tensor:
    return (got - value.double()).abs() <= atol  # NaN compares False


def _right_values(exercise: Exercise, case: Case, got: torch.Tensor, stored: Stored) -> Result:
    """Right values: a pass, unless the work was done elsewhere, the accumulator is too weak
    (the long-K probe), the work was not shared as asked, or the compiled kernels lack what
    the exercise requires."""
    if stored.elsewhere is not None:
        code, said = stored.elsewhere
        return result(case, code=code, problem=said, cause=said)
    found = case.probe(got, *case.inputs) if case.probe is not None else None
    if found:
        return result(case, code=found[0], problem=found[1])
    if stored.unshared:
        return result(case, code="goal_missed", problem=stored.unshared, cause=stored.unshared)
    requires = exercise.requires
    if requires is not None and stored.shows is False:
        return result(case, code=requires.code, problem=requires.fix, cause=requires.fix)
    return result(case, passed=True)


def _stray_mistake(case: Case, got: torch.Tensor) -> Mistake | None:
    """Stores strayed: the known mistake whose in-bounds cells match, or None."""
    for mistake in case.mistakes:
        if mistake.code != "out_of_bounds_write" or mistake.value.shape != got.shape:
            continue
        inside = ~torch.isnan(mistake.value)
        if bool(inside.any()) and bool((got[inside] == mistake.value[inside]).all()):
            return mistake
    return None


def known_mistake(case: Case, found: Result) -> bool:
    """Whether ``found`` names one of the case's known mistakes (other than a stray store)."""
    return found.code in {m.code for m in case.mistakes} - {"out_of_bounds_write"}


# --- buffers the launcher made with torch.empty: a replay with them zeroed --------------------
UNINITIALISED = (
    "{bad} of {cells} cells of {output} turned NaN when the check launched your kernels "
    "again with the {count} buffer(s) your launcher made with torch.empty (or the like) "
    "filled with NaN: torch.empty hands out memory as it was, zeros only by chance. A kernel "
    "added into such a buffer (tl.atomic_add) or read it before writing it: make it with "
    "torch.zeros, or store into it first."
)


def poisoned(record: Mapping) -> int:
    """How many buffers of the launcher's a replay of ``record`` refills with poison: those
    that held neither one constant nor a copy of an input when a kernel was first handed
    them (torch.empty's, say)."""
    return sum(b["fill"].get("kind") == "poison" for b in record["buffers"])


def may_need_zeros(case: Case, found: Result, record: Mapping) -> bool:
    """Whether a replay of ``record`` judged ``found`` on what it stored may have failed on the
    poison in the launcher's :func:`poisoned` buffers rather than on a known mistake: then the
    replay again with those buffers zeroed decides (:func:`uninitialised`)."""
    return not found.passed and not known_mistake(case, found) and poisoned(record) > 0


def uninitialised(
    exercise: Exercise, case: Case, record: Mapping, stored: torch.Tensor, zeroed: Stored
) -> Result | None:
    """``uninitialised_buffer`` where the replay whose :func:`poisoned` buffers held zeros
    (``zeroed``) is right, although with them poisoned it stored ``stored``, wrong: the
    kernels read or added into torch.empty's memory, which holds zeros only by chance. None
    where zeros do not make it right."""
    if not zeroed.canaries_intact or bool(wrong_cells(case, zeroed.out).any()):
        return None
    bad = int(stored.isnan().sum()) or int(wrong_cells(case, stored).sum())
    said = UNINITIALISED.format(bad=bad, cells=stored.numel(), output=exercise.tensors[-1],
                                count=poisoned(record))  # fmt: skip
    return result(case, code="uninitialised_buffer", problem=said, cause=said)


# --- rules on the launch record --------------------------------------------------------------
def from_record(exercise: Exercise, case: Case, record: Mapping) -> Result | None:
    """A case's outcome from its launch record alone (no kernel launched, none handed the
    output, a course kernel, a copy of an input made on the host), or None when the record's
    kernels are to be replayed and judged by what they store."""
    if not record["launches"]:
        return result(case, code="no_triton_kernel", problem="no kernel[grid](...) launch was seen")
    output = exercise.tensors[-1]
    if not any(_hands(value, output) for x in record["launches"]
               for value in [*x["args"], *x["kwargs"].values()]):  # fmt: skip
        problem = (
            f"no kernel was handed {output}: it was filled some other way (torch, say), or not "
            f"at all. The kernel must store the answer into {output} itself."
        )
        return result(case, code="no_triton_kernel", problem=problem, cause=problem)
    return host_work(exercise, case, record)


def host_work(exercise: Exercise, case: Case, record: Mapping) -> Result | None:
    """Where the record shows work that is not the learner's kernels' own: a course kernel
    (:func:`course_kernel`; its names changed or not, unless it is an exercise's own solution;
    lesson 9 starts from a course kernel's source: there a copy of one is judged a repair),
    or an input rearranged on the host (:func:`copied_input`); None if neither."""
    course = course_kernel(record, by_source=exercise.fix_of is None)
    if course:
        return result(case, code="course_kernel", problem=course, cause=course)
    copied = copied_input(exercise, case, record)
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


def host_copy(name: str, how: str) -> str:
    """The sentence for a copy of input ``name`` made on the host (``how``: ``x.contiguous()``,
    say) for a kernel to read, where a kernel is to read ``name`` where it lies."""
    return (
        f"the launcher remade {name} on the host ({how} or the like) and handed the copy to "
        f"a kernel: that is host work there, not your kernel's. Pass {name} itself and read "
        f"it as it is, where it lies, through {name}.stride()."
    )


def copied_input(exercise: Exercise, case: Case, record: Mapping) -> str | None:
    """The :func:`host_copy` sentence for a copy of an input that the record says the launcher
    made for a kernel in another layout than the input's (transposed, permuted, or gathered
    from a strided view), or in another dtype where the exercise does not allow that; None if
    none. A copy is that input only in the same layout (a contiguous copy of a contiguous
    input, a dtype conversion where the exercise :attr:`~Exercise.converts`): the replay
    keeps it."""
    names = dict(zip(exercise.tensors, case.tensors, strict=False))
    for buffer in record["buffers"]:
        fill = buffer.get("fill") or {}
        name = fill.get("of")
        if fill.get("kind") != "copy" or name not in names:
            continue
        dtype = buffer.get("dtype")
        if not exercise.converts and dtype != str(names[name].dtype).removeprefix("torch."):
            return host_copy(name, f"{name}.to(torch.{dtype})")
        if fill.get("layout") == "same":
            continue
        if fill.get("layout") == "transposed":
            return host_copy(name, f"{name}.t().contiguous()")
        gathered = not names[name].is_contiguous()
        how = f"{name}.contiguous()" if gathered else f"{name}.t().contiguous().t()"
        return host_copy(name, how)
    return None


@cache
def _course_index() -> dict[str, str]:
    """Every ``@triton.jit`` function the course ships, by its normalised source, but those that
    are an exercise's own solution as a lesson prints it (lesson 3's strided copy): a learner
    who types one in, or reuses it later, did the exercise."""
    import importlib
    import pkgutil

    import tmm_course.capstone
    import tmm_course.kernels
    from tmm_course.exercises import EXERCISES
    from tmm_course.source import source_of

    solutions = {kernel for e in EXERCISES for kernel in e.solution_kernels}

    found: dict[str, str] = {}
    for package in (tmm_course.kernels, tmm_course.capstone):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, value in vars(module).items():
                fn = getattr(value, "fn", None)
                if type(value).__name__ not in ("JITFunction", "InterpretedFunction") or not fn:
                    continue
                source = getattr(value, "src", None)
                if not source:
                    try:
                        source = source_of(fn)
                    except (OSError, TypeError):
                        source = inspect.getsource(fn)
                key, qualified = _normalised(source), f"{module.__name__}.{name}"
                if key and qualified not in solutions:
                    found.setdefault(key, qualified)
    return found


def _normalised(source: str) -> str | None:
    """A kernel's source with its name, decorators, comments, layout and the names it binds
    left out (:func:`tmm_course.check.record.abstracted`)."""
    from tmm_course.check.record import abstracted

    return abstracted(source)


def course_kernel(record: Mapping, by_source: bool = True) -> str | None:
    """The sentence naming the course's kernels among the record's (launched, or called inside
    a launched one): those the record says ship with the course and, ``by_source``, any whose
    source is a course kernel's with its names changed (:func:`_course_index`); None if none."""
    index = _course_index() if by_source else {}
    launched = {x["kernel"] for x in record.get("launches", ())}
    found = []
    for key, entry in record["kernels"].items():
        course = index.get(_normalised(entry["source"]) or "")
        if course or entry.get("course"):
            inside = "" if key in launched or not launched else ", called inside your kernel,"
            found.append(f"{entry['name']}{inside} is the course's {course or entry['module']}")
    if not found:
        return None
    return "; ".join(sorted(set(found))) + ": the exercise is to write the kernel yourself"


def not_the_fix(exercise: Exercise, record: Mapping) -> str | None:
    """Lesson 9: why the kernels the function really launched are not a repair of the broken
    one (None if they are): :func:`tmm_course.check.fixes.not_a_repair`."""
    if exercise.fix_of is None:
        return None
    from tmm_course.check import fixes
    from tmm_course.kernels import pitfalls

    broken = getattr(pitfalls, exercise.fix_of)
    kernels = record["kernels"]

    def called(key: str) -> list[SimpleNamespace]:
        """The learner's @triton.jit functions ``key`` calls, at any depth."""
        seen, todo = [], list(kernels[key].get("calls", ()))
        while todo:
            callee = todo.pop()
            if callee not in seen:
                seen.append(callee)
                todo += kernels[callee].get("calls", ())
        return [SimpleNamespace(src=kernels[k]["source"]) for k in seen
                if not kernels[k].get("course")]  # fmt: skip

    launched = [k for k in dict.fromkeys(x["kernel"] for x in record["launches"])
                if not kernels[k].get("course")]  # fmt: skip
    found = fixes.not_a_repair(
        broken,
        [(kernels[k]["name"], SimpleNamespace(src=kernels[k]["source"])) for k in launched],
        {kernels[k]["name"]: called(k) for k in launched},
    )
    return None if found is None else found[0]


# --- the verdict ----------------------------------------------------------------------------
TOO_MANY_PROGRAMS = (
    "{idle} of the {programs} programs launched for the case {size} touched no memory at all: "
    "the grid has more programs than {output} has tiles (one program per element, say, for a "
    "kernel whose program handles a whole BLOCK). Launch triton.cdiv(n, BLOCK) programs per "
    "axis, one per tile."
)
IDLE_SHARE = 4  # flagged when the programs are at least this many times the ones that worked


def too_many_programs(cases: list[Result], output: str) -> None:
    """Every case right, from a grid that grows with the problem and keeps most of its
    programs idle (:attr:`~tmm_course.check.result.Case.idle`; a persistent kernel's fixed
    grid, idle on a small problem, is not this): the case with the most programs fails with
    ``too_many_programs``, its sentence naming ``output``."""
    counted = [c for c in cases if c.programs]
    if not all(c.passed for c in cases) or len({c.programs for c in counted}) < 2:
        return
    worst = max(counted, key=lambda c: c.programs)
    if worst.programs < IDLE_SHARE * max(worst.programs - worst.idle, 1) or worst.idle < 2:
        return
    worst.passed, worst.code = False, "too_many_programs"
    worst.problem = worst.cause = TOO_MANY_PROGRAMS.format(
        idle=worst.idle, programs=worst.programs, size=worst.label, output=output
    )


def grade(
    exercise: Exercise,
    cases: list[Result],
    record: Mapping | None = None,
    goals: list[Goal] | None = None,
) -> tuple[str, list[str], str]:
    """(verdict, codes, detail) of one exercise for a grader's row, decided by :func:`decide`
    (the first code is the primary diagnosis); lesson 9's, once every case passed, from the
    kernel the last ``record`` launched; with ``goals`` (an exercise's
    :class:`~tmm_course.exercises.spec.AtScale`), those too, as the check adds them."""
    from tmm_course.check.result import from_goals

    found = _graded(exercise, cases, record)
    if goals is None:
        return found
    checked = from_goals(exercise.name, goals)
    state, codes, detail = found
    detail += f"; {sum(g.met for g in goals)}/{len(goals)} goals met at scale"
    if checked.passed:
        return state, codes, detail
    if state == "pass":
        return "fail", checked.codes, f"{detail}; {checked.primary.message}"[:500]
    return state, list(dict.fromkeys([*codes, *checked.codes])), detail[:500]


def _graded(
    exercise: Exercise, cases: list[Result], record: Mapping | None
) -> tuple[str, list[str], str]:
    too_many_programs(cases, exercise.tensors[-1])
    if cases and all(c.passed for c in cases) and record is not None:
        said = not_the_fix(exercise, record)
        if said:
            return "fail", ["not_the_fix"], f"{len(cases)}/{len(cases)} cases passed, but {said}"
    if cases and cases[0].code == "not_implemented":
        return "not_implemented", ["not_implemented"], "the function raised NotImplementedError"
    # a refusal of one case's dtypes, where the others compiled, is secondary
    compiled = any(c.passed or c.code not in ("gpu_would_reject", "skipped", "crashed")
                   for c in cases)  # fmt: skip
    for c in cases:
        c.secondary = c.secondary or (c.code == "gpu_would_reject" and compiled)
    checked = decide(exercise.name, cases, exercise.messages, exercise.tensors[-1])
    detail = f"{sum(c.passed for c in cases)}/{len(cases)} cases passed"
    if checked.passed:
        return "pass", [], detail
    first = next((c for c in cases if not c.passed and c.code != "skipped"), None)
    if checked.primary is not None:
        detail += f"; {checked.primary.message}"
    if first is not None and first.problem:
        detail += f" First failure: {first.label}: {first.problem}"
    return "fail", checked.codes, detail


def decide(
    exercise: str, cases: list[Result], messages: Mapping[str, str], output: str
) -> CheckResult:
    """The verdict on ``cases``: passed when all passed, else the codes they found ranked
    (:data:`PRIORITY`, a cause before what it explains), each with its one sentence (a case's
    precise cause, else the exercise's ``messages``, else the generic one); one cause alone
    where the cases pass exactly when an input's strides are ``output``'s."""
    result = CheckResult(exercise, passed=all(c.passed for c in cases), cases=cases)
    if result.passed:
        return result
    borrowed = _borrowed_strides(cases, output)
    if borrowed is not None:  # one cause explains every failure
        result.diagnoses = [Diagnosis("ignores_strides", borrowed)]
        return result
    if all(c.code in ("not_implemented", "skipped") for c in cases):
        codes = ["not_implemented"]
    else:
        failed = [c for c in cases if not c.passed and c.code != "skipped"]
        found = {c.code for c in failed} | set(_where_wrong(failed, cases))
        for c in failed:  # a cause that explains another finding
            found -= set(c.explains)
        if "out_of_bounds_read" in found and _loads_past_k(cases, messages):
            found.discard("ragged_edge")  # one cause: the K lanes of the last step
        codes = [code for code in PRIORITY if code in found]
        codes = _consequences_last(_cause_first(codes), failed)
    result.diagnoses = [Diagnosis(code, _message(code, cases, messages)) for code in codes]
    return result


BORROWED_STRIDES = (
    "Right in exactly the cases where {other} and {output} have the same strides, wrong in "
    "every other: {output}'s addresses are built from {other}'s strides (or its sizes). Pass "
    "{output}.stride(0) and {output}.stride(1) and build {output}'s pointers from them."
)
UNJUDGED = ("skipped", "not_implemented", "crashed", "timed_out", "gpu_would_reject")


def _borrowed_strides(cases: list[Result], output: str) -> str | None:
    """The sentence for an output addressed with an input's strides: among the cases whose
    values were judged, those where that input's strides are the output's all passed and
    the others all failed (two of each at least), or None."""
    judged = [c for c in cases if c.alike is not None and c.code not in UNJUDGED]
    failed = [c for c in judged if not c.passed]
    names = {n for c in judged for n in c.alike if n != output}
    for other in sorted(names):
        same = [c for c in judged if other in c.alike]
        if (len(failed) >= 2 and len(same) >= 2 and all(c.passed for c in same)
                and all(other not in c.alike for c in failed)
                and len(same) + len(failed) == len(judged)):  # fmt: skip
            return BORROWED_STRIDES.format(other=other, output=output)
    return None


def _consequences_last(codes: list[str], failed: list[Result]) -> list[str]:
    """A GPU's refusal of a kernel for one dtype only (float16 results from float32 inputs,
    say), found beside a known mistake, follows from that mistake: name the mistake first."""
    refusals = [c for c in failed if c.code == "gpu_would_reject"]
    known = {"transposed", "precision", "reads_c_when_beta_zero"}
    if refusals and all(c.secondary for c in refusals) and known & set(codes):
        codes = [c for c in codes if c != "gpu_would_reject"] + ["gpu_would_reject"]
    return codes


def _cause_first(codes: list[str]) -> list[str]:
    """Where the failures cluster names their cause better than what they did: strided
    tensors explain strays of either kind. (A stray on a ragged edge is named as such: a load
    or a store whose mask is missing.)"""
    strays = ("out_of_bounds_write", "out_of_bounds_read")
    first = next((c for c in codes if c in strays), None)
    place = "ignores_strides"
    if place not in codes or first is None or codes.index(place) < codes.index(first):
        return codes
    codes = [c for c in codes if c != place]
    codes.insert(codes.index(first), place)
    return codes


def _message(code: str, cases: list[Result], messages: Mapping[str, str]) -> str:
    """The sentence for ``code``, the most telling first: a known mistake matched on the
    values stored; the exercise's for a pattern across cases (two sizes mixed up: every
    failure has M != N; loads past K: every failure has a ragged K); a case's precise cause
    (where a lane strayed; an unambiguous one first); the exercise's sentence; the generic
    one."""
    causes = sorted((c for c in cases if c.code == code and c.cause),
                    key=lambda c: (not c.known, c.ambiguous))  # fmt: skip
    if causes and causes[0].known:
        return causes[0].cause
    if (mixup := messages.get(f"{code} when M != N")) and _only_when_not_square(cases):
        return mixup
    if code == "out_of_bounds_read" and (past_k := _loads_past_k(cases, messages)):
        return past_k
    if causes:
        return causes[0].cause
    if code == "ragged_edge":
        return _axes_message(cases, messages)
    if code == "ignores_strides":
        return _strides_message(cases, messages)
    return messages.get(code) or MESSAGES[code]


LOCATED = (None, "unwritten", "out_of_bounds_read", "out_of_bounds_write")


def _located(cases: list[Result]) -> list[Result]:
    """Failed cases whose place (ragged axes, strided tensors) may explain them."""
    return [c for c in cases if not c.passed and c.code in LOCATED]


def _where_wrong(failed: list[Result], cases: list[Result]) -> list[str]:
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


K_OVERRUN = (
    "The loads run past K: only the cases whose K is not a multiple of BLOCK_K fail, where "
    "the last K step's lanes fall beyond the inputs' K (past the end of a row, a lane lands on "
    "the next row's first cells, and the case list names it there): "
)


def _loads_past_k(cases: list[Result], messages: Mapping[str, str]) -> str | None:
    """The sentence for loads that strayed where every located failure has a ragged K and a
    case ragged in M or N alone passed (the K lanes of the last step are unmasked, not M's or
    N's), in a product that has a K mask to name; None otherwise."""
    fix = messages.get("ragged_edge K")
    located = _located(cases)
    if (
        fix
        and any(c.code == "out_of_bounds_read" for c in located)
        and all("K" in c.ragged for c in located)
        and any(c.passed and c.ragged and "K" not in c.ragged for c in cases)
    ):
        return K_OVERRUN + fix
    return None


def _only_when_not_square(cases: list[Result]) -> bool:
    """Every failure has M != N, and some M == N case passed: the two sizes were mixed up."""
    failed = [c for c in cases if not c.passed and c.code != "skipped"]
    square = [c.shape[0] == c.shape[1] for c in failed]
    return (
        bool(failed)
        and not any(square)
        and any(c.passed and c.shape[0] == c.shape[1] for c in cases)
    )


def _strayed(cases: list[Result]) -> str:
    reads = [c for c in _located(cases) if c.code == "out_of_bounds_read"]
    if not reads:
        return ""
    return " (Those cases also loaded lanes outside the inputs, which the check did not perform.)"


def _common(sets: list[tuple[str, ...]]) -> list[str]:
    common = set(sets[0]).intersection(*sets[1:]) if sets else set()
    union = set().union(*sets) if sets else set()
    return sorted(common or union)


def _axes_message(cases: list[Result], messages: Mapping[str, str]) -> str:
    axes = _common([c.ragged for c in _located(cases)])
    which = " or ".join(axes)
    fix = messages.get(f"ragged_edge {'/'.join(axes)}") or messages.get("ragged_edge", "")
    return f"Right when every size is a multiple of the block, wrong when {which} is not: " + (
        fix or MESSAGES["ragged_edge"]
    )


def _strides_message(cases: list[Result], messages: Mapping[str, str]) -> str:
    tensors = _common([c.strided for c in _located(cases)])
    which = " or ".join(tensors)
    fix = messages.get("ignores_strides") or OWN_STRIDES
    return f"Right for contiguous tensors, wrong when {which} is not contiguous: {fix}" + _strayed(
        cases
    )
