"""Lesson 8's graded predictions: numbers a learner works out on paper before the GPU shows
them (a configuration's shared memory, a tile's intensity, whether it fits), checked against
the formulas the lesson teaches, each wrong answer with the formula that gives the right one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tmm_course import gpu
from tmm_course.capstone.config import Config
from tmm_course.capstone.plans import shared_memory_bytes
from tmm_course.check.result import Case, CheckResult, Diagnosis
from tmm_course.perf.intensity import tile_intensity

WIDE = Config(128, 256, 64, num_warps=8, num_stages=3)


@dataclass(frozen=True)
class Question:
    """One prediction: what is asked, its answer, and how to work it out."""

    asks: str
    answer: Callable[[], float | bool]
    how: str
    rel_tol: float = 0.01


LESSON_8 = {
    "shared_kb": Question(
        "shared memory of one 128x256x64 float16 program of lesson 4's kernel, 3 stages, on an "
        "H200 (sm_90, where Triton keeps num_stages buffers), in KB (1 KB = 1024 bytes)",
        lambda: shared_memory_bytes(WIDE, itemsize=2) / 1024,
        "on sm_90, num_stages x (BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N) x 2 bytes = "
        "3 x (128*64 + 64*256) x 2",
    ),
    "intensity": Question(
        "FLOPs per byte loaded by a 128x128 float16 tile",
        lambda: tile_intensity(128, 128, element_bytes=2),
        "2*BM*BN / (2*(BM + BN)) for 2-byte elements; BLOCK_K cancels",
    ),
    "fits_with_4_stages": Question(
        "does that program fit an H200's 227 KB of shared memory with 4 stages (True or "
        "False)?",
        lambda: (
            shared_memory_bytes(Config(128, 256, 64, num_stages=4), itemsize=2)
            <= gpu.KNOWN["H200"].shared_memory
        ),
        "4 x (128*64 + 64*256) x 2 bytes, against 227 KB",
    ),
}


def check_predictions(
    answers: Mapping[str, object], questions: Mapping[str, Question] = LESSON_8
) -> CheckResult:
    """Each of ``answers`` (question name -> your number, or None while unanswered) against
    the formula's value; the first wrong one is named with the way to work it out."""
    cases, diagnoses = [], []
    unanswered = [name for name in questions if answers.get(name) is None]
    for name, question in questions.items():
        case = Case(f"{name}: {question.asks}", ())
        yours, right = answers.get(name), question.answer()
        if yours is None:
            case.code, case.problem = "not_implemented", "no answer yet"
        elif isinstance(right, bool):
            case.passed = yours is right
        else:
            case.passed = isinstance(yours, int | float) and abs(yours - right) <= (
                question.rel_tol * abs(right)
            )
        if yours is not None and not case.passed:
            case.code = "wrong_values"
            case.problem = f"you said {yours!r}"
            if not diagnoses:
                diagnoses.append(
                    Diagnosis(
                        "wrong_values",
                        f"{name}: you said {yours!r}, which is not it. Work it out as "
                        f"{question.how}, then run the check again.",
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
