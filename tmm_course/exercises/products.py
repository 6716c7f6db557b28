"""What the matrix-product exercises share (lesson 4's matmul, its linear-layer variant, lesson
5's scaled matmul, lesson 9's repairs): the products they run, how A and B are laid out, the
mistakes a product's strides and K loop make, and the long-K probe of the accumulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from tmm_course.exercises.spec import Mistake, Probe


class Product(NamedTuple):
    """One product a check runs: M x K times K x N, under a layout."""

    label: str
    m: int
    n: int
    k: int
    layout: str  # contiguous, transposed, sliced or padded output


PRODUCTS = [
    Product("square", 64, 64, 64, "contiguous"),
    Product("one K block", 16, 16, 16, "contiguous"),
    Product("1x1x1", 1, 1, 1, "contiguous"),
    Product("ragged M", 65, 64, 64, "contiguous"),
    Product("ragged N", 64, 65, 64, "contiguous"),
    Product("ragged K", 64, 64, 65, "contiguous"),
    Product("K smaller than a block", 64, 64, 7, "contiguous"),
    Product("tall", 300, 4, 48, "contiguous"),
    Product("skinny", 4, 300, 48, "contiguous"),
    Product("transposed A and B", 64, 64, 64, "transposed"),
    Product("sliced A and B", 64, 64, 64, "sliced"),
    Product("output with padded rows", 64, 64, 64, "padded output"),
]
PRECISION_PROBE_K = 4096
LONG_K = Product("long K", 16, 16, PRECISION_PROBE_K, "contiguous")
FLOAT32_ACCUMULATOR_RMS = 6e-4  # float16 output of a float32 sum: about 2e-4 at any K
PADDED_ROW_GAP = 3  # the gap between the output's rows in the "padded output" layout

MESSAGES = {
    "ragged_edge K": "mask the K lanes of both loads, (offs_k[None, :] < K - k * BLOCK_K) for "
    "A and (offs_k[:, None] < K - k * BLOCK_K) for B, with other=0.0 so the padding adds "
    "nothing to the sum.",
    "ragged_edge": "mask A's rows (offs_m < M) and B's columns (offs_n < N) on the loads, the "
    "K lanes of both with other=0.0, and the store with rows and columns.",
    "ignores_strides": "pass all six strides (a.stride(0), a.stride(1), b..., c...) and build "
    "every pointer tile from them.",
}


def resized(p: Product, resize) -> Product:
    """``p`` with the sizes ``resize`` draws (``spec.same`` keeps them)."""
    m, n, k = resize((p.m, p.n, p.k))
    return p._replace(m=m, n=n, k=k)


def operand(gen: torch.Generator, rows: int, cols: int, layout: str, dtype: torch.dtype,
            every_other: str = "columns") -> torch.Tensor:  # fmt: skip
    """A ``rows x cols`` operand under a product's layout: contiguous, transposed (a view of
    its transpose) or sliced (every other row and a column window of a wider tensor for the
    left operand, ``every_other="rows"``; every other column for the right one)."""
    if layout == "transposed":
        return torch.randn(cols, rows, generator=gen).to(dtype).t()
    if layout == "sliced":
        if every_other == "rows":
            return torch.randn(2 * rows, cols + 3, generator=gen).to(dtype)[::2, 2 : cols + 2]
        return torch.randn(rows, 2 * cols, generator=gen).to(dtype)[:, ::2]
    return torch.randn(rows, cols, generator=gen).to(dtype)


def operands(gen: torch.Generator, p: Product, dtype: torch.dtype):
    """A (M x K) and B (K x N) for product ``p``."""
    return (
        operand(gen, p.m, p.k, p.layout, dtype, every_other="rows"),
        operand(gen, p.k, p.n, p.layout, dtype),
    )


def strided_tensors(layout: str, names: tuple[str, str, str] = ("a", "b", "c")) -> tuple[str, ...]:
    """Which of a product's tensors (A, B, the output: ``names``) a layout makes
    non-contiguous."""
    inputs, output = names[:2], names[2:]
    return {"transposed": inputs, "sliced": inputs, "padded output": output}.get(layout, ())


def row_gap(layout: str) -> int:
    return PADDED_ROW_GAP if layout == "padded output" else 0


def stride_mistakes(a64: torch.Tensor, b64: torch.Tensor, scale=lambda p: p) -> list[Mistake]:
    """The stride pairings a matmul gets wrong, for a square case that fits one K block (where
    each equals a product of transposes exactly)."""
    return [
        Mistake(
            "transposed",
            scale(a64.t() @ b64),
            "matches A^T B: offs_m is paired with stride_ak and offs_k with stride_am. Build "
            "a_ptrs as offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak.",
        ),
        Mistake(
            "transposed",
            scale(a64 @ b64.t()),
            "matches A B^T: offs_k is paired with stride_bn and offs_n with stride_bk. Build "
            "b_ptrs as offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn.",
        ),
        Mistake(
            "transposed",
            scale((a64 @ b64).t()),
            "matches (AB)^T: C is stored transposed, offs_m paired with stride_cn. Build c_ptrs "
            "as offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn.",
        ),
        Mistake(
            "transposed",
            scale(a64.t() @ b64.t()),
            "matches A^T B^T: the strides of both A and B are paired with the wrong offsets.",
        ),
    ]


BLOCK_K_GUESSES = (16, 32, 64, 128)  # the BLOCK_K a K-loop mistake is tried with
SHORT_K_LOOP = (
    "the K loop runs K // BLOCK_K times, so the last, partial K-slab is never added (the K "
    "masks are fine): loop for k in range(0, tl.cdiv(K, BLOCK_K))."
)
MASKED_LAST_SLAB = (
    "the last, partial K-slab never reached the sum: the loop reaches it, but the K mask "
    "switches off every lane of it. Mask each step's K lanes by what is left of K, "
    "offs_k < K - k * BLOCK_K (A's as offs_k[None, :], B's as offs_k[:, None])."
)


SHORT_K_SUM = (
    "the last, partial K-slab never reached the sum: either the K loop runs K // BLOCK_K "
    "times (loop for k in range(0, tl.cdiv(K, BLOCK_K))) or the K mask switches off every lane "
    "of that slab (mask each step's K lanes with offs_k < K - k * BLOCK_K)."
)


def short_k_cause(trace) -> str:
    """Which of the two gave a short K sum, from the memory guard's record: a mask that drops
    the last slab leaves loads whose every lane was masked off, a loop that stops early
    none."""
    return MASKED_LAST_SLAB if getattr(trace, "loads_masked_off", 0) else SHORT_K_LOOP


ONLY_LAST_SLAB = (
    "only the last K-slab reached C: the sum starts again at every step (acc = tl.dot(a, b), "
    "or acc = tl.zeros(...) inside the loop). Make acc once, before the loop, and accumulate: "
    "acc = tl.dot(a, b, acc) (or acc += tl.dot(a, b))."
)
FIRST_SLAB_AGAIN = (
    "every step reloads the first K-slab: the pointers never move along K. At the end of each "
    "step advance them: a_ptrs += BLOCK_K * stride_ak and b_ptrs += BLOCK_K * stride_bk."
)

NO_K_STRIDE = (
    "b_ptrs moves BLOCK_K elements along a row of B at each step, not BLOCK_K rows down: the "
    "K loop advances the pointers without the stride. Advance them by the K axis's stride: "
    "a_ptrs += BLOCK_K * stride_ak and b_ptrs += BLOCK_K * stride_bk."
)

K_STRIDE_EXPLAINS = ("out_of_bounds_read", "ignores_strides")


def _without_k_stride(a64: torch.Tensor, b64: torch.Tensor, block: int) -> torch.Tensor:
    """A @ B as a K loop computes it whose pointers advance BLOCK_K elements, not BLOCK_K
    times the K stride (row-major operands: A's step is right, B's walks along its rows);
    a lane past B's last element reads 0 (the check does not perform it)."""
    k, n = b64.shape
    rows = torch.arange(k)  # the K index each row of the slab stands for
    step, kk = rows // block, rows % block
    index = kk[:, None] * n + torch.arange(n)[None, :] + (step * block)[:, None]
    flat = b64.reshape(-1)
    read = torch.where(index < flat.numel(), flat[index.clamp(max=flat.numel() - 1)], 0.0)
    return a64 @ read


