"""What the learner's compiled kernels must show beyond their values, read off the compiler
(:mod:`tmm_course.compile_ahead`), never off their source:

- a :class:`~tmm_course.exercises.spec.Requirement` (lesson 7: loads through tensor
  descriptors): one call of the launcher with its launches recorded, each kernel of the
  learner's compiled ahead for the requirement's GPU and read;
- an :class:`~tmm_course.exercises.spec.AtScale` (lesson 8: split-K's figures): one call on a
  problem too large to run here, each launch noted and skipped, each kernel of the learner's
  compiled ahead for the exercise's GPUs, its goals judged on those figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

import tmm_course
from tmm_course.check.gpu_rules import fits
from tmm_course.check.launches import grid_of, recording
from tmm_course.check.result import Case
from tmm_course.compile_ahead import Launched, compile_for, specialize
from tmm_course.exercises.spec import Exercise, Goal, Requirement


def shown(requirement: Requirement, kernel, args: tuple, kwargs: dict) -> tuple[bool, str]:
    """(whether one launch's kernel shows ``requirement``, or the compiler's refusal)."""
    options = {k: kwargs[k] for k in ("num_warps", "num_stages") if k in kwargs}
    compiled = compile_for(kernel, specialize(kernel, args, kwargs), requirement.target, **options)
    if not compiled.ok:
        return False, f"{requirement.target}: {compiled.error}"
    return requirement.shows(compiled.ttir, compiled.ptx), ""


def requirement_case(requirement: Requirement, call: Callable[[], object]) -> Case:
    """The case that says whether every kernel of the learner's that ``call()`` launches shows
    ``requirement``."""
    case = Case(requirement.asks, ())
    try:
        with recording() as seen:
            call()
    except Exception as error:  # reported by the cases already
        case.code, case.problem = "crashed", f"{type(error).__name__}: {error}"[:200]
        return case
    mine = [launch for launch in seen.seen if launch.jit is not None and not launch.from_the_course]
    if not mine:
        case.code = "course_kernel"
        case.problem = "no kernel written in the notebook was launched (the course's do not count)"
        return case
    for launch in mine:  # every kernel of theirs must show it
        met, refused = shown(requirement, launch.jit, launch.args, launch.kwargs)
        if refused:
            case.code, case.problem = "gpu_would_reject", refused
            return case
        if not met:
            case.code, case.problem = requirement.code, f"{launch.kernel}: {requirement.fix}"
            return case
    names = sorted({x.kernel for x in mine})
    case.passed, case.problem = True, f"{', '.join(names)} show{'s' * (len(names) == 1)} it"
    return case


def launched(kernel, name: str, args: Sequence, kwargs: dict, grid: Sequence[int],
             targets: Sequence[str]) -> Launched:  # fmt: skip
    """One launch ``kernel[grid](*args, **kwargs)`` compiled ahead for each of ``targets``,
    not run (the check's and the grader's worker's one way to read a launch); refused where its
    shared memory does not fit the GPU, as Triton's launcher would refuse it."""
    warps, stages = int(kwargs.get("num_warps", 4)), int(kwargs.get("num_stages", 3))
    spec = specialize(kernel, args, kwargs)
    constants = {k: v for k, v in spec.constexprs.items() if type(v) is int}
    compiled = {t: fits(compile_for(kernel, spec, t, warps, stages)) for t in targets}
    g = [int(x) for x in grid]  # three sizes: grid_of's, or a record's
    return Launched(name, (g[0], g[1], g[2]), constants, warps, stages, compiled)


def launches_at_scale(exercise: Exercise, fn: Callable[..., object]) -> list[Launched]:
    """``fn`` called once on ``exercise.at_scale``'s problem with every launch noted and
    skipped, each kernel written in the notebook compiled for its GPUs (in launch order)."""
    at = exercise.at_scale
    assert at is not None
    case = at.problem()
    on = lambda x: x.to(tmm_course.DEVICE) if isinstance(x, torch.Tensor) else x
    out = torch.empty(case.output.shape, dtype=case.output.dtype, device=tmm_course.DEVICE)
    with recording(dry=True) as seen:
        fn(*exercise.arguments([on(x) for x in case.inputs], out))
    mine = [x for x in seen.seen if x.jit is not None and not x.from_the_course]
    return [launched(x.jit, x.kernel, x.args, x.kwargs, grid_of(x), at.targets) for x in mine]


def at_scale_goals(exercise: Exercise, fn: Callable[..., object]) -> list[Goal]:
    """The goals of ``exercise.at_scale`` on what ``fn`` launches there
    (:func:`launches_at_scale`)."""
    at = exercise.at_scale
    assert at is not None
    try:
        found = launches_at_scale(exercise, fn)
    except Exception as error:
        return at.failed(f"the call raised {type(error).__name__}: {error}")
    return at.judge(found)
