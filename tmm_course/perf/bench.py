"""The benchmark command: our kernels against ``torch.matmul`` (cuBLAS), same dtype, shape,
layout and precision, correctness checked first, timed interleaved, reported as ratios.

On a GPU::

    python -m tmm_course.perf.bench --out goals_mine.json               # goals, host times
    python -m tmm_course.perf.bench goals host tiny --out goals_mine.json  # and tiny products
    python -m tmm_course.perf.bench sweep --out sweep_mine.json         # every configuration
    python -m tmm_course.perf.bench fit grid --out grid_mine.json       # fit the plan, race it
    python -m tmm_course.perf.bench compare --out grid_mine.json        # does your own fit pay?
    python -m tmm_course.perf.bench refit --again grouped --out grid_mine.json  # kernel changed
    python -m tmm_course.perf.bench layouts pitches --out grid_mine.json  # layouts, row pitches
    python -m tmm_course.perf.bench held-out-inductor --out grid_mine.json  # Inductor's column
    python -m tmm_course.perf.bench paths --shape 333x7777x2222 --out grid_mine.json  # forced

writes TFLOP/s, ratios to torch, the fraction of the measured peak, host launch time, GPU
clocks, and where, when and how it was measured (``--code-version "$(git rev-parse --short
HEAD)"``: which code). Given a file it wrote before, it keeps that file's fit and grid rows and
measures only what is missing; each row it adds then names its own code version and date. The
committed H200 files live in ``tmm_course/perf/data`` (read them with
:mod:`tmm_course.perf.results`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

import tmm_course
from tmm_course import capstone, gpu, timing
from tmm_course.backend import GPU
from tmm_course.capstone import fit, launches, plans
from tmm_course.capstone.candidates import CANDIDATES, NEW
from tmm_course.capstone.config import Config
from tmm_course.capstone.fitted import THIS_FIT, Fitted, measured, other_fit, shipped
from tmm_course.capstone.kernels import TensorDescriptor
from tmm_course.capstone.problems import (
    EXTRA_FITTED,
    FITTED,
    GOALS,
    GRID,
    HELD_OUT,
    LAYOUTS,
    ODD_ROWS,
    ODD_ROWS_FITTED,
    ODD_ROWS_HELD_OUT,
    TINY,
    Problem,
)
from tmm_course.numerics import error
from tmm_course.perf import results, tuning
from tmm_course.perf.measure import (
    copy_bandwidth_gbs,
    gpu_clocks,
    host_microseconds,
    interleaved,
    race,
    torch_precision,
)
from tmm_course.perf.sweeps import SWEEPS
from tmm_course.timing import device_ms


def suite_goals(rounds: int) -> list[dict]:
    rows = []
    for problem, target in GOALS:
        a, b = problem.operands()
        row = race(problem, {"matmul_fast": capstone.matmul_fast}, rounds, (a, b))
        row = dataclasses.replace(row, target=target, plan=str(capstone.plan(a, b)))
        rows.append(row.as_dict())
        print(f"{problem.label:28s} ratio {row.ratio_to_torch['matmul_fast']:.3f} "
              f"(goal {target:.2f}) host {row.host_us['matmul_fast']:.0f} us "
              f"vs {row.host_us['torch.matmul']:.0f} us  {row.plan}", flush=True)  # fmt: skip
    return rows


def _progress(problems, done: set[str], what: str):
    from tqdm.auto import tqdm

    left = [p for p in problems if p.label not in done]
    return tqdm(left, desc=what, unit="problem", initial=len(problems) - len(left),
                total=len(problems), file=sys.stdout)  # fmt: skip


Keep = Callable[[list[dict]], None]


def _timer(rounds: int) -> fit.Timer:
    """The fit's timing: interleaved medians of each call with its host time (what a user waits
    for), torch.matmul at the problem's precision."""

    def timed(problem: Problem, runs: dict[str, Callable[[], object]]) -> dict[str, float]:
        with torch_precision(problem):
            return interleaved(runs, rounds, rep_ms=25)

    return timed


def _say(line: str) -> None:
    print(line, flush=True)


FIT = FITTED + EXTRA_FITTED + ODD_ROWS_FITTED  # the problems the plan is fitted on


