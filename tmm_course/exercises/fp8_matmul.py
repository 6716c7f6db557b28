"""Lesson 10: ``fp8_matmul(a, a_scale, b, b_scale, c)`` stores ``(a * a_scale) @ (b * b_scale)``
into ``c`` (float32): ``a`` (M, K) and ``b`` (K, N) float8 e4m3, quantized by the course's
``quantize`` with one float32 scale per ``1 x 128`` block of ``a`` (``a_scale`` is
(M, cdiv(K, 128))) and per ``128 x 128`` block of ``b`` (``b_scale`` is (cdiv(K, 128),
cdiv(N, 128))), the scales applied in the K loop, accumulating in float32.

The right answer is the float64 product of the dequantized inputs; the tolerance is
:func:`tmm_course.numerics.accumulation_bound` (float32's rounding, ``K`` and the scale block)."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import torch

from tmm_course import gpus
from tmm_course.exercises import products
from tmm_course.exercises.spec import Case, Cells, Exercise, Mistake, Output, Resize, label, same
from tmm_course.exercises.spec import ragged as ragged_axes
from tmm_course.kernels.low_precision import GROUP, Quantized, quantize
from tmm_course.numerics import accumulation_bound

ONCE_PER_TILE = (
    "matches every K block scaled by the scales of the {which} K block: the scales were "
    "loaded once per tile ({where}). Each K block has its own: load a_scale[offs_m, group] "
    "and b_scale[group, offs_n // 128] inside the K loop, group = k * BLOCK_K // 128."
)
B_SCALES_TRANSPOSED = (
    "matches b_scale read transposed, the scale of B's block (k, n) taken from b_scale[n, k]: "
    "b_scale is (K/128, N/128), so the K block goes with b_scale.stride(0) and offs_n // 128 "
    "with b_scale.stride(1)."
)
A_SCALES_TRANSPOSED = (
    "matches a_scale read transposed, the scale of A's row m in K block k taken from "
    "a_scale[k, m]: a_scale is (M, K/128), so offs_m goes with a_scale.stride(0) and the K "
    "block with a_scale.stride(1)."
)
FLOAT16_SUM = (
    "matches a float16 accumulator: each K block's scaled partial sum was rounded to float16 "
    "and added in float16, which keeps 11 significant bits. Accumulate in float32: acc = "
    "tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32) and acc += tl.dot(a, b) * scales."
)
SCALES_NEVER_APPLIED = (
    "matches the product of the float8 values without their scales: multiply each K block's "
    "tl.dot(a, b) by a_scale[:, None] * b_scale[None, :] before adding it to acc."
)
ONE_SIDE_ONLY = (
    "matches each K block's tl.dot(a, b) multiplied by {used} only: {missing} was never "
    "applied. Multiply by both, {both}, before adding to acc."
)
BOTH = "a_scale[:, None] * b_scale[None, :]"
GROUP_INDEX = (
    "the K step k covers K from k * BLOCK_K on, inside the scale group k * BLOCK_K // 128: "
    "index the scales with that group, not with k. A mask would not fix it: other=0.0 would "
    "scale those K blocks by 0."
)
SCALE_GROUP_PAST = (
    "the tl.load of {tensor} read {where}, past its last K group ({tensor} has cdiv(K, 128) = "
    "{groups} along K): the scales' K-group index runs too far: " + GROUP_INDEX
)
B_SCALE_COLUMN = (
    "the tl.load of b_scale read {where}, past its end, in the same load as lanes inside it: "
    "its column index runs one per column of B, but b_scale has one column per 128 of them "
    "({cols} for this N). Index it with offs_n // 128, as its row with the K group "
    "k * BLOCK_K // 128."
)
SCALE_ROW_OR_GROUP = (
    "the tl.load of a_scale read past its last element (row {row}, column {col}; a_scale is "
    "{shape}): either its K-group index runs past cdiv(K, 128) - 1 (" + GROUP_INDEX + ") or the "
    "row mask offs_m < M is missing from that load."
)

MESSAGES = {
    **products.MESSAGES,
    "ignores_strides": "pass all ten strides (a's, a_scale's, b's, b_scale's and c's) and "
    "build every pointer from them, the scales' too.",
}


class Problem(NamedTuple):
    """One case: sizes, a layout, and what the values are drawn as."""

    label: str
    m: int
    n: int
    k: int
    layout: str  # contiguous, transposed, sliced or padded output
    values: str = "normal"  # normal, graded, outliers (blocks 1e4 times larger) or integers


PROBLEMS = [
    Problem("two rows, a scale per block", 2, 2 * GROUP, 2 * GROUP, "contiguous", "graded"),
    Problem("outlier blocks", 64, GROUP, 3 * GROUP, "contiguous", "outliers"),
    Problem("integers, scales 1 to 64 along K", 16, 32, 4 * GROUP, "contiguous", "integers"),
    Problem("1x1x1", 1, 1, 1, "contiguous"),
    Problem("K smaller than a block", 33, 40, 50, "contiguous"),
    Problem("ragged M, N and K", 65, 70, 300, "contiguous"),
    Problem("tall", 200, 4, GROUP + 16, "contiguous"),
    Problem("transposed A and B", 64, 64, 2 * GROUP, "transposed"),
    Problem("sliced A and B, scales as transposed views", 48, 64, 2 * GROUP, "sliced"),
    Problem("output with padded rows", 64, 64, 2 * GROUP, "padded output"),
]
# K far beyond every other case's, run once they pass: a K loop of a fixed trip count fails
LONG_K = Problem("long K", 16, 16, 32 * GROUP, "contiguous")


def values(gen: torch.Generator, p: Problem, rows: int, cols: int, along_k: int) -> torch.Tensor:
    """A ``rows x cols`` float32 matrix as ``p.values`` says (``along_k``: its K axis)."""
    if p.values == "integers":  # small integers, each K block twice the last: exact sums
        x = torch.randint(-2, 3, (rows, cols), generator=gen).float()
        k = torch.arange(x.shape[along_k]) // GROUP
        factor = 2.0 ** k.float()
        return x * (factor[None, :] if along_k == 1 else factor[:, None])
    x = torch.randn(rows, cols, generator=gen)
    if p.values == "graded":  # each scale block its own power of two, 2**(3 * row + column)
        first = torch.arange(rows) // (1 if along_k == 1 else GROUP)  # A's row, B's K block
        second = torch.arange(cols) // GROUP  # A's K block, B's N block
        return x * torch.exp2(3.0 * first[:, None] + second[None, :])
    if p.values == "outliers":  # one K block of every other row block 1e4 times larger
        if along_k == 1:
            x[::2, GROUP : 2 * GROUP] *= 1e4
        else:
            x[: min(GROUP, rows), :] *= 1e4
    return x


def laid_out(q: Quantized, layout: str, which: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A quantized operand's values and scales under ``layout`` (the same numbers)."""
    v, s = q.values, q.scales
    if layout == "transposed":
        return v.t().contiguous().t(), s
    if layout == "sliced":
        wide = torch.zeros(v.shape[0], 2 * v.shape[1], dtype=v.dtype)
        wide[:, ::2] = v
        if which == "a":
            tall = torch.zeros(2 * v.shape[0], v.shape[1], dtype=v.dtype)
            tall[::2] = v
            return tall[::2], s.t().contiguous().t()
        return wide[:, ::2], s.t().contiguous().t()
    return v, s


