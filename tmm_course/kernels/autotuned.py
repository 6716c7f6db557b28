"""Lesson 6: lesson 4's kernel under ``@triton.autotune``. The first call with a new value of
the key ``(M, N, K)`` times every configuration and keeps the fastest; later calls with that
key reuse it. On the interpreter the timings are wall-clock seconds of Python (they say nothing
about a GPU), but the mechanism, one tuning per key, is the same."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import triton

import tmm_course
from tmm_course.backend import GPU
from tmm_course.kernels.matmul import matmul_kernel
from tmm_course.sizes import per_backend

CONFIGS = per_backend(
    tmm_course.BACKEND,
    cpu=[
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 16})
        for bm, bn in [(16, 16), (32, 32), (16, 64)]
    ],
    gpu=[
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=4),
    ],
)


TIMED = {"configurations": 0}  # how many configurations autotuning has timed so far


def _timed(fn: Callable[[], object], quantiles=None, **_: object):
    """Time one configuration: Triton's do_bench on a GPU; on the interpreter (which it cannot
    time), the wall-clock milliseconds of one call."""
    TIMED["configurations"] += 1
    if tmm_course.BACKEND == GPU:
        from triton.testing import do_bench

        return do_bench(fn, quantiles=quantiles)
    start = time.perf_counter()
    fn()
    ms = (time.perf_counter() - start) * 1e3
    return [ms] * len(quantiles) if quantiles else ms


autotuned_matmul_kernel = triton.autotune(configs=CONFIGS, key=["M", "N", "K"], do_bench=_timed)(
    matmul_kernel
)


def autotuned_matmul(a: torch.Tensor, b: torch.Tensor, precision: str = "tf32") -> torch.Tensor:
    """C = A @ B with the configuration autotuning chose for this (M, N, K)."""
    (m, k), n = a.shape, b.shape[1]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))
    autotuned_matmul_kernel[grid](
        a, b, out, m, n, k, *a.stride(), *b.stride(), *out.stride(),
        PRECISION=None if a.dtype != torch.float32 else precision,
    )  # fmt: skip
    return out


def tuned() -> dict[tuple, str]:
    """Every (M, N, K) tuned so far and the configuration that won it."""
    return {key[:3]: short(config) for key, config in autotuned_matmul_kernel.cache.items()}


def short(config: triton.Config) -> str:
    b = config.kwargs
    return f"{b['BLOCK_M']}x{b['BLOCK_N']}x{b['BLOCK_K']} w{config.num_warps} s{config.num_stages}"
