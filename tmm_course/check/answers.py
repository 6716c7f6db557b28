"""The checks of answers that are data (:class:`~tmm_course.exercises.spec.Answer`: a launch's
knobs, reasoning): the exercise's own judge, run on the values as the grader reads them (a
JSON round trip), its goals turned into a :class:`CheckResult`."""

from __future__ import annotations

import json

from tmm_course.check.result import Case, CheckResult, Diagnosis
from tmm_course.exercises.spec import Answer, Goal


def as_data(value: object) -> object:
    """``value`` as the grader receives it from a worker: through JSON (tuples become lists);
    a clear error for what JSON cannot carry."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"{value!r:.80} is not plain data ({error}): use dicts, lists, strings, numbers, "
            "True, False and None"
        ) from None


def result(name: str, goals: list[Goal]) -> CheckResult:
    """The check's verdict from an answer's goals: the first missed goal that is not merely
    unanswered names the cause (else the first unanswered one)."""
    cases = [Case(g.asks, (), passed=g.met, problem=g.seen, code=None if g.met else g.code)
             for g in goals]  # fmt: skip
    missed = [g for g in goals if not g.met]
    first = next((g for g in missed if g.code != "not_implemented"), missed[0] if missed else None)
    diagnoses = []
    if first is not None:
        diagnoses.append(
            Diagnosis(first.code, first.fix or f"{first.asks}: not yet ({first.seen}).")
        )
    return CheckResult(name, not missed, cases, diagnoses)


def run_answer(exercise: Answer, *values: object, clock: bool = False) -> CheckResult:
    """Judge ``values`` (those of ``exercise.names``, in order) as the grader would."""
    return result(exercise.name, exercise.judge(*map(as_data, values), clock=clock))
