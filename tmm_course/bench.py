"""The benchmark: our kernels against ``torch.matmul`` (cuBLAS), same dtype, shape, layout
and precision, correctness checked first, timed interleaved, reported as ratios.

On a GPU::

    python -m tmm_course.bench --out results/bench_h200.json          # goals, journey, host
    python -m tmm_course.bench sweep --out results/sweep_h200.json    # every configuration

writes TFLOP/s, ratios to torch, the fraction of the measured peak, host launch time, GPU
clocks, and where, when and how it was measured. The notebooks read the committed files.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import tmm_course
from tmm_course import intensity, journey, results, tuning
from tmm_course.kernels import fast
from tmm_course.numerics import error, tolerance

Matmul = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Problem:
    """C = A @ B with A (m, k), B (k, n), both row-major, in ``dtype``."""

    m: int
    n: int
    k: int
    dtype: str = "float16"
    precision: str = "tf32"  # how float32 products are formed, on both sides

    @property
    def kind(self) -> str:
        """The dtype, and for float32 how products are formed: "float32 (tf32)"."""
        return f"float32 ({self.precision})" if self.dtype == "float32" else self.dtype

    @property
    def label(self) -> str:
        shape = f"{self.m}^3" if self.m == self.n == self.k else f"{self.m}x{self.n}x{self.k}"
        return f"{shape} {self.kind}"

    def as_dict(self) -> dict:
        return {**asdict(self), "kind": self.kind, "label": self.label}

    def tolerance(self) -> float:
        """The error bound its results must meet on this backend."""
        return tolerance(getattr(torch, self.dtype), tmm_course.BACKEND, self.precision)

    def operands(self, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator(device=tmm_course.DEVICE).manual_seed(seed)
        dtype = getattr(torch, self.dtype)
        new = lambda r, c: torch.randn(r, c, device=tmm_course.DEVICE, generator=gen).to(dtype)
        return new(self.m, self.k), new(self.k, self.n)


# The goals on an H200: problem -> lowest acceptable ratio torch time / our time
GOALS = (
    *(
        (Problem(m, n, k, dtype), target)
        for (m, n, k, target) in [
            (4096, 4096, 4096, 1.0), (8192, 8192, 8192, 1.0), (1024, 1024, 1024, 0.8),
            (16, 4096, 4096, 0.8), (128, 4096, 4096, 0.8), (4096, 4096, 4093, 1.0),
        ]
        for dtype in ("float16", "bfloat16")
    ),
    (Problem(4096, 4096, 4096, "float32", "tf32"), 0.8),
)  # fmt: skip
JOURNEY_PROBLEM = Problem(4096, 4096, 4096)


def _configs(*rows: tuple) -> tuple[fast.Config, ...]:
    """(block_m, block_n, block_k, warps, stages[, group_m, split_k, subtile]) rows."""
    return tuple(fast.Config(*row) for row in rows)


_LARGE_TMA = _configs(
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 3, 4),
    (128, 256, 64, 8, 3, 16),
    (128, 256, 64, 8, 3, 8, 1, True),
    (128, 256, 64, 8, 4, 8, 1, True),
    (256, 128, 64, 8, 3),
    (256, 128, 64, 8, 4, 8, 1, True),
    (128, 256, 32, 8, 6, 8, 1, True),
)
_LARGE_GROUPED = _configs(
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4),
    (128, 256, 32, 8, 5),
    (256, 128, 64, 8, 3),
    (128, 128, 32, 4, 4),
)
_FEW_ROWS = _configs(
    (64, 64, 128, 4, 4),
    (64, 64, 128, 4, 4, 8, 2),
    (64, 128, 128, 4, 4, 8, 4),
    (16, 64, 128, 4, 4, 8, 4),
    (32, 128, 128, 4, 4, 8, 4),
    (64, 128, 64, 4, 5, 8, 4),
    (64, 64, 256, 4, 3, 8, 4),
    (16, 32, 256, 4, 3),
    (32, 64, 256, 4, 3, 8, 2),
    (128, 128, 64, 8, 4, 8, 4),
    (64, 128, 128, 4, 3, 8, 2),
    (128, 64, 128, 4, 4, 8, 4),
    (128, 128, 64, 8, 4, 8, 2),
    (64, 64, 128, 4, 4, 8, 4),
    (128, 256, 64, 8, 3, 8, 4),
    (64, 128, 64, 4, 4, 8, 4),
    (128, 64, 64, 4, 4, 8, 8),
)
_MEDIUM = _configs(
    (64, 64, 64, 4, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (128, 128, 64, 8, 4, 8, 2),
    (64, 64, 128, 4, 3),
    (128, 64, 64, 4, 3, 8, 2),
    (64, 64, 64, 4, 4, 8, 2),
    (128, 128, 64, 4, 3),
    (64, 128, 64, 4, 4, 8, 2),
    (128, 128, 32, 4, 4, 8, 2),
)
_FLOAT32_TMA = _configs(
    (128, 128, 32, 8, 3),
    (128, 128, 32, 8, 4),
    (128, 256, 32, 8, 3, 8, 1, True),
    (128, 64, 32, 4, 4),
    (256, 128, 32, 8, 3, 8, 1, True),
    (128, 128, 32, 4, 4),
    (128, 256, 16, 8, 4, 8, 1, True),
    (128, 128, 64, 8, 2),
)
# problem -> kernel -> configurations tried (python -m tmm_course.bench sweep)
SWEEPS = {
    Problem(4096, 4096, 4096): {"persistent_tma": _LARGE_TMA, "grouped": _LARGE_GROUPED},
    Problem(8192, 8192, 8192): {"persistent_tma": _LARGE_TMA, "grouped": _LARGE_GROUPED[:2]},
    Problem(1024, 1024, 1024): {"grouped": _MEDIUM, "persistent_tma": _MEDIUM[:4]},
    Problem(16, 4096, 4096): {"grouped": _FEW_ROWS},
    Problem(128, 4096, 4096): {"grouped": _FEW_ROWS},
    Problem(4096, 4096, 4093): {"grouped": _LARGE_GROUPED},
    Problem(4096, 4096, 4096, "float32"): {"persistent_tma": _FLOAT32_TMA},
}  # fmt: skip


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


def device_ms(fn: Callable[[], object]) -> float | None:
    """GPU time alone: ``fn`` replayed from a CUDA graph, so no Python runs between launches
    (and, unlike do_bench, nothing flushes L2 in between). None if it cannot be captured."""
    from triton.testing import do_bench_cudagraph

    try:
        return do_bench_cudagraph(fn, rep=20)
    except Exception:  # a capture can fail in many ways; this figure is optional
        return None


def race(
    problem: Problem,
    contenders: dict[str, Matmul],
    rounds: int = 5,
    operands: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict:
    """Check every contender's result, then time it against torch.matmul interleaved, on
    ``operands`` (by default, the problem's own)."""
    from tmm_course.timing import interleaved

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
    return {
        "problem": problem.as_dict(),
        "tolerance": limit,
        "error": errors,
        "wrong": wrong,
        "ms": ms,
        "tflops": {n: work / (t * 1e-3) / 1e12 for n, t in ms.items()},
        "ratio_to_torch": {n: ms["torch.matmul"] / t for n, t in ms.items()},
        "host_us": host,
        "device_ms_cuda_graph": device,
        "device_ratio_to_torch": {
            n: device["torch.matmul"] / t for n, t in device.items() if t and device["torch.matmul"]
        },
    }


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
    from triton.testing import do_bench

    src = torch.empty(mib * 2**20, dtype=torch.uint8, device=tmm_course.DEVICE)
    dst = torch.empty_like(src)
    ms = statistics.median(do_bench(lambda: dst.copy_(src), rep=100) for _ in range(3))
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def suite_goals(rounds: int) -> list[dict]:
    rows = []
    for problem, target in GOALS:
        a, b = problem.operands()
        row = race(problem, {"matmul_fast": fast.matmul_fast}, rounds, (a, b))
        row["target"] = target
        row["plan"] = str(fast.plan(a, b))
        rows.append(row)
        print(f"{problem.label:28s} ratio {row['ratio_to_torch']['matmul_fast']:.3f} "
              f"(goal {target:.2f}) host {row['host_us']['matmul_fast']:.0f} us "
              f"vs {row['host_us']['torch.matmul']:.0f} us  {row['plan']}", flush=True)  # fmt: skip
    return rows


def suite_journey(rounds: int) -> list[dict]:
    a, b = JOURNEY_PROBLEM.operands()
    steps = journey.runnable(a, b)
    row = race(JOURNEY_PROBLEM, {s.name: s.run for s in steps}, rounds, (a, b))
    for step in steps:
        print(f"{step.name:18s} ratio {row['ratio_to_torch'].get(step.name, float('nan')):.3f}")
    row["steps"] = [{"name": s.name, "change": s.change} for s in steps]
    return [row]


def suite_sweep(rounds: int) -> list[dict]:
    """Every configuration of SWEEPS, timed by CUDA-graph replays (device time alone, so the
    ranking is not blurred by Python overheads); torch.matmul timed the same way."""
    launchers = {
        "grouped": journey.grouped_launcher,
        "persistent_tma": journey.persistent_tma_launcher,
    }
    rows = []
    for problem, kernels in SWEEPS.items():
        a, b = problem.operands()
        reference = lambda a=a, b=b: torch.matmul(a, b)
        row = {"problem": problem.as_dict(), "kernels": {}}
        with torch_precision(problem):
            torch_ms = [device_ms(reference)]
            for name, configs in kernels.items():
                trials = tuning.sweep(
                    launchers[name], configs, a, b, problem.tolerance(), progress=False,
                    timer=device_ms,
                )  # fmt: skip
                row["kernels"][name] = [t.as_dict() for t in trials]
                torch_ms.append(device_ms(reference))
        row["torch_ms"] = statistics.median(torch_ms)
        for name, trials in row["kernels"].items():
            for t in sorted((t for t in trials if t["ms"]), key=lambda t: t["ms"])[:3]:
                print(f"{problem.label:28s} {name:15s} {row['torch_ms'] / t['ms']:.3f}x {t}")
            for t in (t for t in trials if not t["ms"]):
                print(f"{problem.label:28s} {name:15s} failed {t}", flush=True)
        rows.append(row)
    return rows


# problem -> contenders raced interleaved: the sweep's front runners
FINALS = {
    Problem(4096, 4096, 4096): {"persistent_tma": _configs(
        (128, 256, 64, 8, 3, 8, 1, True), (128, 256, 64, 8, 3, 8, 1, True, False),
        (128, 256, 64, 8, 3, 16, 1, True), (128, 256, 64, 8, 3, 16),
        (128, 256, 64, 8, 4, 8, 1, True),
    )},
    Problem(1024, 1024, 1024): {"grouped": _configs(
        (64, 128, 64, 4, 4), (64, 64, 64, 4, 4, 4), (128, 64, 64, 4, 4),
    ), "persistent_tma": _configs((64, 128, 64, 4, 4))},
    Problem(128, 4096, 4096): {"grouped": _configs(
        (64, 64, 128, 4, 4), (64, 128, 64, 4, 4, 8, 4), (64, 64, 128, 4, 3), (64, 128, 128, 4, 3),
        (32, 128, 128, 4, 4),
    )},
    Problem(4096, 4096, 4096, "float32"): {"persistent_tma": _configs(
        (128, 256, 32, 8, 3, 8, 1, True), (128, 256, 32, 8, 3, 16, 1, True),
        (128, 256, 32, 8, 3, 8, 1, True, False),
    )},
}  # fmt: skip


def suite_finals(rounds: int) -> list[dict]:
    """The sweep's front runners per problem, raced interleaved against torch.matmul."""
    rows = []
    for problem, kernels in FINALS.items():
        contenders = {
            f"{name} {config}": (lambda a, b, name=name, config=config:
                                 fast.matmul_fast(a, b, path=name, config=config))
            for name, configs in kernels.items()
            for config in configs
        }  # fmt: skip
        row = race(problem, contenders, rounds)
        for name in contenders:
            ratio = row["ratio_to_torch"].get(name, float("nan"))
            print(f"{problem.label:24s} {ratio:.3f}  {name}", flush=True)
        rows.append(row)
    return rows


def suite_host(rounds: int) -> list[dict]:
    """Where a call's host microseconds go, float16 1024^3 (device time is about 10 us)."""
    from tmm_course.kernels.matmul import check_operands, matmul

    problem = Problem(1024, 1024, 1024)
    a, b = problem.operands()
    c = torch.empty(1024, 1024, dtype=a.dtype, device=a.device)
    parts = {
        "torch.matmul": lambda: torch.matmul(a, b),
        "torch.empty for C": lambda: torch.empty(1024, 1024, dtype=a.dtype, device=a.device),
        "input checks": lambda: check_operands(a, b, "tf32"),
        "plan()": lambda: fast.plan(a, b, c),
        "3 tensor descriptors": lambda: [
            fast.TensorDescriptor.from_tensor(t, [64, 64]) for t in (a, b, c)
        ],
        "grouped kernel launch": lambda: fast.launch_grouped(a, b, c, fast.MEDIUM_GROUPED),
        "grouped launch, split-K 4": lambda: fast.launch_grouped(
            a, b, c, fast.Config(64, 64, 64, split_k=4)
        ),
        "persistent kernel launch": lambda: fast.launch_persistent_tma(a, b, c, fast.LARGE_TMA),
        "lesson 4 matmul()": lambda: matmul(a, b),
        "matmul_fast()": lambda: fast.matmul_fast(a, b),
    }
    for fn in parts.values():
        fn()
    host = {name: statistics.median(host_microseconds(fn) for _ in range(rounds))
            for name, fn in parts.items()}  # fmt: skip
    for name, us in host.items():
        print(f"host {name:28s} {us:6.1f} us")
    return [{"problem": problem.as_dict(), "host_us": host}]


def add_peak_fractions(rows: list[dict]) -> dict[str, float]:
    """The best torch.matmul TFLOP/s per dtype stands for the measured peak; each row gets the
    fraction of it every contender reached."""
    peaks: dict[str, float] = {}
    for row in rows:
        kind = row["problem"]["kind"]
        peaks[kind] = max(peaks.get(kind, 0.0), row["tflops"]["torch.matmul"])
    for row in rows:
        peak = peaks[row["problem"]["kind"]]
        row["fraction_of_peak"] = {n: t / peak for n, t in row["tflops"].items()}
    return peaks


SUITES = {
    "goals": suite_goals,
    "journey": suite_journey,
    "sweep": suite_sweep,
    "host": suite_host,
    "finals": suite_finals,
}


DEFAULT = ("goals", "journey", "host")


def stored(name: str = "bench_h200.json") -> dict:
    """A committed benchmark file."""
    return results.stored(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Race the course's kernels against torch.matmul.")
    parser.add_argument(
        "suites", nargs="*", help=f"any of {', '.join(SUITES)} (default: {' '.join(DEFAULT)})"
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per problem")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.suites) - set(SUITES))
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; expected any of {', '.join(SUITES)}")
    if tmm_course.BACKEND != "gpu":
        print("error: timings need compiled Triton on a GPU; the interpreter's are meaningless. "
              "The committed results are in results/.", file=sys.stderr)  # fmt: skip
        return 2
    torch.manual_seed(0)
    data = results.provenance("tmm_course.bench", argv)
    data["clocks_before"] = gpu_clocks()
    data["copy_bandwidth_gbs"] = copy_bandwidth_gbs()
    for suite in args.suites or DEFAULT:
        data[suite] = SUITES[suite](args.rounds)
        results.write(args.out, data)  # after each suite: a long run keeps what it measured
    if "goals" in data:
        data["peak_tflops"] = add_peak_fractions(data["goals"])
    data["clocks_after"] = gpu_clocks()
    results.write(args.out, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