def suite_fit(rounds: int, done: list[dict], keep: Keep) -> list[dict]:
    """fit_one on every problem of :data:`FIT` (``keep`` saves the rows after each);
    matmul_fast plans from the result at once."""
    rows = list(done)
    left = _progress(FIT, {r["problem"]["label"] for r in done}, "fit")
    for fitted in fit.fit(left, _timer(rounds), _say):
        rows.append(fitted.as_dict())
        keep(rows)
    capstone.use_fit([Fitted.from_dict(r) for r in rows])
    return rows


def suite_refit(rounds: int, done: list[dict], keep: Keep, again: tuple[str, ...] = ()
                ) -> list[dict]:  # fmt: skip
    """The fit of the --out file brought up to date: on each fitted problem, the candidates
    not measured before (``candidates.NEW``), and every candidate of the kernels ``again``
    names (after a change to that kernel), timed by :func:`fit.refit` and merged in (marked
    ``"refitted"``); problems of :data:`FIT` the fit lacks get every candidate."""
    new = NEW | {(path, c) for family in CANDIDATES.values()
                 for path, configs in family.items() if path in again for c in configs}  # fmt: skip
    rows = list(done)
    known = {r["problem"]["label"] for r in rows}
    for i, row in enumerate(rows):
        if not row.get("refitted"):
            merged = fit.refit(earlier := Fitted.from_dict(row), new, _timer(rounds), _say)
            row = rows[i] = row if merged is earlier else merged.as_dict()  # nothing new: as it was
            row["refitted"] = True
            keep(rows)
    missing = [p for p in FIT if p.label not in known]
    for fitted in fit.fit(missing, _timer(rounds), _say):
        rows.append({**fitted.as_dict(), "refitted": True})
        keep(rows)
    capstone.use_fit([Fitted.from_dict(r) for r in rows])
    return rows


def suite_grid(rounds: int, done: list[dict], keep: Keep) -> list[dict]:
    """matmul_fast raced against torch.matmul on every GRID problem, as the goals are; each
    row says whether the plan was fitted on it (``keep`` saves the rows after each)."""
    rows = list(done)
    fitted = {p.label for p in FITTED}
    for problem in _progress(GRID, {r["problem"]["label"] for r in done}, "grid"):
        a, b = problem.operands()
        row = race(problem, {"matmul_fast": capstone.matmul_fast}, rounds, (a, b))
        row = dataclasses.replace(row, plan=str(capstone.plan(a, b)))
        rows.append({**row.as_dict(), "fitted": problem.label in fitted})
        keep(rows)
        print(f"{problem.label:34s} {row.ratio_to_torch.get('matmul_fast', 0.0):.3f} "
              f"host {row.host_us.get('matmul_fast', 0.0):.0f} vs "
              f"{row.host_us['torch.matmul']:.0f} us  {row.plan}", flush=True)  # fmt: skip
    return rows


def suite_layouts(rounds: int) -> list[dict]:
    """matmul_fast raced against torch.matmul on every layout combination of A and B
    (``LAYOUTS``), as the goals are."""
    rows = []
    for problem in LAYOUTS:
        a, b = problem.operands()
        row = race(problem, {"matmul_fast": capstone.matmul_fast}, rounds, (a, b))
        row = dataclasses.replace(row, plan=str(capstone.plan(a, b)))
        rows.append(row.as_dict())
        print(f"{problem.label:44s} {row.ratio_to_torch['matmul_fast']:.3f}  {row.plan}",
              flush=True)  # fmt: skip
    return rows


FORCED = {path: f"matmul_fast(path={path!r})" for path in plans.PATHS}
LESSON_4 = "lesson 4's matmul"


def paths_problems(extra: Sequence[Problem] = (), everything: bool = False) -> list[Problem]:
    """What :func:`suite_paths` races: the grid's problems whose rows are off 16-byte
    boundaries, ``ODD_ROWS``, ``extra``; then, with ``everything``, the rest of the grid."""
    odd = [p for p in GRID if not p.rows_on_16_bytes]
    rest = [p for p in GRID if p.rows_on_16_bytes] if everything else []
    return list(dict.fromkeys([*odd, *ODD_ROWS, *extra, *rest]))


