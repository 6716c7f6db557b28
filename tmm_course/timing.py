"""Timing on a GPU, three figures, each named for what it measures:

* :func:`with_host_ms`: what a user waits for. The wall time of back-to-back calls, made as a
  user makes them (nothing in between, the GPU synchronised once at the end), per call. A call
  whose host work outlasts its GPU work costs its host time here.
* :func:`device_ms`: the GPU alone. The calls replayed from a CUDA graph: no Python runs
  between launches, so no host time is in it.
* :func:`cold_cache_ms`: a named choice for cold-cache figures. ``triton.testing.do_bench``
  zeroes a 256 MB buffer before each timed call (L2 holds none of the operands) and times the
  call from an event recorded after that fill: the call's host work overlaps the fill and
  goes unseen, so this is GPU time with a cold L2, never a "with host" figure.

:func:`interleaved` times candidates in turn (a power-capped card drifts; interleaving spreads
the drift evenly) with one of them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import NamedTuple

Timer = Callable[[Callable[[], object], int], float]  # (call, repetition ms) -> ms per call


class Timing(NamedTuple):
    column: str  # a table's heading for its figures
    words: str  # how its calls were timed, printed beside its figures
    short: str  # the same in a few words, after a figure in a sentence

    def __str__(self) -> str:
        return self.words


# How a stored run timed its calls, as a lesson prints it; the run names its timing ("timing"
# beside its command), runs from before named none: do_bench's.
TIMINGS = {
    "with_host": Timing("with host", "each call back to back, host time included (what a user "
                        "waits for)", "host time included"),
    "device": Timing("device only", "replayed from a CUDA graph: the GPU's time alone, no "
                     "host time (for a product shorter than a launch from Python)",
                     "the GPU's time alone"),
    "cold_cache": Timing("cold L2", "do_bench's: L2 flushed before each call, the call's host "
                         "work hidden behind the flush (GPU time from a cold cache)",
                         "L2 flushed before each call"),
}  # fmt: skip
BEFORE = "cold_cache"


def stored_timing(provenance: dict) -> str:
    """The timing a stored run's provenance names (a key of :data:`TIMINGS`)."""
    name = provenance.get("timing", BEFORE)
    if name not in TIMINGS:
        raise ValueError(f"a stored run names timing {name!r}; the known ones are {list(TIMINGS)}")
    return name


def _synchronize() -> None:
    """Wait for the GPU (through Triton's active driver: the device do_bench times on)."""
    from triton import runtime

    runtime.driver.active.get_device_interface().synchronize()


def with_host_ms(fn: Callable[[], object], rep_ms: int = 50) -> float:
    """Milliseconds per call of ``fn`` called back to back for about ``rep_ms``, wall time,
    the GPU synchronised once before and once after: host and GPU work as a user meets them
    (whichever is the longer sets the pace)."""
    fn()
    _synchronize()
    start = time.perf_counter()
    for _ in range(5):
        fn()
    _synchronize()
    estimate_ms = (time.perf_counter() - start) * 1e3 / 5
    calls = max(5, int(rep_ms / max(estimate_ms, 1e-3)))
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    _synchronize()
    return (time.perf_counter() - start) * 1e3 / calls


def device_ms(fn: Callable[[], object], rep_ms: int = 20) -> float | None:
    """Milliseconds per call on the GPU alone: ``fn`` replayed from a CUDA graph (and nothing
    flushes L2 in between). None if the call cannot be captured."""
    from triton.testing import do_bench_cudagraph

    try:
        return do_bench_cudagraph(fn, rep=rep_ms, return_mode="median")
    except Exception:  # a capture can fail in many ways; this figure is optional
        return None


def graph_ms(fn: Callable[[], object], rep_ms: int = 20) -> float:
    """:func:`device_ms`, or a ValueError that says why a call cannot be timed so: it must
    only launch work on the GPU, as a CUDA graph records it."""
    ms = device_ms(fn, rep_ms)
    if ms is None:
        raise ValueError(
            "this call cannot be captured in a CUDA graph, so its GPU time cannot be taken alone: "
            "it waits for the GPU or copies to the host (.item(), .cpu(), print of a tensor). "
            "Expected a launcher that only launches kernels; move such work out of it."
        )
    return ms


def cold_cache_ms(fn: Callable[[], object], rep_ms: int = 50) -> float:
    """Median milliseconds per call with L2 flushed before each (``do_bench``): GPU time from a
    cold cache; the host's part of each call hides behind the flush."""
    from triton.testing import do_bench

    return do_bench(fn, rep=rep_ms, return_mode="median")


def interleaved(
    candidates: dict[str, Callable[[], object]],
    rounds: int = 5,
    rep_ms: int = 50,
    timer: Timer = with_host_ms,
) -> dict[str, float]:
    """Median milliseconds per call of each candidate over ``rounds`` interleaved runs of
    ``timer`` (by default :func:`with_host_ms`: what a user waits for)."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():
        fn()  # compile and warm up before any timing
    for _ in range(rounds):
        for name, fn in candidates.items():
            times[name].append(timer(fn, rep_ms))
    return {name: statistics.median(ms) for name, ms in times.items()}


# the function that times calls as each of TIMINGS says
TIMERS: dict[str, Timer] = {"with_host": with_host_ms, "device": graph_ms,
                            "cold_cache": cold_cache_ms}  # fmt: skip
