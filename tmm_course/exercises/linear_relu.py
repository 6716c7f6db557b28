"""Lesson 4's exercise: ``linear_relu(x, w, bias, out)`` stores ``relu(x @ w.T + bias)`` into
``out`` (x (M, K), w (N, K) as a layer stores it, bias (N,), all float16), for any shapes and
strides, with a float32 accumulator. The page prints a kernel for ``a @ b``; this one reads
``B = w^T`` through ``w``'s strides, which the learner pairs with the offsets, and adds bias and
ReLU as an epilogue on the accumulator."""

from __future__ import annotations

from functools import partial

import torch

from tmm_course.exercises import products
from tmm_course.exercises.products import LONG_K, PRODUCTS, Product
from tmm_course.exercises.spec import Case, Cells, Exercise, Mistake, Output, Resize, label, same
from tmm_course.exercises.spec import ragged as ragged_axes
from tmm_course.numerics import allowed

W_AS_K_BY_N = (
    "matches relu(x @ w + bias): w was read as if it were K x N. w is stored N x K, so B = w^T "
    "takes offs_k with w.stride(1) and offs_n with w.stride(0)."
)
X_SWAPPED = (
    "matches relu(x^T @ w^T + bias): offs_m is paired with x.stride(1) and offs_k with "
    "x.stride(0). Build x's pointers with offs_m[:, None] times x.stride(0) and offs_k[None, :] "
    "times x.stride(1)."
)
OUT_SWAPPED = (
    "matches relu(x @ w^T + bias)^T: out is stored transposed, offs_m paired with out.stride(1). "
    "Build out's pointers with offs_m[:, None] times out.stride(0) and offs_n[None, :] times "
    "out.stride(1)."
)
BOTH_SWAPPED = (
    "matches relu(x^T @ w + bias): x's strides are paired with the wrong offsets and w was read "
    "as if it were K x N (w is N x K: offs_n goes with w.stride(0), offs_k with w.stride(1))."
)
MESSAGES = {
    "ragged_edge K": "mask the K lanes of both loads, x's and w's, by what is left of K, "
    "offs_k < K - k * BLOCK_K, with other=0.0 so the padding adds nothing to the sum.",
    "ragged_edge": "mask x's rows (offs_m < M) and w's rows (offs_n < N) on the loads, the K "
    "lanes of both with other=0.0, the bias load with offs_n < N, and the store.",
    "ignores_strides": "pass x's, w's and out's strides (two each) and build every pointer "
    "tile from them; w^T's element (k, n) is w[n, k], at n * w.stride(0) + k * w.stride(1), "
    "and each K step advances both tiles by BLOCK_K times their K stride.",
}


def operands(gen: torch.Generator, p: Product):
    """x (m, k), w (n, k) and bias (n,) in float16, laid out as ``p.layout`` says (a
    transposed w is a view of a K x N tensor, not a copy). Drawn again while the ReLU would
    clamp every cell of the output (a 1x1 case, half the time): a kernel that never read x or
    w would pass there."""
    while True:
        bias = torch.randn(p.n, generator=gen).half()
        x = products.operand(gen, p.m, p.k, p.layout, torch.float16, every_other="rows")
        w = products.operand(gen, p.n, p.k, p.layout, torch.float16)
        if bool((x.double() @ w.double().t() + bias.double() > 0).any()):
            return x, w, bias


def mistakes(x64, w64, bias64) -> list[Mistake]:
    """What a linear layer gets wrong, on a square case that fits one K block (where each
    stride slip equals a product of transposes exactly)."""
    relu = torch.relu
    return [
        Mistake("transposed", relu(x64 @ w64 + bias64), W_AS_K_BY_N),
        Mistake("transposed", relu(x64.t() @ w64.t() + bias64), X_SWAPPED),
        Mistake("transposed", relu(x64 @ w64.t() + bias64).t(), OUT_SWAPPED),
        Mistake("transposed", relu(x64.t() @ w64 + bias64), BOTH_SWAPPED),
        Mistake(
            "wrong_values",
            x64 @ w64.t() + bias64,
            "matches x @ w^T + bias without the ReLU: apply tl.maximum(acc, 0.0) before the store.",
        ),
        Mistake(
            "wrong_values",
            relu(x64 @ w64.t()),
            "matches relu(x @ w^T): the bias was never added. Load bias[offs_n] (masked) and add "
            "it to every row of the tile: acc + bias[None, :].",
        ),
        Mistake(
            "wrong_values",
            relu(x64 @ w64.t()) + bias64,
            "matches relu(x @ w^T) + bias: the ReLU came before the bias. Add the bias first, "
            "then take tl.maximum(acc, 0.0).",
        ),
        Mistake(
            "wrong_values",
            relu(x64 @ w64.t() + bias64[:, None]),
            "the bias was added per row (bias[offs_m]): it belongs to the output's columns, "
            "one value per output feature: bias[offs_n][None, :].",
        ),
    ]


def case(p: Product, backend: str, gen: torch.Generator) -> Case:
    x, w, bias = operands(gen, p)
    x64, w64, bias64 = x.double(), w.double(), bias.double()
    exact = torch.relu(x64 @ w64.t() + bias64)
    square = p.m == p.n == p.k and p.layout == "contiguous"
    found = mistakes(x64, w64, bias64) if square else []

    def epilogue(product: torch.Tensor) -> torch.Tensor:
        return torch.relu(product + bias64)

    # both K strides are 1 on contiguous operands, where a step that leaves the stride out
    # still lands right: that slip shows on the views only (ignores_strides' sentence)
    loop = products.k_loop_mistakes(x64, w64.t(), epilogue)
    found += [m for m in loop if m.cause != products.NO_K_STRIDE]
    return Case(
        label((p.m, p.n, p.k), p.label),
        (p.m, p.n, p.k),
        (x, w, bias),
        Output((p.m, p.n), torch.float16, products.row_gap(p.layout)),
        exact,
        atol=allowed(x64.abs() @ w64.abs().t() + bias64.abs(), torch.float16, backend),
        mistakes=found,
        ragged=ragged_axes(M=p.m, N=p.n, K=p.k),
        strided=products.strided_tensors(p.layout, ("x", "w", "out")),
        probe=products.accumulator_precision(exact) if p == LONG_K else None,
        only_if_all_passed=p == LONG_K,
        redraw=partial(case, p, backend),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    found = [case(products.resized(p, resize), backend, gen) for p in PRODUCTS]
    return [*found, case(LONG_K, backend, gen)]


EXERCISE = Exercise(
    name="linear_relu",
    lesson=4,
    function="linear_relu",
    signature="linear_relu(x, w, bias, out)",
    tensors=("x", "w", "bias", "out"),
    cases=cases,
    cells=Cells("04_tiled_matmul", "c22b", "c22c", "c22d"),
    messages=MESSAGES,
)
