"""Timing on a GPU, side by side: each candidate's median milliseconds over interleaved
``do_bench`` rounds (a power-capped card drifts; interleaving spreads the drift evenly)."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def interleaved(
    candidates: dict[str, Callable[[], object]], rounds: int = 5, rep_ms: int = 50
) -> dict[str, float]:
    """Median milliseconds of each candidate over ``rounds`` interleaved do_bench runs."""
    from triton.testing import do_bench

    times: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():
        fn()  # compile and warm up before any timing
    for _ in range(rounds):
        for name, fn in candidates.items():
            times[name].append(do_bench(fn, rep=rep_ms, return_mode="median"))
    return {name: statistics.median(ms) for name, ms in times.items()}
