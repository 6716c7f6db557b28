"""Lesson 7: ``descriptor_matmul(a, w, c)`` stores ``a @ w.T`` into ``c`` through tensor
descriptors: ``w`` is N x K, a linear layer's weight, read where it lies (a tile of it loaded as
``[BLOCK_N, BLOCK_K]`` and turned before ``tl.dot``; a transposed copy made on the host is
``host_copy``). Contiguous float16 (and one float32) operands whose rows start every 16 bytes,
ragged edges included, a float32 accumulator. Beyond the values, the kernels it launches,
compiled for an H200, must load through descriptors and copy with the TMA. The kernels lesson 7
shows (``a @ b`` with ``b`` K x N) compute something else here."""

from __future__ import annotations

import re
from functools import partial

import torch

from tmm_course.exercises import products
from tmm_course.exercises.faster import compiled_at
from tmm_course.exercises.products import Product
from tmm_course.exercises.spec import (
    Case,
    Cells,
    Exercise,
    Mistake,
    Output,
    Requirement,
    Resize,
    label,
    same,
)
from tmm_course.exercises.spec import ragged as ragged_axes
from tmm_course.numerics import allowed
from tmm_course.perf import faster

ROW_BYTES = 16  # a descriptor's rows start on 16 bytes: N and K multiples of 8 in float16
# every row a whole number of 16 bytes (K and N multiples of 8)
PRODUCTS = [
    Product("square", 64, 64, 64, "contiguous"),
    Product("one K block", 16, 16, 16, "contiguous"),
    Product("ragged M", 65, 64, 64, "contiguous"),
    Product("ragged N", 64, 72, 64, "contiguous"),
    Product("ragged K", 64, 64, 72, "contiguous"),
    Product("K smaller than a block", 64, 64, 8, "contiguous"),
    Product("tall", 304, 8, 48, "contiguous"),
    Product("skinny", 8, 304, 48, "contiguous"),
]
LONG_K = products.LONG_K

MESSAGES = {
    "ragged_edge": "a descriptor fills rows and columns outside the tensor with zeros and drops "
    "stores outside it, but only if its shape is the tensor's true shape "
    "(TensorDescriptor.from_tensor gives it): then launch triton.cdiv(M, BLOCK_M) x "
    "triton.cdiv(N, BLOCK_N) programs and loop triton.cdiv(K, BLOCK_K) times.",
}
W_AS_K_BY_N = (
    "matches a @ w: w's tile is used as if w were K x N. w is N x K: a tile of it, as it lies, "
    "is [BLOCK_N, BLOCK_K], the transpose of the [BLOCK_K, BLOCK_N] tile tl.dot needs "
    "(tl.trans turns a tile)."
)


POINTER_ACCESS = re.compile(r"\btt\.(load|store)\b")  # TTIR's pointer ops, Triton 3.6 to 3.9


def _through_descriptors(ttir: str, ptx: str) -> bool:
    """Whether a kernel loads and stores through descriptors alone: descriptor loads and a
    descriptor store in its TTIR, no pointer load or store, TMA copies in its PTX."""
    described = "tt.descriptor_load" in ttir and "tt.descriptor_store" in ttir
    return described and not POINTER_ACCESS.search(ttir) and "cp.async.bulk.tensor" in ptx


READS_THROUGH_DESCRIPTORS = Requirement(
    code="no_descriptor",
    asks="every kernel loads a and w and stores c through tensor descriptors, none through "
    "pointers (compiled for sm_90: TMA copies)",
    target="sm_90",
    shows=_through_descriptors,
    fix="a kernel loads or stores through pointers (tl.load, tl.store), or has no descriptor "
    "load and store: build TensorDescriptor.from_tensor(x, block) on the host for a, w and c, "
    "pass them, and use desc.load([row, col]) and c_desc.store([row, col], tile)",
)


def _rows_on_16_bytes(p: Product, dtype: torch.dtype) -> Product:
    """``p`` with N and K rounded up to whole 16-byte rows (a drawn size may not be)."""
    step = ROW_BYTES // torch.empty(0, dtype=dtype).element_size()
    up = lambda size: -(-size // step) * step
    return p._replace(n=up(p.n), k=up(p.k))


def case(p: Product, dtype: torch.dtype, backend: str, gen: torch.Generator) -> Case:
    a = torch.randn(p.m, p.k, generator=gen).to(dtype)
    w = torch.randn(p.n, p.k, generator=gen).to(dtype)
    a64, w64 = a.double(), w.double()
    exact = a64 @ w64.T
    mistakes = products.k_loop_mistakes(a64, w64.T)
    if p.n == p.k:  # w's tile used as loaded: a @ w
        mistakes.append(Mistake("transposed", a64 @ w64, W_AS_K_BY_N))
    return Case(
        label((p.m, p.n, p.k), f"{p.label}, {str(dtype).removeprefix('torch.')}"),
        (p.m, p.n, p.k),
        (a, w),
        Output((p.m, p.n), dtype),
        exact,
        atol=allowed(a64.abs() @ w64.abs().T, dtype, backend),
        mistakes=mistakes,
        ragged=ragged_axes(M=p.m, N=p.n, K=p.k),
        probe=products.accumulator_precision(exact) if p == LONG_K else None,
        only_if_all_passed=p == LONG_K,
        redraw=partial(case, p, dtype, backend),
    )


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    half = torch.float16
    found = [
        case(_rows_on_16_bytes(products.resized(p, resize), half), half, backend, gen)
        for p in PRODUCTS
    ]
    found.append(case(LONG_K, half, backend, gen))
    square = products.resized(PRODUCTS[0], resize)
    found.append(case(_rows_on_16_bytes(square, torch.float32), torch.float32, backend, gen))
    return found


EXERCISE = Exercise(
    name="descriptor_matmul",
    lesson=7,
    function="descriptor_matmul",
    signature="descriptor_matmul(a, w, c)",
    tensors=("a", "w", "c"),
    cases=cases,
    cells=Cells("07_persistent_tma", "pt19", "pt20", "pt21"),
    messages=MESSAGES,
    requires=READS_THROUGH_DESCRIPTORS,
    # square: the product's K x N b is an N x K w
    at_scale=compiled_at(
        (faster.SIZE,) * 3, "an H200", faster.DESCRIPTOR_TARGETS, faster.descriptor_goals
    ),
)
