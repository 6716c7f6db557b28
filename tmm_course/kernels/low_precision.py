"""Lesson 10: low-precision tiles.

Block quantization to float8 (one scale per ``1 x 128`` row block of A and per ``128 x 128``
block of B, as DeepSeek-V3 trains), lesson 4's kernel on float8 tiles with one scale per row of
A and column of B applied once after the K loop (the kernel the lesson prints) and with the block
scales applied in it (the exercise's answer), accumulating in float32, and ``tl.dot_scaled``
on MX formats (one power-of-two scale per 32 elements along K).

    a_q = quantize(a, (1, GROUP)); b_q = quantize(b, (GROUP, GROUP))
    c = fp8_matmul(a_q.values, a_q.scales, b_q.values, b_q.scales)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course import compile_ahead, gpu, validate
from tmm_course.backend import INTERPRETER

GROUP = 128  # the K block one scale covers (and the N block of B's scales)
E4M3 = torch.float8_e4m3fn
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)
FLOAT8_CAPABILITY = (8, 9)  # the first GPUs with float8 tensor cores (Ada, then Hopper)
MX_GROUP = 32  # OCP MX: one e8m0 scale per 32 elements along K
E8M0_BIAS = 127  # an e8m0 byte e holds the scale 2**(e - 127)
# the GPUs whose compilers the lesson asks what they make of tl.dot_scaled: an H100, a B200,
# an RTX 50
SCALED_DOT_TARGETS = ("sm_90", "sm_100", "sm_120")


@dataclass(frozen=True)
class Quantized:
    """A matrix in float8 with one float32 scale per block: ``x ~ values * scale`` of its block."""

    values: torch.Tensor  # float8, the matrix's shape
    scales: torch.Tensor  # float32, (cdiv(rows, block[0]), cdiv(cols, block[1]))
    block: tuple[int, int]

    def dequantized(self) -> torch.Tensor:
        """``values * scale`` in float64: what the float8 matrix stands for."""
        rows, cols = self.values.shape
        scale = self.scales.double().repeat_interleave(self.block[0], 0)[:rows]
        return self.values.double() * scale.repeat_interleave(self.block[1], 1)[:, :cols]


def quantize(
    x: torch.Tensor,
    block: tuple[int, int] = (1, GROUP),
    dtype: torch.dtype = E4M3,
    round_scale: str = "up",
) -> Quantized:
    """``x`` (float32 or float16) in ``dtype`` with one scale per ``block`` (``(1, GROUP)``:
    per row and K block; ``x.shape``: one per tensor). Each scale is the power of two that
    brings the block's largest magnitude into the format's range, rounded ``"up"`` (the largest
    lands in the top binade, never past the maximum). ``"down"`` is the mistake the lesson
    shows: the largest value overflows and saturates. An all-zero block keeps the scale 1.
    Values past the format's largest saturate; the rest round to nearest even (torch's cast)."""
    validate.tensor("x", x, ndim=2)
    validate.dtype("x", x, (torch.float32, torch.float16), tmm_course.BACKEND)
    if dtype not in FLOAT8:
        raise validate.KernelInputError(
            f"dtype={dtype} is not a float8 format; expected torch.float8_e4m3fn or "
            "torch.float8_e5m2."
        )
    if round_scale not in ("up", "down"):
        raise validate.KernelInputError(f"round_scale={round_scale!r}: expected 'up' or 'down'.")
    rows, cols = x.shape
    (br, bc) = (validate.positive("block[0]", block[0]), validate.positive("block[1]", block[1]))
    gr, gc = -(-rows // br), -(-cols // bc)
    padded = x.new_zeros(gr * br, gc * bc, dtype=torch.float32)
    padded[:rows, :cols] = x  # zeros never raise a block's largest magnitude
    blocks = padded.view(gr, br, gc, bc)
    largest = blocks.abs().amax(dim=(1, 3))
    exponent = torch.log2(largest / torch.finfo(dtype).max)
    exponent = exponent.ceil() if round_scale == "up" else exponent.floor()
    scales = torch.where(largest > 0, torch.exp2(exponent), torch.ones_like(largest))
    most = torch.finfo(dtype).max  # saturate: torch's cast of a larger value may give NaN
    values = (blocks / scales[:, None, :, None]).clamp(-most, most).to(dtype)
    values = values.view(gr * br, gc * bc)
    return Quantized(values[:rows, :cols].contiguous(), scales.contiguous(), (br, bc))


@triton.jit
def fp8_matmul_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr,
                      M, N, K,
                      stride_am, stride_ak, stride_asm, stride_ask,  # A and its (M, K/G) scales
                      stride_bk, stride_bn, stride_bsk, stride_bsn,  # B and its (K/G, N/G) scales
                      stride_cm, stride_cn,
                      GROUP: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # lesson 4's kernel; BLOCK_K divides GROUP, so each K step lies in one scale block
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        # the scales of this K block: one per row of A, one per GROUP columns of B
        group = k * BLOCK_K // GROUP
        a_scale = tl.load(a_scale_ptr + offs_m * stride_asm + group * stride_ask,
                          mask=offs_m < M, other=0.0)
        b_scale = tl.load(b_scale_ptr + group * stride_bsk + (offs_n // GROUP) * stride_bsn,
                          mask=offs_n < N, other=0.0)
        # float8 tiles in, float32 partial sum out; scaled and added in float32
        acc += tl.dot(a, b) * a_scale[:, None] * b_scale[None, :]
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))  # fmt: skip


@triton.jit
def fp8_matmul_rowwise_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, M, N, K,
                              stride_am, stride_ak, stride_as,  # A and its M scales
                              stride_bk, stride_bn, stride_bs,  # B and its N scales
                              stride_cm, stride_cn,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr):
    # lesson 4's kernel on float8 tiles; one scale per row of A and one per column of B
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)  # float8 tiles in, float32 out: the float8 values' own product
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # a row's scale is the same at every k, a column's too: sum_k (a sa)(b sb) = sa sb sum_k a b,
    # so the scales multiply the finished sum, once
    a_scale = tl.load(a_scale_ptr + offs_m * stride_as, mask=offs_m < M, other=0.0)
    b_scale = tl.load(b_scale_ptr + offs_n * stride_bs, mask=offs_n < N, other=0.0)
    acc = acc * a_scale[:, None] * b_scale[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def fp8_matmul_rowwise(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    *,
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """C = (a * a_scale) @ (b * b_scale) in float32 with :func:`fp8_matmul_rowwise_kernel`:
    one scale per row of ``a`` (``a_scale`` (M, 1): ``quantize(a, (1, K))``) and per column
    of ``b`` (``b_scale`` (1, N): ``quantize(b, (K, 1))``), applied once after the K loop."""
    k = max(a.shape[1], 1)
    check_scaled_operands(a, a_scale, b, b_scale, a_block=(1, k), b_block=(k, 1))
    (m, k), n = a.shape, b.shape[1]
    for name, block in (("block_m", block_m), ("block_n", block_n)):
        validate.power_of_two(name, block)
    validate.power_of_two("block_k", block_k, minimum=32)
    out = torch.empty(m, n, device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    fp8_matmul_rowwise_kernel[grid](
        a, a_scale, b, b_scale, out, m, n, k,
        *a.stride(), a_scale.stride(0), *b.stride(), b_scale.stride(1), *out.stride(),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
    )  # fmt: skip
    return out


def check_scaled_operands(
    a, a_scale, b, b_scale, a_block: tuple[int, int] = (1, GROUP),
    b_block: tuple[int, int] = (GROUP, GROUP),
) -> None:  # fmt: skip
    """Raise KernelInputError unless ``a`` (M, K) and ``b`` (K, N) are float8 with float32
    scales, one per ``a_block`` of ``a`` and per ``b_block`` of ``b`` (as :func:`quantize`
    makes them)."""
    for name, value in (("a", a), ("a_scale", a_scale), ("b", b), ("b_scale", b_scale)):
        validate.tensor(name, value, ndim=2)
    validate.on_device(tmm_course.DEVICE, a=a, a_scale=a_scale, b=b, b_scale=b_scale)
    for name, value in (("a", a), ("b", b)):
        if value.dtype not in FLOAT8:
            raise validate.KernelInputError(
                f"{name} is {value.dtype}; expected float8 (torch.float8_e4m3fn or "
                f"torch.float8_e5m2). Fix: {name}_q = quantize({name}, ...); pass "
                f"{name}_q.values and {name}_q.scales."
            )
    here = gpu.current()
    if here is not None and tuple(here.capability) < FLOAT8_CAPABILITY:
        raise validate.KernelInputError(
            f"{here.name} (compute capability {here.capability[0]}.{here.capability[1]}) has no "
            "float8 tensor cores: tl.dot on float8 e4m3 tiles needs 8.9 or newer (an L4, an "
            "H100, a B200). Fix: run this lesson on the CPU: %env TMM_BACKEND=interpreter "
            "before import tmm_course, then restart the kernel."
        )
    if a.shape[1] != b.shape[0]:
        raise validate.KernelInputError(
            f"Inner dimensions differ: a is {tuple(a.shape)} and b is {tuple(b.shape)}. "
            "Expected a (M, K) and b (K, N)."
        )
    (m, k), n = a.shape, b.shape[1]
    wanted = {
        "a_scale": (-(-m // a_block[0]), -(-k // a_block[1])),
        "b_scale": (-(-k // b_block[0]), -(-n // b_block[1])),
    }
    for name, value in (("a_scale", a_scale), ("b_scale", b_scale)):
        if tuple(value.shape) != wanted[name] or value.dtype != torch.float32:
            raise validate.KernelInputError(
                f"{name} is {tuple(value.shape)} {value.dtype}; expected {wanted[name]} "
                f"float32 (one scale per {a_block if name == 'a_scale' else b_block} block). "
                f"Fix: quantize a with block {a_block} and b with {b_block}."
            )


def fp8_matmul(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = GROUP,
    num_warps: int = 4,
    num_stages: int = 3,
) -> torch.Tensor:
    """C = (a * a_scale) @ (b * b_scale) in float32 (``out``: float32 or bfloat16, any
    strides) with :func:`fp8_matmul_kernel`; ``block_k`` must divide :data:`GROUP`."""
    check_scaled_operands(a, a_scale, b, b_scale)
    for name, block in (("block_m", block_m), ("block_n", block_n)):
        validate.power_of_two(name, block)
    validate.power_of_two("block_k", block_k, minimum=32)
    if GROUP % block_k:
        raise validate.KernelInputError(
            f"block_k={block_k} does not divide the scale block {GROUP}: a K step would "
            f"straddle two scales. Fix: block_k=32, 64 or {GROUP}."
        )
    (m, k), n = a.shape, b.shape[1]
    if out is None:
        out = torch.empty(m, n, device=a.device, dtype=torch.float32)
    validate.tensor("out", out, ndim=2)
    validate.no_overlap(out, a=a, b=b)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    fp8_matmul_kernel[grid](
        a, a_scale, b, b_scale, out, m, n, k,
        *a.stride(), *a_scale.stride(), *b.stride(), *b_scale.stride(), *out.stride(),
        GROUP=GROUP, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return out


# --- MX: tl.dot_scaled, one e8m0 scale per 32 elements along K ---


@dataclass(frozen=True)
class MX:
    """A matrix in an MX format: float8 elements and one e8m0 scale byte per 32 along K.
    ``scales`` is (rows, K / 32) for A and (N, K / 32) for B (one row per column of B, as
    ``tl.dot_scaled`` takes it)."""

    values: torch.Tensor
    scales: torch.Tensor  # uint8: the scale is 2**(byte - 127)

    def dequantized(self, along: int) -> torch.Tensor:
        """``values * 2**(scale - 127)`` in float64 (``along``: the axis K runs along)."""
        scale = torch.exp2(self.scales.double() - E8M0_BIAS).repeat_interleave(MX_GROUP, 1)
        return self.values.double() * (scale if along == 1 else scale.t())


def quantize_mx(x: torch.Tensor, along: int, dtype: torch.dtype = E4M3) -> MX:
    """``x`` as MXFP8 (OCP MX v1.0): per 32 elements along ``along`` (1 for A, 0 for B), the
    scale ``2**(floor(log2(amax)) - emax)`` (``emax``: the exponent of the format's largest
    value), stored as a biased e8m0 byte; the elements rounded to ``dtype``, saturating.
    K must be a multiple of 32."""
    validate.tensor("x", x, ndim=2)
    if x.shape[along] % MX_GROUP:
        raise validate.KernelInputError(
            f"x has {x.shape[along]} elements along K; MX needs a multiple of {MX_GROUP}. "
            f"Fix: pad K to a multiple of {MX_GROUP} with zeros."
        )
    rows = x.float() if along == 1 else x.float().t()
    blocks = rows.reshape(rows.shape[0], -1, MX_GROUP)
    largest = blocks.abs().amax(dim=2)
    emax = math.floor(math.log2(torch.finfo(dtype).max))
    exponent = torch.where(largest > 0, torch.floor(torch.log2(largest)) - emax, 0.0)
    exponent = exponent.clamp(-E8M0_BIAS, E8M0_BIAS)
    most = torch.finfo(dtype).max  # OCP MX: a value past the largest saturates
    values = (blocks / torch.exp2(exponent)[:, :, None]).clamp(-most, most).to(dtype)
    values = values.reshape(rows.shape)
    values = values if along == 1 else values.t()
    return MX(values.contiguous(), (exponent + E8M0_BIAS).to(torch.uint8).contiguous())


@triton.jit
def mx_matmul_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, M, N, K,
                     stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                     FORMAT: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # K a multiple of BLOCK_K; scales contiguous, (M, K/32) for A and (N, K/32) for B
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_s = tl.arange(0, BLOCK_K // 32)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    a_scale_ptrs = a_scale_ptr + offs_m[:, None] * (K // 32) + offs_s[None, :]
    b_scale_ptrs = b_scale_ptr + offs_n[:, None] * (K // 32) + offs_s[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)
        b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)
        a_scale = tl.load(a_scale_ptrs, mask=offs_m[:, None] < M, other=0)
        b_scale = tl.load(b_scale_ptrs, mask=offs_n[:, None] < N, other=0)
        # the hardware (or its emulation) applies one scale per 32 elements of K
        acc = tl.dot_scaled(a, a_scale, FORMAT, b, b_scale, FORMAT, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
        a_scale_ptrs += BLOCK_K // 32
        b_scale_ptrs += BLOCK_K // 32
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def interpreter_runs_dot_scaled() -> bool:
    """Whether this Triton's interpreter has ``tl.dot_scaled`` (3.9's has; 3.6's lacks
    ``create_dot_scaled`` and fails): on a GPU, always."""
    if tmm_course.BACKEND != INTERPRETER:
        return True
    from triton.runtime.interpreter import InterpreterBuilder

    return hasattr(InterpreterBuilder, "create_dot_scaled")


def mx_matmul(a: MX, b: MX, *, block_m: int = 64, block_n: int = 64, block_k: int = 64
              ) -> torch.Tensor:  # fmt: skip
    """C = A @ B in float32 from two MXFP8 matrices (``a`` quantized along its columns, ``b``
    along its rows) with ``tl.dot_scaled``."""
    (m, k), n = a.values.shape, b.values.shape[1]
    if k % block_k:
        raise validate.KernelInputError(
            f"K = {k} is not a multiple of block_k={block_k}. Fix: pad K with zeros."
        )
    out = torch.empty(m, n, device=a.values.device, dtype=torch.float32)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    mx_matmul_kernel[grid](
        a.values, a.scales, b.values, b.scales, out, m, n, k,
        *a.values.stride(), *b.values.stride(), *out.stride(),
        FORMAT="e4m3", BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
    )  # fmt: skip
    return out


def scaled_dot_compiled(block: int = 128) -> dict[str, compile_ahead.Compiled]:
    """:func:`mx_matmul_kernel` on MXFP8 (e4m3) tiles of ``block`` x ``block`` x ``block``,
    compiled for each of :data:`SCALED_DOT_TARGETS` by :mod:`tmm_course.compile_ahead`: its
    PTX says how each GPU multiplies."""
    size = 2 * block
    a = torch.zeros(size, size, dtype=torch.uint8)  # float8 as bytes: dot_scaled takes them
    b = torch.zeros(size, size, dtype=torch.uint8)
    scales = torch.zeros(size, size // MX_GROUP, dtype=torch.uint8)
    c = torch.empty(size, size)
    args = (a, scales, b, scales, c, size, size, size, *a.stride(), *b.stride(), *c.stride())
    blocks = {"FORMAT": "e4m3", "BLOCK_M": block, "BLOCK_N": block, "BLOCK_K": block}
    spec = compile_ahead.specialize(mx_matmul_kernel, args, blocks)
    return {gpu: _compile(spec, gpu) for gpu in SCALED_DOT_TARGETS}


def _compile(spec: compile_ahead.Specialization, gpu: str) -> compile_ahead.Compiled:
    return compile_ahead.compile_for(mx_matmul_kernel, spec, gpu, num_warps=4, num_stages=2)


def matrix_instructions(ptx: str) -> list[str]:
    """The distinct tensor-core instructions in ``ptx`` (wgmma, tcgen05.mma, mma.sync), each
    with its shape and kinds: how the GPU multiplies the tiles."""
    found = re.findall(r"\b(?:wgmma\.mma_async|tcgen05\.mma|mma\.sync)[\w.:]*", ptx)
    return sorted(set(found))


@dataclass(frozen=True)
class OutlierErrors:
    """:func:`fp8_matmul`'s error, against float64, on the rows of A without the outlier, with
    A scaled once per tensor and once per ``1 x GROUP`` block, for each outlier size."""

    outliers: list[float]  # how many times larger the outlier row is than the others
    per_tensor: list[float]
    per_block: list[float]
    flushed: list[float]  # the share of the other rows' values a per-tensor scale rounds to 0


def outlier_errors(outliers: list[float], m: int, n: int, k: int, seed: int = 0) -> OutlierErrors:
    """Quantize ``A`` (``m x k``, one row ``outlier`` times larger than the rest, as a token
    with massive activations is) and ``B`` (``k x n``), multiply with :func:`fp8_matmul` and
    measure the error of the other rows' products (:func:`tmm_course.numerics.error`)."""
    from tmm_course.numerics import error

    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(k, n, generator=gen).to(tmm_course.DEVICE)
    bq = quantize(b, (GROUP, GROUP))
    others = torch.arange(m) != 0
    found = OutlierErrors(list(outliers), [], [], [])
    for outlier in outliers:
        x = a.clone()
        x[0] *= outlier
        x = x.to(tmm_course.DEVICE)
        for block, errors in ((tuple(x.shape), found.per_tensor), ((1, GROUP), found.per_block)):
            q = quantize(x, block)  # one scale per tensor: the kernel reads it everywhere
            scales = q.scales.expand(m, -(-k // GROUP)).contiguous()
            c = fp8_matmul(q.values, scales, bq.values, bq.scales)
            errors.append(error(c[others], x[others], b))
            if block == tuple(x.shape):
                found.flushed.append(float((q.values[others].float() == 0).float().mean()))
    return found
