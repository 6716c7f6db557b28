"""Measurements for the pitfalls lab, from the kernels on the current backend.

On a GPU, ``python -m tmm_course.perf.pitfalls --out pitfalls_<gpu>.json`` records the
GPU-only figures (TF32 against IEEE float32, the cost of a runtime loop bound) with the device,
versions, date and command, for the notebook to show on machines without a GPU.
"""

from __future__ import annotations

import sys

import torch

import tmm_course
from tmm_course.kernels import pitfalls
from tmm_course.kernels.matmul import matmul, matmul_kernel
from tmm_course.numerics import error, relative_rms
from tmm_course.perf import results


def accumulator_error_curve(ks: list[int], size: int = 64) -> dict[str, list[float]]:
    """rms error against float64 of float16 ``size x size x K`` products, for each K: lesson
    4's float32 accumulator next to the float16 one."""
    curve: dict[str, list[float]] = {
        "K": list(ks),
        "float32 accumulator": [],
        "float16 accumulator": [],
    }
    fp16_acc = pitfalls.launcher(pitfalls.fp16_accumulator_kernel)
    for k in ks:
        a = torch.randn(size, k, device=tmm_course.DEVICE).half()
        b = torch.randn(k, size, device=tmm_course.DEVICE).half()
        c = torch.empty(size, size, device=tmm_course.DEVICE).half()
        fp16_acc(a, b, c)
        curve["float16 accumulator"].append(relative_rms(c, a, b))
        curve["float32 accumulator"].append(relative_rms(matmul(a, b), a, b))
    return curve


def precision_errors(size: int = 512) -> dict[str, float]:
    """Lesson 4's kernel on float32 inputs: error with input_precision "tf32" and "ieee"."""
    a = torch.randn(size, size, device=tmm_course.DEVICE)
    b = torch.randn(size, size, device=tmm_course.DEVICE)
    return {p: error(matmul(a, b, precision=p), a, b) for p in ("tf32", "ieee")}


def loop_bound_timing(size: int = 4096) -> dict[str, float]:
    """GPU only: lesson 4's kernel (K a runtime argument) against the same kernel with K a
    compile-time constant, float16, ``size`` cubed, interleaved; medians in ms and the ratio."""
    from tmm_course.timing import interleaved

    a = torch.randn(size, size, device="cuda").half()
    b = torch.randn(size, size, device="cuda").half()
    c = torch.empty(size, size, device="cuda").half()
    blocks = {"block_m": 128, "block_n": 128, "block_k": 32}
    times = interleaved(
        {
            "runtime K": lambda: pitfalls.launcher(matmul_kernel, **blocks)(a, b, c),
            "constexpr K": lambda: pitfalls.launcher(pitfalls.static_k_kernel, **blocks)(a, b, c),
        }
    )
    return {
        **times,
        "runtime / constexpr": times["runtime K"] / times["constexpr K"],
        "size": size,
        "dtype": "float16",
        **blocks,
    }


def gpu_measurements() -> dict:
    """Every GPU figure of the lab, with where, when and how it was measured."""
    torch.manual_seed(0)
    return {
        **results.provenance("tmm_course.perf.pitfalls"),
        "precision_errors_512": precision_errors(512),
        "accumulator_error_curve": accumulator_error_curve([16, 64, 256, 1024, 4096]),
        "loop_bound_timing": loop_bound_timing(4096),
    }


def main(argv: list[str] | None = None) -> int:
    return results.measure_command(
        "Measure the pitfalls lab's GPU figures.", gpu_measurements, argv
    )


if __name__ == "__main__":
    sys.exit(main())
