"""Measuring on a GPU, side by side with ``torch.matmul``.

Candidates are timed in turn (A, B, A, B, ...), so clock and power drift hit them alike, each
call as a user makes it (:func:`tmm_course.timing.with_host_ms`: back to back, host time
included), and compared as ratios of medians over the rounds (a stray pause of the host, such
as Python's garbage collector, moves a mean but not a median). The host's own cost per call
and device time alone (CUDA-graph replays, :func:`tmm_course.timing.device_ms`) are measured
apart.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator

import torch

import tmm_course
from tmm_course.capstone.problems import Problem
from tmm_course.numerics import error
from tmm_course.perf import intensity
from tmm_course.perf.results import Race
from tmm_course.timing import device_ms, interleaved

Matmul = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@contextlib.contextmanager
def torch_precision(problem: Problem) -> Iterator[None]:
    """torch.matmul forms float32 products as ``problem.precision`` says (TF32 or IEEE)."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if problem.precision == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def host_microseconds(fn: Callable[[], object], calls: int = 50) -> float:
    """Python-side cost of one call: launches queued back to back, no waiting for the GPU."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def race(
    problem: Problem,
    contenders: dict[str, Matmul],
    rounds: int = 5,
    operands: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Race:
    """Check every contender's result, then time it against torch.matmul interleaved, on
    ``operands`` (by default, the problem's own)."""
    a, b = operands or problem.operands()
    limit = problem.tolerance()
    with torch_precision(problem):
        everyone = {"torch.matmul": torch.matmul, **contenders}
        errors = {name: error(fn(a, b), a, b) for name, fn in everyone.items()}
        wrong = [n for n in contenders if not errors[n] <= limit]
        timed = {n: fn for n, fn in everyone.items() if n not in wrong}
        ms = interleaved({n: (lambda fn=fn: fn(a, b)) for n, fn in timed.items()}, rounds)
        host = {n: host_microseconds(lambda fn=fn: fn(a, b)) for n, fn in timed.items()}
        device = {n: device_ms(lambda fn=fn: fn(a, b)) for n, fn in timed.items()}
    work = intensity.flops(problem.m, problem.n, problem.k)
    return Race(
        problem=problem,
        tolerance=limit,
        error=errors,
        wrong=wrong,
        ms=ms,
        tflops={n: work / (t * 1e-3) / 1e12 for n, t in ms.items()},
        ratio_to_torch={n: ms["torch.matmul"] / t for n, t in ms.items()},
        host_us=host,
        device_ms=device,
        device_ratio_to_torch={
            n: device["torch.matmul"] / t for n, t in device.items() if t and device["torch.matmul"]
        },
    )


def gpu_clocks() -> dict | None:
    """SM and memory clocks, power and temperature from nvidia-smi (None if it is missing)."""
    fields = "clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu"
    try:
        line = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return dict(zip(fields.split(","), (v.strip() for v in line.split(",")), strict=False))


def copy_bandwidth_gbs(mib: int = 1024) -> float:
    """Device-memory bandwidth a plain copy reaches: bytes read plus bytes written per second."""
    from tmm_course.timing import cold_cache_ms

    src = torch.empty(mib * 2**20, dtype=torch.uint8, device=tmm_course.DEVICE)
    dst = torch.empty_like(src)
    ms = statistics.median(cold_cache_ms(lambda: dst.copy_(src), rep_ms=100) for _ in range(3))
    return 2 * src.numel() / (ms * 1e-3) / 1e9
