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


# --- Low precision (lesson 10): what 8- and 4-bit formats hold, and what a product may lose ---

FLOAT32_UNIT_ROUNDOFF = 2.0**-24  # float32's, and the interpreter's tl.dot partial sums
# a GPU's FP8 tensor cores keep about 14 bits of their running sum: DeepSeek-V3's report
# (arXiv 2412.19437, section 3.3.2) on the H800, a Hopper; the K loop's float32 adds keep 24
FP8_TENSOR_CORE_BITS = 14


def representable(dtype: torch.dtype) -> torch.Tensor:
    """Every finite value of an 8-bit float ``dtype`` (float8_e4m3fn, float8_e5m2,
    float8_e8m0fnu), sorted, in float64: the dtype's 256 bit patterns read as that dtype."""
    if dtype.itemsize != 1 or not dtype.is_floating_point:
        raise ValueError(
            f"representable() enumerates 8-bit float dtypes; got {dtype}. Expected one of "
            "torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu; for MXFP4's "
            "elements use minifloat(2, 1, bias=1)."
        )
    values = torch.arange(256, dtype=torch.uint8).view(dtype).double()
    return values[values.isfinite()].unique()


def minifloat(exponent_bits: int, mantissa_bits: int, bias: int) -> torch.Tensor:
    """Every value of a sign/exponent/mantissa format that spends no bit pattern on infinity
    or NaN (OCP MX's e2m1, MXFP4's elements: ``minifloat(2, 1, bias=1)``), sorted, in float64:
    a zero exponent field holds subnormals ``m / 2**mantissa_bits * 2**(1 - bias)``, any other
    ``(1 + m / 2**mantissa_bits) * 2**(e - bias)``. torch has the e2m1 dtype
    (``float4_e2m1fn_x2``, two per byte) but cannot convert it."""
    e = torch.arange(2**exponent_bits, dtype=torch.float64)[:, None]
    m = torch.arange(2**mantissa_bits, dtype=torch.float64)[None, :] / 2**mantissa_bits
    magnitudes = torch.where(e == 0, m * 2.0 ** (1 - bias), (1 + m) * 2.0 ** (e - bias))
    return torch.cat([-magnitudes.flatten(), magnitudes.flatten()]).unique()


def unit_roundoff(values: torch.Tensor) -> float:
    """Half the gap between 1 and the next larger value of a format (given as every value it
    holds): the largest relative error of rounding a number in its normal range to it."""
    above = values[values > 1]
    return float(above.min() - 1) / 2


def spacing(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(each non-negative value of a format, the gap to the next one): the grid a number is
    rounded to, finer near zero and coarser far from it."""
    grid = values[values >= 0]
    return grid[:-1], grid[1:] - grid[:-1]


def quantized_product_bound(u: float) -> float:
    """How far a product of two inputs each rounded with relative error at most ``u`` may be
    from the exact one, relative to ``|A| @ |B|``: ``(1 + u)**2 - 1``. It holds while every
    element lands in its format's normal range (a block scale sees to that, an outlier in the
    same block undoes it) and before the sum's own rounding (:func:`accumulation_bound`)."""
    return 2 * u + u * u


def accumulation_bound(k: int, group: int, backend: str) -> float:
    """How far a block-scaled product of exactly represented float8 inputs may be from the
    float64 product of those inputs dequantized, relative to ``|A| @ |B|`` (``k`` the inner
    size, ``group`` the K block one scale covers). Each K block's partial sum is a float8
    ``tl.dot``: exact products added in float32 on the interpreter, in about
    :data:`FP8_TENSOR_CORE_BITS` bits on a GPU's tensor cores; then two roundings to apply the
    scales and one add per K block, in float32: ``(group + 2 + k / group)`` float32 roundings."""
    partial = FLOAT32_UNIT_ROUNDOFF if backend != GPU else 2.0**-FP8_TENSOR_CORE_BITS
    blocks = -(-k // group)
    return min(group, k) * partial + (2 + blocks) * FLOAT32_UNIT_ROUNDOFF
