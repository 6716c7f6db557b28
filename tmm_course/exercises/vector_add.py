"""Lesson 0: ``add(x, y, out)`` launches a kernel that stores ``x + y`` into ``out``, for any
length, a multiple of the block or not."""

from __future__ import annotations

from functools import partial

import torch

from tmm_course.exercises.spec import Case, Cells, Exercise, Output, Resize, ragged, same
from tmm_course.numerics import allowed

LENGTHS = (1, 7, 128, 1000, 4097)


def case(n: int, backend: str, gen: torch.Generator) -> Case:
    x, y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    x64, y64 = x.double(), y.double()
    return Case(
        f"n = {n}",
        (n,),
        (x, y),
        Output((n,), torch.float32),
        x64 + y64,
        atol=allowed(x64.abs() + y64.abs(), torch.float32, backend, "ieee"),
        ragged=ragged(N=n),
        redraw=partial(case, n, backend),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    return [case(n, backend, gen) for (n,) in map(resize, [(n,) for n in LENGTHS])]


EXERCISE = Exercise(
    name="vector_add",
    lesson=0,
    function="add",
    signature="add(x, y, out)",
    tensors=("x", "y", "out"),
    cases=cases,
    cells=Cells("00_start_here", "e0a00006", "e0a00007", "e0a00008"),
    messages={
        "ragged_edge": "launch triton.cdiv(n, BLOCK) programs, not n // BLOCK, and keep the "
        "kernel's mask: the last program covers the leftover elements.",
        "unwritten": "elements of out were never stored: hand the kernel out itself (not a "
        "tensor of your own), and launch triton.cdiv(n, BLOCK) programs (n // BLOCK leaves the "
        "last, partial block without a program).",
    },
)