def suite_paths(rounds: int, done: list[dict], keep: Keep, problems: Sequence[Problem] = ()
                ) -> list[dict]:  # fmt: skip
    """matmul_fast as planned, and forced down each kernel (``path=``, the plan's configuration
    there, else the rules'), raced against torch.matmul on ``problems``; beside them, on rows
    off 16-byte boundaries, lesson 4's matmul (``keep`` saves the rows after each)."""
    from tmm_course.kernels.matmul import matmul

    fast = capstone.matmul_fast
    rows = list(done)
    for problem in _progress(problems, {r["problem"]["label"] for r in done}, "paths"):
        a, b = problem.operands()
        contenders = {
            "matmul_fast": fast,
            **{name: functools.partial(fast, path=path) for path, name in FORCED.items()},
        }
        if not problem.rows_on_16_bytes:
            contenders[LESSON_4] = matmul
        row = race(problem, contenders, rounds, (a, b))
        row = dataclasses.replace(row, plan=str(capstone.plan(a, b)))
        rows.append(row.as_dict())
        keep(rows)
        ratios = "  ".join(f"{name} {x:.3f}" for name, x in row.ratio_to_torch.items())
        print(f"{problem.label:34s} {ratios}  {row.plan}", flush=True)
    return rows


def suite_compare(rounds: int, done: list[dict], keep: Keep) -> list[dict]:
    """The plan from this GPU's own fit (the fit suite's, or the --out file's) raced beside the
    plan from each other card's shipped fit, interleaved with torch.matmul, on every held-out
    problem (:data:`HELD_OUT`, :data:`ODD_ROWS_HELD_OUT`): whether a fit of its own pays, which
    :func:`~tmm_course.capstone.fitted.card_for` reads (``keep`` saves the rows after each)."""
    if plans.fit_card() is not None:
        raise SystemExit("error: compare races this GPU's own fit: run `fit compare`, or give "
                         "--out a file that holds a fit")  # fmt: skip
    here = gpu.current()
    own = plans.fit_table()
    tables = {THIS_FIT: own, **{other_fit(card): shipped(card) for card in measured()
                                if here is None or gpu.KNOWN[card].name != here.name}}  # fmt: skip
    rows = list(done)
    problems = list(dict.fromkeys([*HELD_OUT, *ODD_ROWS_HELD_OUT]))
    try:
        for problem in _progress(problems, {r["problem"]["label"] for r in done}, "compare"):
            a, b = problem.operands()
            chosen = {}
            for name, table in tables.items():
                plans.use_fit(table)
                chosen[name] = capstone.plan(a, b)
            contenders = {name: functools.partial(capstone.matmul_fast, path=p.path,
                                                  config=p.config)
                          for name, p in chosen.items()}  # fmt: skip
            row = race(problem, contenders, rounds, (a, b))
            row = dataclasses.replace(row, plans={name: str(p) for name, p in chosen.items()})
            rows.append(row.as_dict())
            keep(rows)
            ratios = "  ".join(f"{x:.3f}" for x in row.ratio_to_torch.values())
            print(f"{problem.label:34s} {ratios}", flush=True)
    finally:
        plans.use_fit(own)
    return rows


def shape(text: str) -> Problem:
    """``MxNxK`` or ``MxNxK:dtype`` (float16 by default), as ``--shape`` takes it."""
    sizes, _, dtype = text.partition(":")
    try:
        m, n, k = (int(x) for x in sizes.lower().split("x"))
        return Problem(m, n, k, dtype or "float16")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected MxNxK or MxNxK:dtype, e.g. 333x7777x2222:bfloat16"
        ) from exc


# squares whose rows start mid-way through 128-byte lines (5000 and 3000 halves), and one whose
# rows start on them (4096: the control)
PITCHES = (Problem(5000, 5000, 5000), Problem(3000, 3000, 3000, "bfloat16"),
           Problem(4096, 4096, 4096))  # fmt: skip
ON_LINES = "rows on 128-byte lines"


def suite_pitches(rounds: int) -> list[dict]:
    """What rows that start mid-line cost: matmul_fast and torch.matmul on ``PITCHES``'s
    operands as they are, and on the same numbers in rows 128 bytes apart (the pitch rounded
    up, C's too); and matmul_fast after copying A and B there on every call."""
    rows = []
    for problem in PITCHES:
        a, b = problem.operands()
        row = race(problem, _on_lines(a, b), rounds, (a, b))
        row = dataclasses.replace(row, plan=str(capstone.plan(a, b)))
        rows.append(row.as_dict())
        ratios = "  ".join(f"{name} {x:.3f}" for name, x in row.ratio_to_torch.items())
        print(f"{problem.label:20s} {ratios}", flush=True)
    return rows


