"""What the course's timings measure, on a GPU made of a clock: a call whose host work (a
sleep) outlasts its GPU work (a stretch of the fake GPU's queue). Triton's ``do_bench`` runs
against the same fake through its driver, as it runs against a real one."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
import triton.testing
from conftest import ROOT

from tmm_course import timing
from tmm_course.perf import results

HOST_S, GPU_S, FLUSH_S = 2e-3, 0.2e-3, 6e-3  # a slow launch path, a short kernel, a 256 MB fill


class FakeGPU:
    """One stream: work queued runs after the work before it; an event is stamped when the
    stream reaches it; synchronizing waits for the stream to drain."""

    def __init__(self) -> None:
        self.free_at = time.perf_counter()

    def queue(self, seconds: float) -> None:
        self.free_at = max(self.free_at, time.perf_counter()) + seconds

    def synchronize(self) -> None:
        time.sleep(max(0.0, self.free_at - time.perf_counter()))

    def Event(self, enable_timing: bool = False) -> object:  # torch.cuda's name
        gpu = self

        class Event:
            def record(self) -> None:
                self.at = max(gpu.free_at, time.perf_counter())

            def elapsed_time(self, end: Event) -> float:
                return (end.at - self.at) * 1e3

        return Event()


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> FakeGPU:
    fake = FakeGPU()
    cache = SimpleNamespace(zero_=lambda: fake.queue(FLUSH_S))
    driver = SimpleNamespace(
        get_device_interface=lambda: fake,
        get_empty_cache_for_benchmark=lambda: cache,
        clear_cache=lambda c: c.zero_(),
    )
    runtime = SimpleNamespace(driver=SimpleNamespace(active=driver))
    monkeypatch.setattr(triton.testing, "runtime", runtime)
    monkeypatch.setattr(triton, "runtime", runtime)
    return fake


def test_with_host_is_what_a_user_waits_for_and_cold_cache_hides_it(gpu: FakeGPU) -> None:
    def call() -> None:
        time.sleep(HOST_S)  # checks, plan, launch: Python's part of the call
        gpu.queue(GPU_S)  # the kernel

    with_host = timing.interleaved({"call": call}, rounds=1, rep_ms=20)["call"]
    assert with_host >= HOST_S * 1e3 > 2 * GPU_S * 1e3  # the host sets the pace
    cold = timing.interleaved({"call": call}, rounds=1, rep_ms=20, timer=timing.cold_cache_ms)
    assert cold["call"] < HOST_S * 1e3 / 2  # the flush hid the host's part: not "with host"


def test_with_host_is_the_gpus_time_when_the_gpu_is_the_slower(gpu: FakeGPU) -> None:
    def call() -> None:
        gpu.queue(HOST_S)  # a kernel longer than its launch: calls queue up behind it

    assert timing.with_host_ms(call, rep_ms=20) == pytest.approx(HOST_S * 1e3, rel=0.3)


def test_a_stored_run_says_how_it_was_timed() -> None:
    assert timing.stored_timing({}) == "cold_cache"  # runs from before named no timing
    assert timing.stored_timing({"timing": "with_host"}) == "with_host"
    with pytest.raises(ValueError, match="known ones"):
        timing.stored_timing({"timing": "stopwatch"})


def _prose(name: str) -> str:
    cells = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))["cells"]
    return " ".join(
        " ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown"
    )


def test_every_stored_race_is_labelled_with_how_it_was_timed_and_agrees_with_it() -> None:
    """Lessons 6-8 print each stored run's timing beside its figures, and say "host time
    included" of none in their prose; a run timed with host time cannot have raced a call
    faster than its host part, and lesson 8's sentence on do_bench holds of its grid run."""
    lessons = ("06_making_it_fast.ipynb", "07_persistent_tma.ipynb", "08_racing_cublas.ipynb")
    for name in lessons:
        assert "host time included" not in _prose(name), name
    grid, races = results.grid(), results.races()
    for rows, provenance in ((grid.rows, grid.provenance), (races.inductor, races.provenance)):
        if provenance.timing == "with_host":
            for row in rows:
                for who, us in row.host_us.items():
                    assert row.ms[who] * 1e3 >= 0.9 * us, (row.label, who)
    said = "This run's, `do_bench`'s, flushes L2" in _prose("08_racing_cublas.ipynb")
    assert said == (grid.provenance.timing == "cold_cache")