Parts = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def per_block(aq: Quantized, bq: Quantized) -> Parts:
    """For each K block: the unscaled float64 partial product and the two scales (A's per
    row, B's per column)."""
    a, b = aq.values.double(), bq.values.double()
    k, n = a.shape[1], b.shape[1]
    found = []
    for start in range(0, k, GROUP):
        j = start // GROUP
        part = a[:, start : start + GROUP] @ b[start : start + GROUP]
        sb = bq.scales.double()[j].repeat_interleave(GROUP)[:n]
        found.append((part, aq.scales.double()[:, j], sb))
    return found


def mistakes(aq: Quantized, bq: Quantized, integers: bool) -> list[Mistake]:
    """What a block-scaled K loop gets wrong, computed from the same float8 values."""
    parts = per_block(aq, bq)
    if not parts:
        return []
    n = bq.values.shape[1]
    found = [
        Mistake("wrong_values", sum(p for p, _, _ in parts), SCALES_NEVER_APPLIED),
        Mistake("wrong_values", sum(p * sa[:, None] for p, sa, _ in parts),
                ONE_SIDE_ONLY.format(used="a_scale", missing="b_scale", both=BOTH)),
        Mistake("wrong_values", sum(p * sb[None, :] for p, _, sb in parts),
                ONE_SIDE_ONLY.format(used="b_scale", missing="a_scale", both=BOTH)),
    ]  # fmt: skip
    if len(parts) > 1:
        for which, (_, sa, sb), where in (
            ("first", parts[0], "before the K loop"),
            ("last", parts[-1], "after the K loop"),
        ):
            value = sum(p for p, _, _ in parts) * sa[:, None] * sb[None, :]
            found.append(
                Mistake("wrong_values", value, ONCE_PER_TILE.format(which=which, where=where))
            )
    if bq.scales.shape[0] == bq.scales.shape[1] > 1:
        flipped = bq.scales.double().t()
        value = sum(p * sa[:, None] * flipped[j].repeat_interleave(GROUP)[:n][None, :]
                    for j, (p, sa, _) in enumerate(parts))  # fmt: skip
        found.append(Mistake("transposed", value, B_SCALES_TRANSPOSED))
    if aq.scales.shape[0] == aq.scales.shape[1] > 1:
        flipped = aq.scales.double().t()
        value = sum(p * flipped[:, j][:, None] * sb[None, :]
                    for j, (p, _, sb) in enumerate(parts))  # fmt: skip
        found.append(Mistake("transposed", value, A_SCALES_TRANSPOSED))
    if integers:  # every partial sum exact: a float16 running sum is known to the bit
        found += [Mistake("precision", float16_sum(aq, bq, step), FLOAT16_SUM)
                  for step in (32, 64, GROUP)]  # fmt: skip
    return found


