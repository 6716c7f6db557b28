"""What the learner's compiled kernels must show beyond their values
(:class:`~tmm_course.exercises.spec.Requirement`; lesson 7: loads through tensor descriptors):
one call of the launcher with its launches recorded, each kernel of the learner's compiled
ahead for the requirement's GPU (:mod:`tmm_course.compile_ahead`) and read."""

from __future__ import annotations

from collections.abc import Callable

from tmm_course.check.launches import recording
from tmm_course.check.result import Case
from tmm_course.compile_ahead import compile_for, specialize
from tmm_course.exercises.spec import Requirement


def shown(requirement: Requirement, kernel, args: tuple, kwargs: dict) -> tuple[bool, str]:
    """(whether one launch's kernel shows ``requirement``, or the compiler's refusal)."""
    options = {k: kwargs[k] for k in ("num_warps", "num_stages") if k in kwargs}
    compiled = compile_for(kernel, specialize(kernel, args, kwargs), requirement.target, **options)
    if not compiled.ok:
        return False, f"{requirement.target}: {compiled.error}"
    return requirement.shows(compiled.ttir, compiled.ptx), ""


def requirement_case(requirement: Requirement, call: Callable[[], object]) -> Case:
    """The case that says whether the kernels ``call()`` launches show ``requirement``."""
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
    for launch in mine:
        met, refused = shown(requirement, launch.jit, launch.args, launch.kwargs)
        if refused:
            case.code, case.problem = "gpu_would_reject", refused
            return case
        if met:
            case.passed, case.problem = True, f"{launch.kernel} shows it"
            return case
    case.code, case.problem = requirement.code, requirement.fix
    return case
