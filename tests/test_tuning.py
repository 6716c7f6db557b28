"""Autotuning by hand keeps the fastest correct configuration, and the launchers it sweeps
compute the product."""

from __future__ import annotations

import pytest
import torch

import tmm_course
from tmm_course.capstone.config import Config
from tmm_course.numerics import error, tolerance
from tmm_course.perf import tuning


def operands(m=48, n=40, k=36):
    a = torch.randn(m, k, device=tmm_course.DEVICE).half()
    return a, torch.randn(k, n, device=tmm_course.DEVICE).half()


def fake_timer(times):
    """Stands in for do_bench on the CPU: runs the candidate, returns the next made-up time."""
    it = iter(times)

    def timer(fn):
        fn()
        return next(it)

    return timer


def test_sweep_times_correct_configs_and_records_wrong_and_failing_ones():
    a, b = operands()
    good, bad, broken = Config(16, 16, 16), Config(32, 32, 32), Config(64, 64, 64)

    def launcher(config):
        if config == broken:
            return lambda a, b: (_ for _ in ()).throw(RuntimeError("out of resource"))
        if config == bad:
            return lambda a, b: torch.zeros(a.shape[0], b.shape[1], device=a.device).half()
        return tuning.grouped_launcher(config)

    trials = tuning.sweep(launcher, [good, bad, broken], a, b, 1e-3, False, fake_timer([0.5]))
    assert [t.ms for t in trials] == [0.5, None, None]
    assert trials[1].failure == "wrong result" and trials[1].error > 1e-3
    assert trials[2].failure.startswith("RuntimeError: out of resource")
    assert tuning.fastest(trials).config == good


def test_fastest_refuses_when_nothing_ran():
    with pytest.raises(ValueError, match="no configuration ran correctly"):
        tuning.fastest([tuning.Timing(Config(16, 16, 16), None, None, "boom")])


def test_fastest_picks_the_lowest_time():
    slow, quick = Config(16, 16, 16), Config(32, 32, 32)
    trials = [tuning.Timing(slow, 2.0, 0.0), tuning.Timing(quick, 1.0, 0.0)]
    assert tuning.fastest(trials).config == quick


@pytest.mark.parametrize("launcher", [tuning.grouped_launcher, tuning.persistent_tma_launcher])
def test_each_swept_launcher_computes_the_product(launcher):
    a, b = operands(128, 128, 64)  # rows on 16 bytes: the tensor descriptors can read them
    run = launcher(Config(32, 32, 32))
    assert error(run(a, b), a, b) <= tolerance(torch.float16, tmm_course.BACKEND)