def float16_sum(aq: Quantized, bq: Quantized, step: int) -> torch.Tensor:
    """The product a K loop of ``step`` (a BLOCK_K) computes when it adds each step's scaled
    float32 partial sum, rounded to float16, to a float16 accumulator."""
    a, b = aq.values.double(), bq.values.double()
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16)
    for start in range(0, a.shape[1], step):
        j = start // GROUP
        sb = bq.scales.double()[j].repeat_interleave(GROUP)[: b.shape[1]]
        part = a[:, start : start + step] @ b[start : start + step]
        scaled = (part * aq.scales.double()[:, j][:, None] * sb[None, :]).half()
        acc = (acc.double() + scaled.double()).half()
    return acc.double()


def scale_group_stray(stray) -> tuple[str, bool] | None:
    """The sentence for a load past a scale tensor's K groups (a_scale's columns, b_scale's
    rows: only the group index moves along them), ambiguous where a_scale's storage ends and a
    missing row mask would stray there too; for b_scale read past its end by a load whose other
    lanes landed inside, its column index (offs_n where offs_n // 128 belongs: it runs across
    the storage's end, where a K group past the last lands a whole row out); None for any
    other stray."""
    if stray.tensor not in ("a_scale", "b_scale") or stray.cell is None or len(stray.shape) != 2:
        return None
    row, col = stray.cell
    rows, cols = stray.shape
    if stray.tensor == "b_scale" and row >= rows and stray.straddles:
        return B_SCALE_COLUMN.format(where=f"row {row}, column {col}", cols=cols), False
    if stray.tensor == "b_scale" and row >= rows:
        where = f"row {row}"
        return SCALE_GROUP_PAST.format(tensor="b_scale", where=where, groups=rows), False
    if stray.tensor == "a_scale" and 0 <= row < rows and col >= cols:
        where = f"column {col} of row {row}"
        return SCALE_GROUP_PAST.format(tensor="a_scale", where=where, groups=cols), False
    if stray.tensor == "a_scale" and row >= rows:
        return SCALE_ROW_OR_GROUP.format(row=row, col=col, shape=(rows, cols)), True
    return None


def case(p: Problem, backend: str, gen: torch.Generator) -> Case:
    a32 = values(gen, p, p.m, p.k, along_k=1)
    b32 = values(gen, p, p.k, p.n, along_k=0)
    aq, bq = quantize(a32, (1, GROUP)), quantize(b32, (GROUP, GROUP))
    a, a_scale = laid_out(aq, p.layout, "a")
    b, b_scale = laid_out(bq, p.layout, "b")
    a64, b64 = aq.dequantized(), bq.dequantized()
    return Case(
        label((p.m, p.n, p.k), p.label),
        (p.m, p.n, p.k),
        (a, a_scale, b, b_scale),
        Output((p.m, p.n), torch.float32, products.row_gap(p.layout)),
        a64 @ b64,
        atol=accumulation_bound(p.k, GROUP, backend) * (a64.abs() @ b64.abs()),
        mistakes=mistakes(aq, bq, p.values == "integers"),
        ragged=ragged_axes(M=p.m, N=p.n, K=p.k),
        strided=products.strided_tensors(p.layout)
        + (("a_scale", "b_scale") if p.layout == "sliced" else ()),
        only_if_all_passed=p == LONG_K,
        redraw=partial(case, p, backend),
    )


def resized(p: Problem, resize: Resize) -> Problem:
    """``p`` with drawn sizes; the cases whose mistakes need their shape keep theirs."""
    if p.values != "normal" or p.m == 2:
        return p
    m, n, k = resize((p.m, p.n, p.k))
    return p._replace(m=m, n=n, k=k)


def cases(gen: torch.Generator, backend: str, resize: Resize = same) -> list[Case]:
    return [case(resized(p, resize), backend, gen) for p in PROBLEMS] + [case(LONG_K, backend, gen)]


EXERCISE = Exercise(
    name="fp8_matmul",
    lesson=10,
    function="fp8_matmul",
    signature="fp8_matmul(a, a_scale, b, b_scale, c)",
    tensors=("a", "a_scale", "b", "b_scale", "c"),
    cases=cases,
    cells=Cells("10_low_precision", "lp20", "lp21", "lp22"),
    messages=MESSAGES,
    stray_cause=scale_group_stray,
    # float8 tiles compile only where the GPU has float8 tensor cores
    gpus=tuple(target for target, card in gpus.TARGETS.items() if gpus.CARDS[card].fp8),
    converts=False,  # a and b turned float16 on the host would skip the float8 product
)
