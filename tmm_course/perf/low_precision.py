"""Lesson 10's race on a GPU: the course's block-scaled float8 kernel against
``torch._scaled_mm`` (cuBLASLt's float8 GEMM) and against the bfloat16 ``torch.matmul``, at
``4096^3`` and two layers of a Llama 3 8B MLP, interleaved, with each one's error against the
float64 product of the unquantized inputs; and ``tl.dot_scaled`` on MXFP8 (emulated on Hopper).

    python -m tmm_course.perf.low_precision --code-version "$(git rev-parse --short HEAD)" \\
        --out low_precision_mine.json

The lesson draws the file the package ships (``low_precision_h100.json``), where it ships one, on
machines without a GPU.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from tmm_course.kernels import low_precision as lp
from tmm_course.numerics import accumulation_bound
from tmm_course.perf import results

FILE = "low_precision_h100.json"
# (label, M, N, K): a square, and the up and down projections of a Llama 3 8B MLP layer on a
# batch of 4096 tokens
SHAPES = [
    ("4096^3", 4096, 4096, 4096),
    ("Llama 3 8B MLP up, 4096 tokens", 4096, 14336, 4096),
    ("Llama 3 8B MLP down, 4096 tokens", 4096, 4096, 14336),
]
# the course kernel's tiles on a GPU: lesson 6's 128 x 128 with a K step of one scale block
BLOCKS = {"block_m": 128, "block_n": 128, "block_k": 128, "num_warps": 8, "num_stages": 3}
# how torch._scaled_mm may take scales, tried in this order: the first that runs and matches
# the float64 product of its own dequantized inputs is raced (torch reads the recipe from the
# scales' shapes; its blockwise kernels want A's scales M-major, and this tries both layouts
# of B's; builds without blockwise kernels take one scale per row, or per tensor)
RECIPES = ("blockwise 1x128 and 128x128, B's scales N-major",
           "blockwise 1x128 and 128x128, B's scales K-major",
           "one scale per row of A and column of B", "one scale per tensor")  # fmt: skip


def relative_error(c: torch.Tensor, exact: torch.Tensor, scale: torch.Tensor) -> float:
    """max |C - exact| / (|A| @ |B|), as :func:`tmm_course.numerics.error` measures."""
    return float(((c.double() - exact).abs() / scale.clamp_min(1e-300)).max())


def scaled_mm(a: torch.Tensor, b: torch.Tensor, recipe: str
              ) -> tuple[Callable[[], torch.Tensor], torch.Tensor, torch.Tensor]:  # fmt: skip
    """``torch._scaled_mm`` on ``a`` (M, K) and ``b`` (K, N) quantized as ``recipe`` says (B
    column-major, as cuBLASLt wants it); with the float64 product of those dequantized inputs
    and its ``|A| @ |B|``, to check that torch read the scales as meant."""
    blocks = {RECIPES[0]: ((1, lp.GROUP), (lp.GROUP, lp.GROUP)),
              RECIPES[1]: ((1, lp.GROUP), (lp.GROUP, lp.GROUP)),
              RECIPES[2]: ((1, a.shape[1]), (b.shape[0], 1)),
              RECIPES[3]: (tuple(a.shape), tuple(b.shape))}[recipe]  # fmt: skip
    aq, bq = lp.quantize(a, blocks[0]), lp.quantize(b, blocks[1])
    scale_a, scale_b = aq.scales, bq.scales
    if recipe in RECIPES[:2]:
        scale_a = scale_a.t().contiguous().t()  # M-major
        if recipe == RECIPES[1]:
            scale_b = scale_b.t().contiguous().t()
    elif recipe == RECIPES[3]:
        scale_a, scale_b = scale_a.reshape(()), scale_b.reshape(())
    b_values = bq.values.t().contiguous().t()
    run = lambda: torch._scaled_mm(
        aq.values, b_values, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16
    )
    a64, b64 = aq.dequantized(), bq.dequantized()
    return run, a64 @ b64, a64.abs() @ b64.abs()


def race_shape(label: str, m: int, n: int, k: int) -> dict:
    """One shape: every contender's median ms (interleaved), ratio to bf16 torch.matmul and
    to torch._scaled_mm, TFLOP/s and error against float64."""
    from tmm_course.timing import interleaved

    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    exact = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    aq, bq = lp.quantize(a, (1, lp.GROUP)), lp.quantize(b, (lp.GROUP, lp.GROUP))
    b_kmajor = bq.values.t().contiguous().t()  # the layout torch._scaled_mm takes, for both
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    course = lambda: lp.fp8_matmul(aq.values, aq.scales, b_kmajor, bq.scales, out=out, **BLOCKS)
    a16, b16 = a.bfloat16(), b.bfloat16()
    contenders: dict[str, Callable[[], torch.Tensor]] = {
        "course fp8 kernel": course,
        "torch.matmul bf16": lambda: a16 @ b16,
    }
    course_out = course().clone()
    tried = {}
    for recipe in RECIPES:
        try:
            candidate, own, own_scale = scaled_mm(a, b, recipe)
            own_error = relative_error(candidate(), own, own_scale)
        except (RuntimeError, ValueError) as error:
            tried[recipe] = str(error).strip().splitlines()[0][:200]
            continue
        if own_error > 1e-2:  # bfloat16's output rounding is 2**-9: scales misread
            tried[recipe] = f"ran, error {own_error:.1e} against its dequantized inputs"
            continue
        contenders["torch._scaled_mm"] = candidate
        tried[recipe] = "raced"
        break
    ms = interleaved(contenders)
    errors = {name: relative_error(fn(), exact, scale) for name, fn in contenders.items()}
    dequantized = aq.dequantized() @ bq.dequantized()
    dequantized_scale = aq.dequantized().abs() @ bq.dequantized().abs()
    flops = 2 * m * n * k
    row = {
        "label": label,
        "m": m,
        "n": n,
        "k": k,
        "ms": ms,
        "tflops": {name: flops / t / 1e9 for name, t in ms.items()},
        "error_vs_float64": errors,
        "course_error_vs_dequantized": relative_error(course_out, dequantized, dequantized_scale),
        "course_bound_vs_dequantized": accumulation_bound(k, lp.GROUP, "gpu"),
        "scaled_mm_recipes": tried,
        "ratio_to_bf16": {name: ms["torch.matmul bf16"] / t for name, t in ms.items()},
    }
    if "torch._scaled_mm" in ms:
        row["ratio_to_scaled_mm"] = {name: ms["torch._scaled_mm"] / t for name, t in ms.items()}
    return row


def mx_race(size: int = 4096) -> dict:
    """``tl.dot_scaled`` on MXFP8 at ``size^3`` (emulated on Hopper) against bf16 matmul."""
    from tmm_course.timing import interleaved

    a = torch.randn(size, size, device="cuda")
    b = torch.randn(size, size, device="cuda")
    am, bm = lp.quantize_mx(a, along=1), lp.quantize_mx(b, along=0)
    blocks = {"block_m": 128, "block_n": 128, "block_k": 128}
    a16, b16 = a.bfloat16(), b.bfloat16()
    ms = interleaved({"mx_matmul (tl.dot_scaled)": lambda: lp.mx_matmul(am, bm, **blocks),
                      "torch.matmul bf16": lambda: a16 @ b16})  # fmt: skip
    exact = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    return {
        "size": size,
        "ms": ms,
        "ratio_to_bf16": ms["torch.matmul bf16"] / ms["mx_matmul (tl.dot_scaled)"],
        "error_vs_float64": relative_error(lp.mx_matmul(am, bm, **blocks), exact, scale),
    }


def measure(code_version: str) -> dict:
    """Every figure of lesson 10's race, with where, when and how it was measured."""
    torch.manual_seed(0)
    return {
        **results.provenance("tmm_course.perf.low_precision"),
        "code": code_version,
        "blocks": BLOCKS,
        "shapes": [race_shape(*shape) for shape in SHAPES],
        "mx": mx_race(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Race lesson 10's float8 kernel on a GPU.")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--code-version", default="unknown", help="e.g. git rev-parse HEAD")
    args = parser.parse_args(argv)
    return results.measure_command(
        "Race lesson 10's float8 kernel on a GPU.",
        lambda: measure(args.code_version),
        ["--out", str(args.out)],
    )


if __name__ == "__main__":
    sys.exit(main())


def stored(path: str | Path | None = None) -> dict | None:
    """A race measured into ``path``, or the one the package ships: None where it ships none
    (no GPU run of this race has been stored with this version of the course)."""
    if path is None and FILE not in results.shipped():
        return None
    return results.read(FILE if path is None else path)


def where(data: dict) -> str:
    """'NVIDIA H100 80GB HBM3, 2026-12-07, torch 2.11.0+cu130, triton 3.6.0, code abc1234'."""
    return f"{results.Provenance.from_dict(data).where}, code {data.get('code', 'not recorded')}"