def _on_lines(a: torch.Tensor, b: torch.Tensor) -> dict[str, Callable[..., torch.Tensor]]:
    """:func:`suite_pitches`'s contenders for ``a @ b``."""
    lines = [launches.aligned_like(t).copy_(t) for t in (a, b)]
    c = launches.aligned_like(a.new_empty(a.shape[0], b.shape[1]))
    fast = capstone.matmul_fast
    return {
        "matmul_fast": fast,
        f"matmul_fast, {ON_LINES}": lambda a, b: fast(*lines, out=c),
        f"torch.matmul, {ON_LINES}": lambda a, b: torch.matmul(*lines),
        f"matmul_fast, copied to {ON_LINES} first": lambda a, b: fast(
            lines[0].copy_(a), lines[1].copy_(b), out=c
        ),
    }


# problems raced against Inductor's best Triton GEMM (each compiles for 4-47 s on an H200)
INDUCTOR_PROBLEMS = (
    Problem(4096, 4096, 4096), Problem(1024, 1024, 8192), Problem(128, 4096, 4096),
    Problem(256, 8192, 8192), Problem(1536, 1536, 1536), Problem(3072, 3072, 768),
    Problem(8192, 8192, 8192, "bfloat16"), Problem(3000, 3000, 3000, "bfloat16"),
)  # fmt: skip
INDUCTOR = "torch.compile max-autotune (Triton)"


def inductor_matmul() -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``a @ b`` through torch.compile's max-autotune with Triton templates only (no cuBLAS
    in the choice, no CUDA graphs): the best Triton GEMM a user gets without writing one."""
    import torch._inductor.config as inductor

    inductor.max_autotune_gemm_backends = "TRITON"
    return torch.compile(lambda a, b: a @ b, mode="max-autotune-no-cudagraphs", dynamic=False)


def suite_inductor(rounds: int, problems: Sequence[Problem] | None = None) -> list[dict]:
    """matmul_fast and Inductor's Triton GEMM, each raced against torch.matmul on ``problems``
    (default ``INDUCTOR_PROBLEMS``); a compile's seconds are kept beside its row."""
    import time

    rows = []
    for problem in INDUCTOR_PROBLEMS if problems is None else problems:
        a, b = problem.operands()
        torch._dynamo.reset()  # a fresh compile per problem (its cache would stop recompiling)
        compiled = inductor_matmul()
        start = time.perf_counter()
        with torch_precision(problem):  # the race's precision: dynamo guards on it
            compiled(a, b)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        contenders = {"matmul_fast": capstone.matmul_fast, INDUCTOR: compiled}
        row = race(problem, contenders, rounds, (a, b))
        row = dataclasses.replace(row, plan=str(capstone.plan(a, b)))
        rows.append({**row.as_dict(), "compile_s": seconds})
        r = row.ratio_to_torch
        print(f"{problem.label:28s} matmul_fast {r.get('matmul_fast', 0):.3f} inductor "
              f"{r.get(INDUCTOR, 0):.3f} (compiled in {seconds:.0f} s)", flush=True)  # fmt: skip
    return rows


def suite_held_out_inductor(rounds: int) -> list[dict]:
    """:func:`suite_inductor` on the grid's held-out half, less ``INDUCTOR_PROBLEMS``: Inductor
    as the grid's second column."""
    return suite_inductor(rounds, [p for p in HELD_OUT if p not in INDUCTOR_PROBLEMS])


