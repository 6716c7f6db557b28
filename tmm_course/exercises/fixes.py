"""Lesson 9's "find the bug": ``fixed_a(a, b, c)`` (and b, c, d) launches the broken kernel
``pitfalls.mystery_a_kernel`` repaired by a small edit, judged on lesson 4's matmul cases."""

from __future__ import annotations

from dataclasses import replace

from tmm_course.exercises import matmul
from tmm_course.exercises.spec import Cells, Exercise

MYSTERIES = "abcd"


def fix(letter: str) -> Exercise:
    cells = tuple(f"f7e{letter}{i}" for i in (1, 2, 3))
    return replace(
        matmul.EXERCISE,
        name=f"fixed_{letter}",
        lesson=9,
        function=f"fixed_{letter}",
        signature=f"fixed_{letter}(a, b, c)",
        cells=Cells("09_pitfalls", *cells),
        fix_of=f"mystery_{letter}_kernel",
        kernel=f"fixed_{letter}_kernel",
    )


EXERCISES = [fix(letter) for letter in MYSTERIES]
