"""What the capstone's fit races: the candidates, and the problems its plan is fitted on."""

from __future__ import annotations

from tmm_course import capstone, gpu
from tmm_course.capstone.candidates import CANDIDATES, NEW, candidates_for, for_float32
from tmm_course.capstone.plans import shared_memory_bytes
from tmm_course.capstone.problems import EXTRA_FITTED, FITTED, GRID, Problem
from tmm_course.perf import bench


def _every_candidate():
    return [(path, c) for paths in CANDIDATES.values() for path, cs in paths.items() for c in cs]


def _shared_memory(path, config, itemsize):
    used = shared_memory_bytes(config, itemsize)
    if path == "persistent_tma":  # C leaves through shared memory, in halves if subtiled
        used += config.block_m * config.block_n * itemsize // (2 if config.subtile else 1)
    return used


def test_every_16_bit_candidate_fits_an_h200s_shared_memory():
    for path, config in _every_candidate():
        assert _shared_memory(path, config, 2) <= gpu.KNOWN["H200"].shared_memory, str(config)


def test_every_new_candidate_fits_an_h200s_shared_memory_for_float32_too():
    for path, config in NEW:
        used = _shared_memory(path, for_float32(config), 4)
        assert used <= gpu.KNOWN["H200"].shared_memory, str(config)


def test_the_new_candidates_are_candidates():
    assert set(_every_candidate()) >= NEW


def test_extra_fitted_problems_are_none_of_the_grids():
    assert set(EXTRA_FITTED).isdisjoint(GRID)
    assert len({p.label for p in EXTRA_FITTED}) == len(EXTRA_FITTED)


def test_extra_fitted_problems_cover_each_size_class():
    sizes = {len(candidates_for(p.m, p.n, p.k, p.dtype)) for p in EXTRA_FITTED}
    assert len(sizes) == len(CANDIDATES)  # few rows, middle and large each get neighbours


def test_refit_fully_fits_the_fitted_and_extra_problems_the_file_lacks(monkeypatch):
    asked = []

    def fit(problems, timed, say):
        asked.extend(problems)
        return iter(())

    monkeypatch.setattr(bench.fit, "fit", fit)
    have = FITTED[0]
    done = [{"problem": have.as_dict(), "refitted": True}]
    monkeypatch.setattr(bench, "Fitted", _NoFit)
    try:
        bench.suite_refit(1, done, lambda rows: None)
    finally:
        capstone.use_fit(None)
    assert asked == [p for p in FITTED + EXTRA_FITTED if p != have]


class _NoFit:
    """Stands for Fitted where the rows are not real fit records."""

    @staticmethod
    def from_dict(data: dict) -> Problem:
        return Problem.from_dict(data["problem"])
