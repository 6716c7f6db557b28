"""Checks for the exercises. Each takes the learner's launcher and returns a
:class:`~tmm_course.checking.CheckResult`: a verdict, the cases tried and diagnoses.

Every call draws fresh random inputs over several shapes (1x1, aligned, ragged, tall, skinny,
and non-contiguous where strides matter).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import tmm_course
from tmm_course.checking import (
    Case,
    CheckResult,
    Trial,
    guarded_output,
    run_trials,
)

__all__ = ["CheckResult", "check_fill_column_major", "check_outer_product", "check_strided_copy"]

ALIGNED = [(64, 64), (32, 128)]
RAGGED = [(1, 1), (5, 7), (33, 17), (70, 3), (3, 70)]


def _label(shape: tuple[int, int], ragged: bool, note: str = "") -> str:
    kind = "ragged" if ragged else "aligned"
    return f"{shape[0]}x{shape[1]} {kind}" + (f", {note}" if note else "")


def _shapes() -> list[tuple[tuple[int, int], bool]]:
    return [(s, False) for s in ALIGNED] + [(s, True) for s in RAGGED]


def check_fill_column_major(fn: Callable[[torch.Tensor], object]) -> CheckResult:
    """Lesson 1: ``fn(out)`` must set ``out[i, j] = j * M + i`` (the column-major index)."""
    trials = []
    for shape, ragged in _shapes():
        m, n = shape
        i = torch.arange(m, device=tmm_course.DEVICE)[:, None]
        j = torch.arange(n, device=tmm_course.DEVICE)[None, :]
        wrong = {"transposed": (i * n + j).float()} if m > 1 and n > 1 else {}
        trials.append(
            Trial(
                Case(_label(shape, ragged), shape, ragged=ragged),
                (),
                guarded_output(shape, torch.float32),
                (j * m + i).float(),
                wrong,
            )
        )
    return run_trials("fill_column_major", fn, trials)


def check_outer_product(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
) -> CheckResult:
    """Lesson 2: ``fn(x, y, out)`` must set ``out[i, j] = x[i] * y[j]`` by broadcasting."""
    trials = []
    for shape, ragged in _shapes():
        m, n = shape
        x = torch.randn(m, device=tmm_course.DEVICE)
        y = torch.randn(n, device=tmm_course.DEVICE)
        wrong = {"transposed": y[:, None] * x[None, :]} if m == n and m > 1 else {}
        trials.append(
            Trial(
                Case(_label(shape, ragged), shape, ragged=ragged),
                (x, y),
                guarded_output(shape, torch.float32),
                x[:, None] * y[None, :],
                wrong,
                atol=1e-6,
            )
        )
    return run_trials("outer_product", fn, trials)


def _views(m: int, n: int) -> list[tuple[str, torch.Tensor]]:
    """Random inputs under four layouts: contiguous, transposed, sliced rows, strided columns."""
    device = tmm_course.DEVICE
    return [
        ("contiguous", torch.randn(m, n, device=device)),
        ("transposed view", torch.randn(n, m, device=device).t()),
        ("sliced view", torch.randn(2 * m, n + 3, device=device)[::2, 1 : n + 1]),
        ("every other column", torch.randn(m, 2 * n, device=device)[:, ::2]),
    ]


def check_strided_copy(fn: Callable[[torch.Tensor, torch.Tensor], object]) -> CheckResult:
    """Lesson 3: ``fn(x, out)`` must copy ``x`` into ``out`` for any strides of either."""
    trials = []
    for shape, ragged in [((32, 32), False), ((1, 1), True), ((33, 17), True), ((5, 70), True)]:
        for layout, x in _views(*shape):
            strided = layout != "contiguous"
            wrong = {}
            if not strided and shape[0] == shape[1] > 1:
                wrong["transposed"] = x.t()
            trials.append(
                Trial(
                    Case(_label(shape, ragged, layout), shape, ragged, strided),
                    (x,),
                    guarded_output(shape, torch.float32),
                    x,
                    wrong,
                )
            )
    m, n = 33, 17
    x = torch.randn(m, n, device=tmm_course.DEVICE)
    trials.append(
        Trial(
            Case(_label((m, n), True, "output with padded rows"), (m, n), True, True),
            (x,),
            guarded_output((m, n), torch.float32, row_gap=5),
            x,
        )
    )
    return run_trials("strided_copy", fn, trials)