def suite_sweep(rounds: int) -> list[dict]:
    """Every configuration of SWEEPS, timed by CUDA-graph replays (device time alone, so the
    ranking is not blurred by Python overheads); torch.matmul timed the same way."""
    launchers = {
        "grouped": tuning.grouped_launcher,
        "persistent_tma": tuning.persistent_tma_launcher,
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


def suite_host(rounds: int) -> list[dict]:
    """Where a call's host microseconds go, float16 1024^3 (about 6 us on an H200), and
    the paths whose kernel copies first: float32 (B^T) and 1023x1025x1027 (rows the TMA cannot
    read), each beside torch, as are bfloat16, column-major A and B, and float32 with a
    column-major B; the parts timed in turn, round after round (medians)."""
    from tmm_course.kernels.matmul import check_operands, matmul

    problem = Problem(1024, 1024, 1024)
    a, b = problem.operands()
    c = torch.empty(1024, 1024, dtype=a.dtype, device=a.device)
    a32, b32 = Problem(1024, 1024, 1024, "float32").operands()  # B^T copied for TF32
    odd_a, odd_b = Problem(1023, 1025, 1027).operands()  # rows the TMA cannot read: staged
    other = {  # the other dtypes and layouts
        "bfloat16": Problem(1024, 1024, 1024, "bfloat16"),
        "A and B column-major": Problem(1024, 1024, 1024, a_layout="col", b_layout="col"),
        "float32, B column-major": Problem(1024, 1024, 1024, "float32", b_layout="col"),
    }
    operands = {name: p.operands() for name, p in other.items()}
    tail = Config(128, 128, 64, num_warps=8, num_stages=4, split_tail=True)
    medium = Config(64, 128, 64, num_warps=4, num_stages=4)
    fast = capstone.matmul_fast
    parts = {
        "torch.matmul": lambda: torch.matmul(a, b),
        "torch.empty for C": lambda: torch.empty(1024, 1024, dtype=a.dtype, device=a.device),
        "input checks": lambda: check_operands(a, b, "tf32"),
        "plan()": lambda: capstone.plan(a, b, c),
        "3 tensor descriptors": lambda: [
            TensorDescriptor.from_tensor(t, [64, 64]) for t in (a, b, c)
        ],
        "grouped kernel launch": lambda: launches.launch_grouped(a, b, c, medium),
        "grouped launch, split-K 4": lambda: launches.launch_grouped(
            a, b, c, Config(64, 64, 64, split_k=4)
        ),
        "persistent kernel launch": lambda: launches.launch_persistent_tma(
            a, b, c, plans.LARGE_TMA
        ),
        "lesson 4 matmul()": lambda: matmul(a, b),
        "matmul_fast()": lambda: fast(a, b),
        **{
            f"matmul_fast(), {name}": lambda path=path, config=config: fast(
                a, b, path=path, config=config
            )
            for name, path, config in [
                ("grouped", "grouped", medium),
                ("split-K 4", "grouped", Config(64, 64, 64, split_k=4)),
                ("persistent TMA", "persistent_tma", plans.LARGE_TMA),
                ("persistent, split tail", "persistent_tma", tail),
            ]
        },
        "torch.matmul, float32": lambda: torch.matmul(a32, b32),
        "matmul_fast(), float32 (B^T copied)": lambda: fast(a32, b32),
        "torch.matmul, 1023x1025x1027": lambda: torch.matmul(odd_a, odd_b),
        "matmul_fast(), staged copies": lambda: fast(
            odd_a, odd_b, path="persistent_tma", config=plans.LARGE_TMA
        ),
        **{
            f"{who}, {name}": lambda fn=fn, ab=ab: fn(*ab)
            for name, ab in operands.items()
            for who, fn in (("torch.matmul", torch.matmul), ("matmul_fast()", fast))
        },
    }
    for fn in parts.values():
        fn()
    timed: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(rounds):  # interleaved: a slower stretch of the host touches every part
        for name, fn in parts.items():
            timed[name].append(host_microseconds(fn))
    host = {name: statistics.median(us) for name, us in timed.items()}
    for name, us in host.items():
        print(f"host {name:28s} {us:6.1f} us")
    return [{"problem": problem.as_dict(), "host_us": host}]


def wall_microseconds(fn: Callable[[], object], calls: int = 200) -> float:
    """Wall time of one call among ``calls`` back to back, synchronised once at the end: what a
    caller waits for when the host, not the GPU, is the slower of the two."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def suite_tiny(rounds: int) -> list[dict]:
    """matmul_fast and torch.matmul on each :data:`TINY` product: checked, then the wall time
    per call of back-to-back calls (:func:`wall_microseconds`), interleaved, medians."""
    rows = []
    for problem in TINY:
        a, b = problem.operands()
        runs = {"torch.matmul": functools.partial(torch.matmul, a, b),
                "matmul_fast": functools.partial(capstone.matmul_fast, a, b)}  # fmt: skip
        with torch_precision(problem):
            errors = {name: error(fn(), a, b) for name, fn in runs.items()}
            timed: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(rounds):
                for name, fn in runs.items():
                    timed[name].append(wall_microseconds(fn))
        wall = {name: statistics.median(us) for name, us in timed.items()}
        rows.append({"problem": problem.as_dict(), "tolerance": problem.tolerance(),
                     "error": errors, "wall_us": wall,
                     "plan": str(capstone.plan(a, b))})  # fmt: skip
        print(f"{problem.label:28s} {wall['matmul_fast']:5.1f} us a call vs "
              f"{wall['torch.matmul']:5.1f} us  {rows[-1]['plan']}", flush=True)  # fmt: skip
    return rows


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
    "fit": suite_fit,
    "grid": suite_grid,
    "goals": suite_goals,
    "sweep": suite_sweep,
    "host": suite_host,
    "tiny": suite_tiny,
    "refit": suite_refit,
    "layouts": suite_layouts,
    "inductor": suite_inductor,
    "held-out-inductor": suite_held_out_inductor,
    "pitches": suite_pitches,
    "paths": suite_paths,
    "compare": suite_compare,
}


DEFAULT = ("goals", "host")
# an existing --out file's rows are kept, not measured again (refit brings its "fit" up to date)
RESUMABLE = ("fit", "grid", "paths", "compare")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Race the course's kernels against torch.matmul.")
    parser.add_argument(
        "suites", nargs="*", help=f"any of {', '.join(SUITES)} (default: {' '.join(DEFAULT)})"
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per problem")
    parser.add_argument(
        "--code-version", help='the code measured, e.g. "$(git rev-parse --short HEAD)": the '
        "file's, or in a file resumed, each new row's (with its date)")  # fmt: skip
    parser.add_argument(
        "--again", action="append", default=[], choices=("grouped", "persistent_tma"),
        help="refit: time every candidate of this kernel again (after a change to it)")  # fmt: skip
    parser.add_argument(
        "--shape", action="append", default=[], type=shape,
        help="paths: race this problem too (MxNxK or MxNxK:dtype; repeat for more)")  # fmt: skip
    parser.add_argument(
        "--everything", action="store_true", help="paths: the rest of the grid after them"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.suites) - set(SUITES))
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; expected any of {', '.join(SUITES)}")
    if tmm_course.BACKEND != GPU:
        print("error: timings need compiled Triton on a GPU; the interpreter's are meaningless. "
              "The committed H200 results ship in tmm_course/perf/data.",
              file=sys.stderr)  # fmt: skip
        return 2
    torch.manual_seed(0)
    earlier = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    data = results.provenance("tmm_course.perf.bench", argv)
    data["clocks_before"] = gpu_clocks()
    data["copy_bandwidth_gbs"] = copy_bandwidth_gbs()
    data.update({suite: earlier[suite] for suite in RESUMABLE if suite in earlier})
    resumed = any(suite in earlier for suite in RESUMABLE)
    if resumed and timing.stored_timing(earlier) != data["timing"]:
        print(f"error: {args.out} was timed {timing.TIMINGS[timing.stored_timing(earlier)].words};"
              f" this run times {timing.TIMINGS[data['timing']].words}: measure it again into a "
              "new --out file", file=sys.stderr)  # fmt: skip
        return 2
    if resumed:  # what measured the rows kept
        before = {key: earlier[key] for key in ("date", "command", "code") if key in earlier}
        data["earlier"] = [*earlier.get("earlier", []), before]
    if args.code_version and not resumed:
        data["code"] = args.code_version
    elif "code" in earlier:
        data["code"] = earlier["code"]
    kept = {id(row) for suite in RESUMABLE for row in data.get(suite, [])}

    def stamped(rows: list[dict]) -> list[dict]:
        """Rows measured in this run of a resumed file, each naming its own code and date."""
        if not (resumed and args.code_version):
            return rows
        mark = {"code": args.code_version, "date": data["date"]}
        return [row if id(row) in kept else {**row, **mark} for row in rows]

    if "fit" in data and not {"fit", "refit"} & set(args.suites):  # a grid after its fit
        capstone.use_fit([Fitted.from_dict(r) for r in data["fit"]])
    for suite in args.suites or DEFAULT:
        if suite in (*RESUMABLE, "refit"):
            name = "fit" if suite == "refit" else suite

            def keep(rows: list[dict], name: str = name) -> None:
                data[name] = stamped(rows)
                results.write(args.out, data)

            run = SUITES[suite]
            if suite == "refit":
                run = functools.partial(suite_refit, again=tuple(args.again))
            if suite == "paths":
                picked = paths_problems(args.shape, args.everything)
                run = functools.partial(suite_paths, problems=picked)
            data[name] = stamped(run(args.rounds, data.get(name, []), keep))
        else:
            data[suite] = stamped(SUITES[suite](args.rounds))
        results.write(args.out, data)  # after each suite: a long run keeps what it measured
    if "goals" in data:
        data["peak_tflops"] = add_peak_fractions(data["goals"])
    data["clocks_after"] = gpu_clocks()
    results.write(args.out, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