def k_loop_mistakes(a64: torch.Tensor, b64: torch.Tensor, scale=lambda p: p) -> list[Mistake]:
    """What a K loop gets wrong, for each BLOCK_K a learner may have chosen: too few trips,
    a sum that restarts, pointers that never advance (``scale`` turns a product into what
    the exercise stores)."""
    k = a64.shape[1]
    wrong = []
    for block in BLOCK_K_GUESSES:
        full, rest = divmod(k, block)
        trips = full + (rest > 0)
        if rest:
            short = a64[:, : full * block] @ b64[: full * block]
            wrong.append(Mistake("ragged_edge", scale(short), SHORT_K_SUM, ambiguous=True,
                                 refine=short_k_cause))  # fmt: skip
        if trips > 1:
            last = (trips - 1) * block
            wrong.append(Mistake("wrong_values", scale(a64[:, last:] @ b64[last:]), ONLY_LAST_SLAB))
            again = full * (a64[:, :block] @ b64[:block]) + a64[:, :rest] @ b64[:rest]
            wrong.append(Mistake("wrong_values", scale(again), FIRST_SLAB_AGAIN))
            # strided operands go wrong too (or read between their cells): the K stride
            # left out of the step is the cause there as well
            stepped = scale(_without_k_stride(a64, b64, block))
            wrong.append(Mistake("wrong_values", stepped, NO_K_STRIDE, explains=K_STRIDE_EXPLAINS))
    return wrong


def accumulator_precision(exact: torch.Tensor) -> Probe:
    """On the long-K probe: an error against ``exact`` that a float32 accumulator would not
    make (rms error over rms value)."""

    def judge(out: torch.Tensor, *_: object) -> tuple[str, str] | None:
        exact_here = exact.to(out.device)
        error = float(
            (out.double() - exact_here).pow(2).mean().sqrt() / exact_here.pow(2).mean().sqrt()
        )
        if error > FLOAT32_ACCUMULATOR_RMS:
            return "precision", (
                f"rms error {error:.1e} at K={PRECISION_PROBE_K}; a float32 accumulator stays "
                "near 2e-4"
            )
        return None

    return judge


Scale = Callable[[torch.Tensor], torch.Tensor]
