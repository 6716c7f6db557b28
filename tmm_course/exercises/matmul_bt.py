"""Lesson 4's first exercise: ``my_matmul_bt(a, b, c)`` stores ``a @ b.T`` into ``c``, with
``b`` N x K as a linear layer stores its weight (float16; the last case also float32), for
any shapes and strides, with a float32 accumulator. The page prints a kernel for ``a @ b``;
this one reads ``B = b^T`` through ``b``'s strides, which the learner derives."""

from __future__ import annotations

from functools import partial

import torch

from tmm_course.exercises import products
from tmm_course.exercises.products import LONG_K, PRODUCTS, Product
from tmm_course.exercises.spec import Case, Cells, Exercise, Mistake, Output, Resize, label, same
from tmm_course.exercises.spec import ragged as ragged_axes
from tmm_course.numerics import allowed

B_AS_K_BY_N = (
    "matches A @ b: b was read as if it were K x N, as lesson 4's kernel reads its B. b is "
    "N x K, so B = b^T's element (k, n) is b[n, k]: pair offs_n with b.stride(0) (stride_bn) "
    "and offs_k with b.stride(1) (stride_bk), in b's pointer tile and in the launch."
)
A_SWAPPED = (
    "matches A^T b^T: offs_m is paired with stride_ak and offs_k with stride_am. Build a's "
    "pointers as offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak."
)
C_SWAPPED = (
    "matches (A b^T)^T: C is stored transposed, offs_m paired with stride_cn. Build c's "
    "pointers as offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn."
)
BOTH_SWAPPED = (
    "matches A^T b: a's strides are paired with the wrong offsets and b was read as if it were "
    "K x N (b is N x K: offs_n goes with b.stride(0), offs_k with b.stride(1))."
)
MESSAGES = {
    **products.MESSAGES,
    "ragged_edge K": "mask the K lanes of both loads by what is left of K, offs_k < K - k * "
    "BLOCK_K, with other=0.0 so the padding adds nothing to the sum.",
    "ragged_edge": "mask a's rows (offs_m < M) and b's rows (offs_n < N: b is N x K) on the "
    "loads, the K lanes of both with other=0.0, and the store with rows and columns.",
    "ignores_strides": "pass all six strides (a.stride(0), a.stride(1), b.stride(0) for N, "
    "b.stride(1) for K, c.stride(0), c.stride(1)) and build every pointer tile from them: "
    "B = b^T's element (k, n) is b[n, k], at n * b.stride(0) + k * b.stride(1), and each K "
    "step advances both tiles by BLOCK_K times their K stride.",
}


def operands(gen: torch.Generator, p: Product, dtype: torch.dtype):
    """a (M x K) and b (N x K), each built in ``p.layout`` (a transposed b is a view of a
    K x N tensor, not a copy)."""
    a = products.operand(gen, p.m, p.k, p.layout, dtype, every_other="rows")
    return a, products.operand(gen, p.n, p.k, p.layout, dtype)


def stride_mistakes(a64: torch.Tensor, b64: torch.Tensor) -> list[Mistake]:
    """The stride pairings this product gets wrong, for a square case that fits one K block
    (where each equals a product of transposes exactly)."""
    return [
        Mistake("transposed", a64 @ b64, B_AS_K_BY_N),
        Mistake("transposed", a64.t() @ b64.t(), A_SWAPPED),
        Mistake("transposed", (a64 @ b64.t()).t(), C_SWAPPED),
        Mistake("transposed", a64.t() @ b64, BOTH_SWAPPED),
    ]


def case(p: Product, dtype: torch.dtype, backend: str, gen: torch.Generator) -> Case:
    a, b = operands(gen, p, dtype)
    a64, bt64 = a.double(), b.double().t()
    exact = a64 @ bt64
    square = p.m == p.n == p.k and p.layout == "contiguous"
    mistakes = stride_mistakes(a64, bt64.t()) if square else []
    # both K strides are 1 on contiguous operands, where a step that leaves the stride out
    # still lands right: that slip shows on the views only (ignores_strides' sentence)
    mistakes += [m for m in products.k_loop_mistakes(a64, bt64) if m.cause != products.NO_K_STRIDE]
    return Case(
        label((p.m, p.n, p.k), f"{p.label}, {str(dtype).removeprefix('torch.')}"),
        (p.m, p.n, p.k),
        (a, b),
        Output((p.m, p.n), dtype, products.row_gap(p.layout)),
        exact,
        atol=allowed(a64.abs() @ bt64.abs(), dtype, backend),
        mistakes=mistakes,
        ragged=ragged_axes(M=p.m, N=p.n, K=p.k),
        strided=products.strided_tensors(p.layout),
        probe=products.accumulator_precision(exact) if p == LONG_K else None,
        only_if_all_passed=p == LONG_K,
        redraw=partial(case, p, dtype, backend),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    found = [case(products.resized(p, resize), torch.float16, backend, gen) for p in PRODUCTS]
    found.append(case(LONG_K, torch.float16, backend, gen))
    # last: a GPU refuses some kernels on float32 only, which must not hide the probe above
    found.append(case(products.resized(PRODUCTS[0], resize), torch.float32, backend, gen))
    return found


EXERCISE = Exercise(
    name="matmul_bt",
    lesson=4,
    function="my_matmul_bt",
    signature="my_matmul_bt(a, b, c)",
    tensors=("a", "b", "c"),
    cases=cases,
    cells=Cells("04_tiled_matmul", "c19", "c20", "c21"),
    messages=MESSAGES,
)
