"""Lesson 4's variant exercise: a linear layer, ``out = relu(x @ w^T + bias)``, with the weight
stored as a layer stores it, ``w`` (N, K). The learner adapts the kernel instead of retyping it:
``B = w^T`` is a matter of strides, and bias and ReLU are an epilogue on the accumulator."""

from __future__ import annotations

from collections.abc import Callable

import torch

import tmm_course
from tmm_course.check.buffers import guarded_output
from tmm_course.check.engine import Trial, WrongAnswer, run_trials
from tmm_course.check.exercises import (
    LONG_K,
    MATMUL_CASES,
    accumulator_precision,
    labelled_case,
    strided_tensors,
)
from tmm_course.check.result import CheckResult
from tmm_course.numerics import allowed

MESSAGES = {
    "ragged_edge": "mask x's rows (offs_m < M) and w's rows (offs_n < N) on the loads, the K "
    "lanes of both with other=0.0, the bias load with offs_n < N, and the store.",
    "ignores_strides": "pass x's, w's and out's strides (two each) and build every pointer "
    "tile from them; w^T's element (k, n) is w[n, k], at n * w.stride(0) + k * w.stride(1).",
}


def _operands(m: int, n: int, k: int, layout: str):
    """x (m, k), w (n, k) and bias (n,) in float16, laid out as ``layout`` says."""
    device, half = tmm_course.DEVICE, torch.float16
    bias = torch.randn(n, device=device).to(half)
    if layout == "transposed":
        x = torch.randn(k, m, device=device).to(half).t()
        w = torch.randn(k, n, device=device).to(half).t()
    elif layout == "sliced":
        x = torch.randn(2 * m, k + 3, device=device).to(half)[::2, 2 : k + 2]
        w = torch.randn(n, 2 * k, device=device).to(half)[:, ::2]
    else:
        x = torch.randn(m, k, device=device).to(half)
        w = torch.randn(n, k, device=device).to(half)
    return x, w, bias


def _mistakes(x64, w64, bias64) -> list[WrongAnswer]:
    """What a linear layer gets wrong, on a square case that fits one K block."""
    relu = torch.relu
    return [
        WrongAnswer(
            "transposed",
            relu(x64 @ w64 + bias64),
            "matches relu(x @ w + bias): w was read as if it were K x N. w is stored N x K, so "
            "B = w^T takes offs_k with w.stride(1) and offs_n with w.stride(0).",
        ),
        WrongAnswer(
            "wrong_values",
            x64 @ w64.t() + bias64,
            "matches x @ w^T + bias without the ReLU: apply tl.maximum(acc, 0.0) before the store.",
        ),
        WrongAnswer(
            "wrong_values",
            relu(x64 @ w64.t()),
            "matches relu(x @ w^T): the bias was never added. Load bias[offs_n] (masked) and add "
            "it to every row of the tile: acc + bias[None, :].",
        ),
        WrongAnswer(
            "wrong_values",
            relu(x64 @ w64.t()) + bias64,
            "matches relu(x @ w^T) + bias: the ReLU came before the bias. Add the bias first, "
            "then take tl.maximum(acc, 0.0).",
        ),
        WrongAnswer(
            "wrong_values",
            relu(x64 @ w64.t() + bias64[:, None]),
            "the bias was added per row (bias[offs_m]): it belongs to the output's columns, "
            "one value per output feature: bias[offs_n][None, :].",
        ),
    ]


def check_linear_relu(fn: Callable[..., object]) -> CheckResult:
    """Lesson 4's variant: ``fn(x, w, bias, out)`` must store ``relu(x @ w.T + bias)`` into
    ``out`` (x (M, K), w (N, K), bias (N,), all float16), for any shapes and strides, with a
    float32 accumulator."""
    trials = []
    for spec in [*MATMUL_CASES, LONG_K]:
        label, m, n, k, layout = spec
        x, w, bias = _operands(m, n, k, layout)
        x64, w64, bias64 = x.double(), w.double(), bias.double()
        exact = x64 @ w64.t() + bias64
        bound = allowed(x64.abs() @ w64.abs().t() + bias64.abs(), torch.float16, tmm_course.BACKEND)
        square = m == n == k and layout == "contiguous"
        trials.append(
            Trial(
                case=labelled_case((m, n, k), label, strided_tensors(layout, ("x", "w", "out"))),
                inputs=(x, w, bias),
                guard=guarded_output(
                    (m, n), torch.float16, row_gap=3 * (layout == "padded output")
                ),
                expected=torch.relu(exact),
                wrong_answers=_mistakes(x64, w64, bias64) if square else [],
                atol=bound,
                extra=accumulator_precision(torch.relu(exact)) if spec is LONG_K else None,
                only_if_all_passed=spec is LONG_K,
            )
        )
    return run_trials("linear_relu", fn, trials, ("x", "w", "bias", "out"), messages=MESSAGES)
