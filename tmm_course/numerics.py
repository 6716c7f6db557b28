"""How far a matmul result is from the exact product, and how far it may be, per dtype."""

from __future__ import annotations

import torch

from tmm_course.backend import GPU

# Largest allowed normalized error, max |C - A@B| / (|A| @ |B|), elementwise (see error()).
# fp16/bf16: inputs are exact, products and sums are float32, the store rounds to 11/8 bits.
# float32 on a GPU with "tf32": the tensor cores read 11 significant bits of each input (the
# low 13 bits are dropped, not rounded: at most 2**-10 relative error per input).
TOLERANCE = {
    "float32": 1e-6,
    "tf32": 2e-3,
    "float16": 1e-3,
    "bfloat16": 8e-3,
}


def error(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    """max over cells of |C - A@B| / (|A| @ |B|), with A@B computed in float64.

    Dividing by |A|@|B| (the largest the sum could be) keeps cancellation from turning a
    tiny absolute error into a huge relative one. Below the smallest normal number of C's
    dtype the divisor stays at that number: there C's format holds fewer significant bits (a
    float16 product of 0.001 and 0.002, rounded exactly, is 1.2% off). NaN in C gives NaN.
    """
    a64, b64 = a.double(), b.double()
    exact = a64 @ b64
    scale = (a64.abs() @ b64.abs()).clamp_min(torch.finfo(c.dtype).tiny)
    diff = (c.double() - exact).abs() / scale
    if diff.numel() == 0:
        return 0.0
    if diff.isnan().any():
        return float("nan")
    return float(diff.max())


def tolerance(dtype: torch.dtype, backend: str, precision: str = "tf32") -> float:
    """The error bound for ``dtype`` on ``backend`` (the interpreter computes float32 exactly)."""
    name = str(dtype).removeprefix("torch.")
    if name == "float32" and backend == GPU and precision == "tf32":
        return TOLERANCE["tf32"]
    return TOLERANCE[name]


def allowed(scale: torch.Tensor, dtype: torch.dtype, backend: str, precision: str = "tf32"
            ) -> torch.Tensor:  # fmt: skip
    """The largest |C - exact| each cell may show: ``dtype``'s tolerance times ``scale``
    (|A| @ |B|, plus whatever else the cell sums), never below the smallest normal number of
    ``dtype``: a correctly rounded result smaller than that is further off (see :func:`error`)."""
    return tolerance(dtype, backend, precision) * scale.clamp_min(torch.finfo(dtype).tiny)


def relative_rms(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    """rms(C - A@B) / rms(A@B) in float64. With a float32 accumulator it stays at the output's
    rounding whatever K is; a float16 accumulator makes it grow like sqrt(K)."""
    exact = a.double() @ b.double()
    return float((c.double() - exact).pow(2).mean().sqrt() / exact.pow(2).mean().sqrt())
