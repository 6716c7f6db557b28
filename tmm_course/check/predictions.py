"""Lesson 8's graded predictions: numbers a learner works out on paper before the GPU shows
them (a configuration's shared memory, a tile's intensity, whether it fits), checked against
the formulas the lesson teaches. A wrong answer gets a hint at the way and, for a known slip
(bytes for KB, 1000 for 1024), its name; never the answer or the whole calculation."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from tmm_course import gpu
from tmm_course.capstone.config import Config
from tmm_course.capstone.plans import shared_memory_bytes
from tmm_course.check.result import Case, CheckResult, Diagnosis
from tmm_course.perf.intensity import tile_intensity

WIDE = Config(128, 256, 64, num_warps=8, num_stages=3)


@dataclass(frozen=True)
class Question:
    """One prediction: what is asked, its answer, a hint at the way (never the answer), and
    the slips a learner makes, as factors between their number and the answer."""

    asks: str
    answer: Callable[[], float | bool]
    how: str
    rel_tol: float = 0.01
    slips: Mapping[float, str] = field(default_factory=dict)


KB_SLIPS = {
    1024.0: "that is the figure in bytes; the question asks for KB (1 KB = 1024 bytes)",
    1.024: "that is bytes divided by 1000; here 1 KB is 1024 bytes",
    1 / 1024: "that is the figure in MB, or divided by 1024 once too often",
    0.5: "that counts one byte too few per element, or one tile fewer: float16 takes 2 bytes",
    2.0: "that counts 4 bytes per element; float16 takes 2",
}

LESSON_8 = {
    "shared_kb": Question(
        "shared memory of one 128x256x64 float16 program of lesson 4's kernel, 3 stages, on an "
        "H200 (sm_90, where Triton keeps num_stages buffers), in KB (1 KB = 1024 bytes)",
        lambda: shared_memory_bytes(WIDE, itemsize=2) / 1024,
        "on sm_90 each stage holds one A tile (BLOCK_M x BLOCK_K) and one B tile (BLOCK_K x "
        "BLOCK_N) of 2-byte elements; multiply by the stages, then turn bytes into KB",
        slips={
            **KB_SLIPS,
            2 / 3: "that counts 2 stages (sm_80 keeps num_stages - 1 buffers); "
            "the question is about sm_90, which keeps all 3",
        },
    ),
    "intensity": Question(
        "FLOPs per byte loaded by a 128x128 float16 tile",
        lambda: tile_intensity(128, 128, element_bytes=2),
        "the FLOPs of one K step of the tile over the bytes of the two slabs it loads, with "
        "2-byte elements; BLOCK_K cancels",
        slips={
            2.0: "that counts 1 byte per element; float16 takes 2",
            0.5: "that counts 4 bytes per element (float32), or one multiply-add as 1 FLOP "
            "instead of 2",
            0.25: "that counts 4-byte elements and one FLOP per multiply-add",
        },
    ),
    "fits_with_4_stages": Question(
        "does that program fit an H200's 227 KB of shared memory with 4 stages (True or False)?",
        lambda: (
            shared_memory_bytes(Config(128, 256, 64, num_stages=4), itemsize=2)
            <= gpu.KNOWN["H200"].shared_memory
        ),
        "the same sum as shared_kb with 4 stages, against 227 KB",
    ),
}


def _kind(value: object) -> str:
    name = type(value).__name__
    return ("an " if name[0] in "aeiou" else "a ") + name


def _judge(question: Question, yours: object) -> tuple[bool, str]:
    """(right, what to tell the learner when not)."""
    right = question.answer()
    if isinstance(right, bool):
        if not isinstance(yours, bool | np.bool_):
            return False, f"expected True or False, got {_kind(yours)} ({yours!r})"
        return bool(yours) == right, f"work it out as {question.how}"
    if isinstance(yours, bool | np.bool_) or not isinstance(yours, numbers.Real):
        return False, f"expected a number (an int or a float), got {_kind(yours)} ({yours!r})"
    value = float(yours)
    if not math.isfinite(value):
        return False, f"expected a finite number, got {value!r}"
    if abs(value - right) <= question.rel_tol * abs(right):
        return True, ""
    for factor, slip in question.slips.items():
        if right and abs(value - factor * right) <= question.rel_tol * abs(factor * right):
            return False, f"a slip of units or factors: {slip}"
    side = "too high" if value > right else "too low"
    return False, f"{side}: work it out as {question.how}"


def check_predictions(
    answers: Mapping[str, object], questions: Mapping[str, Question] = LESSON_8
) -> CheckResult:
    """Each of ``answers`` (question name -> your number, or None while unanswered) against
    the formula's value; the first wrong one is named with a hint at the way, never the
    answer."""
    if not isinstance(answers, Mapping):
        raise TypeError(
            f"check_predictions takes a dict of question name -> your answer, got "
            f"{_kind(answers)}. Fix: my_predictions = {{'shared_kb': ..., ...}} with the names "
            f"{', '.join(questions)}, then check_predictions(my_predictions)."
        )
    unknown = [name for name in answers if name not in questions]
    if unknown:
        raise KeyError(
            f"no question named {', '.join(map(repr, unknown))}; the questions are "
            f"{', '.join(questions)}"
        )
    cases, diagnoses = [], []
    unanswered = [name for name in questions if answers.get(name) is None]
    for name, question in questions.items():
        case = Case(f"{name}: {question.asks}", ())
        yours = answers.get(name)
        if yours is None:
            case.code, case.problem = "not_implemented", "no answer yet"
            cases.append(case)
            continue
        case.passed, why = _judge(question, yours)
        if not case.passed:
            case.code = "wrong_values"
            case.problem = f"you said {yours!r}: {why}"
            if not diagnoses:
                diagnoses.append(
                    Diagnosis(
                        "wrong_values",
                        f"{name}: you said {yours!r}, which is not it ({why}); then run the "
                        "check again.",
                    )
                )
        cases.append(case)
    passed = all(c.passed for c in cases)
    if not passed and len(unanswered) == len(questions):
        diagnoses = [Diagnosis("not_implemented", "Fill in my_predictions, then run the check.")]
    elif not passed and not diagnoses:  # right so far
        left = ", ".join(unanswered)
        diagnoses = [Diagnosis("not_implemented", f"Right so far; still to answer: {left}.")]
    return CheckResult("predictions", passed, cases, diagnoses)
