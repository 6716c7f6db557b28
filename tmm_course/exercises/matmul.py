"""``my_matmul(a, b, c)`` stores ``a @ b`` into ``c`` (float16; the last case also float32), for
any shapes and strides, with a float32 accumulator: lesson 4's kernel, the product lessons 8
and 9 judge (lesson 4's own exercise is :mod:`~tmm_course.exercises.linear_relu`)."""

from __future__ import annotations

from functools import partial

import torch

from tmm_course.exercises import products
from tmm_course.exercises.products import LONG_K, PRODUCTS, Product
from tmm_course.exercises.spec import Case, Exercise, Output, Resize, label, same
from tmm_course.exercises.spec import ragged as ragged_axes
from tmm_course.numerics import allowed


def case(p: Product, dtype: torch.dtype, backend: str, gen: torch.Generator) -> Case:
    a, b = products.operands(gen, p, dtype)
    a64, b64 = a.double(), b.double()
    exact = a64 @ b64
    mistakes = (
        products.stride_mistakes(a64, b64) if p.m == p.n == p.k and p.layout == "contiguous" else []
    )
    mistakes += products.k_loop_mistakes(a64, b64)
    return Case(
        label((p.m, p.n, p.k), f"{p.label}, {str(dtype).removeprefix('torch.')}"),
        (p.m, p.n, p.k),
        (a, b),
        Output((p.m, p.n), dtype, products.row_gap(p.layout)),
        exact,
        atol=allowed(a64.abs() @ b64.abs(), dtype, backend),
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
    name="matmul",
    lesson=4,
    function="my_matmul",
    signature="my_matmul(a, b, c)",
    tensors=("a", "b", "c"),
    cases=cases,
    messages=products.MESSAGES,
)
