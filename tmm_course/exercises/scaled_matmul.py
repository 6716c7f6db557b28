"""Lesson 5's homework, part 4: ``scaled_matmul(a, b, c, alpha, beta)`` updates ``c`` to
``alpha * a @ b + beta * c``. One case has ``beta = 0`` and ``c`` full of NaN: as in BLAS,
``c`` must then not be read."""

from __future__ import annotations

from functools import partial

import torch

from tmm_course.exercises import products
from tmm_course.exercises.products import LONG_K, PRODUCTS, Product
from tmm_course.exercises.spec import Case, Cells, Exercise, Mistake, Output, Resize, label, same
from tmm_course.exercises.spec import ragged as ragged_axes
from tmm_course.numerics import allowed

ALPHA, BETA = 1.5, -0.5
NO_BETA_C = (
    "matches alpha * A @ B alone: beta * C was never added. Load the old C (converted to "
    "float32) and add beta times it before the store."
)
NO_ALPHA = "matches A @ B + beta * C: the product was not scaled by alpha."
SWAPPED = (
    "matches beta * A @ B + alpha * C: alpha and beta are swapped between the launch and the "
    "kernel. Pass them in the order the kernel takes them."
)

ALPHA_ON_BOTH = (
    "matches alpha * (A @ B + beta * C): alpha scales beta * C too. Scale the product alone, "
    "alpha * acc, and then add beta * C."
)
ALPHA_ON_C = (
    "matches A @ B + alpha * beta * C: alpha scales the C term instead of the product. Apply "
    "alpha to acc (alpha * acc) and beta alone to C."
)
BETA_ON_BOTH = (
    "matches beta * (alpha * A @ B + C): beta scales the product too. Add beta * C to "
    "alpha * acc, not multiply the sum by beta."
)
NO_BETA = "matches alpha * A @ B + C: C was added without beta. Add beta * C."
ALPHA_EVERY_STEP = (
    "matches a sum multiplied by alpha at every step of the K loop: alpha scales the running "
    "acc inside the loop (acc = tl.dot(a, b, acc) * alpha), so the first K-slab is scaled once "
    "per step. Scale once, after the loop: alpha * acc."
)


def _alpha_every_step(a64: torch.Tensor, b64: torch.Tensor, alpha: float, block: int):
    """What a K loop of ``block`` stores when each step multiplies the running sum by alpha."""
    acc = torch.zeros(a64.shape[0], b64.shape[1], dtype=torch.float64)
    for k in range(0, a64.shape[1], block):
        acc = (acc + a64[:, k : k + block] @ b64[k : k + block]) * alpha
    return acc


def case(p: Product, alpha: float, beta: float, backend: str, gen: torch.Generator) -> Case:
    a, b = products.operands(gen, p, torch.float16)
    c0 = torch.randn(p.m, p.n, generator=gen).half()
    a64, b64, c64 = a.double(), b.double(), c0.double()
    bound = allowed(
        abs(alpha) * (a64.abs() @ b64.abs()) + abs(beta) * c64.abs(), torch.float16, backend
    )
    expected = alpha * (a64 @ b64) + beta * c64
    mistakes = [
        Mistake("wrong_values", alpha * (a64 @ b64), NO_BETA_C),
        Mistake("wrong_values", a64 @ b64 + beta * c64, NO_ALPHA),
        Mistake("wrong_values", alpha * (a64 @ b64 + beta * c64), ALPHA_ON_BOTH),
        Mistake("wrong_values", a64 @ b64 + alpha * beta * c64, ALPHA_ON_C),
        Mistake("wrong_values", beta * (alpha * (a64 @ b64) + c64), BETA_ON_BOTH),
        Mistake("wrong_values", alpha * (a64 @ b64) + c64, NO_BETA),
    ]
    if alpha != beta:
        mistakes.append(
            Mistake(
                "wrong_values",
                beta * (a64 @ b64) + alpha * c64,
                SWAPPED,
                explains=("reads_c_when_beta_zero",),
            )
        )

    def scale(product: torch.Tensor) -> torch.Tensor:
        return alpha * product + beta * c64

    if p.m == p.n == p.k and p.layout == "contiguous":
        mistakes += products.stride_mistakes(a64, b64, scale)
    mistakes += products.k_loop_mistakes(a64, b64, scale)
    for block in (b for b in products.BLOCK_K_GUESSES if p.k > b):
        every_step = _alpha_every_step(a64, b64, alpha, block) + beta * c64
        mistakes.append(Mistake("wrong_values", every_step, ALPHA_EVERY_STEP))
    return Case(
        label((p.m, p.n, p.k), p.label),
        (p.m, p.n, p.k),
        (a, b, alpha, beta),
        Output((p.m, p.n), torch.float16, products.row_gap(p.layout)),
        expected,
        atol=bound,
        mistakes=mistakes,
        ragged=ragged_axes(M=p.m, N=p.n, K=p.k),
        strided=products.strided_tensors(p.layout),
        initial=c0,
        probe=products.accumulator_precision(expected) if p == LONG_K else None,
        only_if_all_passed=p == LONG_K,
        redraw=partial(case, p, alpha, beta, backend),
    )


def beta_zero(alpha: float, backend: str, gen: torch.Generator) -> Case:
    """beta = 0 with C full of NaN: C must not be read (0 * NaN is NaN)."""
    a, b = products.operands(gen, PRODUCTS[0], torch.float16)
    a64, b64 = a.double(), b.double()
    return Case(
        "64x64x64 beta = 0, C holds NaN",
        (64, 64, 64),
        (a, b, alpha, 0.0),
        Output((64, 64), torch.float16),
        alpha * (a64 @ b64),
        atol=allowed(abs(alpha) * (a64.abs() @ b64.abs()), torch.float16, backend),
        output_must_not_be_read=True,
        redraw=partial(beta_zero, alpha, backend),
    )


def family(alpha: float = ALPHA, beta: float = BETA):
    def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
        drawn = [products.resized(p, resize) for p in PRODUCTS]
        found = [case(p, alpha, beta, backend, gen) for p in [*drawn, LONG_K]]
        found.insert(len(found) - 1, beta_zero(alpha, backend, gen))
        return found

    return cases


EXERCISE = Exercise(
    name="scaled_matmul",
    lesson=5,
    function="scaled_matmul",
    signature="scaled_matmul(a, b, c, alpha, beta)",
    tensors=("a", "b", "c"),
    cases=family(),
    cells=Cells("05_homework_transpose", "c17", "c18", "c19"),
    messages=products.MESSAGES,
    call=(0, 1, 4, 2, 3),  # fn(a, b, c, alpha, beta) from (a, b, alpha, beta) and c
)
