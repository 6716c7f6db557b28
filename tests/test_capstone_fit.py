"""What the capstone's fit races: the candidates, and the problems its plan is fitted on."""

from __future__ import annotations

from tmm_course import capstone, gpu
from tmm_course.capstone import fit
from tmm_course.capstone.candidates import CANDIDATES, NEW, for_float32, size_class
from tmm_course.capstone.fitted import shipped
from tmm_course.capstone.plans import shared_memory_bytes
from tmm_course.capstone.problems import EXTRA_FITTED, FITTED, GRID, Problem
from tmm_course.perf import bench, results


def _every_candidate():
    return [(path, c) for paths in CANDIDATES.values() for path, cs in paths.items() for c in cs]


def test_every_16_bit_candidate_fits_an_h200s_shared_memory():
    for path, config in _every_candidate():
        assert shared_memory_bytes(path, config, 2) <= gpu.KNOWN["H200"].shared_memory, str(config)


def test_new_names_exactly_the_candidates_the_shipped_fit_never_timed():
    timed = {key for fitted in shipped() for key in fitted.measured()}
    never = {(path, c) for path, c in _every_candidate()
             if (path, c) not in timed and (path, for_float32(c)) not in timed}  # fmt: skip
    assert never == set(NEW)


def test_every_candidate_wins_somewhere_or_is_planned_for_the_grid():
    best = set()
    for fitted in shipped():
        for kernel in ("grouped", "persistent_tma"):
            ratios = {k: r for k, r in fitted.measured().items() if k[0] == kernel}
            best |= {max(ratios, key=ratios.get)} if ratios else set()
    planned = {(r.plan.split(" kernel, ")[0], r.plan.split(" kernel, ")[1].split(":")[0])
               for r in results.grid().rows}  # fmt: skip
    for path, c in _every_candidate():
        kept = {(path, c), (path, for_float32(c))} & best or (path, str(c)) in planned
        assert kept, f"{path} {c} is never the best of its kernel nor planned: the budget drops it"


def test_extra_fitted_problems_are_none_of_the_grids():
    assert set(EXTRA_FITTED).isdisjoint(GRID)
    assert len({p.label for p in EXTRA_FITTED}) == len(EXTRA_FITTED)


def test_extra_fitted_problems_cover_each_size_class():
    classes = {size_class(p.m, p.n) for p in EXTRA_FITTED}
    assert classes == set(CANDIDATES)  # few rows, middle and large each get neighbours


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
    assert asked == [p for p in bench.FIT if p != have]


def test_a_refit_with_nothing_new_to_time_keeps_the_row_it_had(monkeypatch):
    fitted = shipped()[0]
    done = [{**fitted.as_dict()}]
    monkeypatch.setattr(bench.fit, "refit", lambda earlier, *_: earlier)
    monkeypatch.setattr(bench.fit, "fit", lambda *_: iter(()))
    try:
        rows = bench.suite_refit(1, done, lambda rows: None)
    finally:
        capstone.use_fit(None)
    assert rows[0] is done[0] and rows[0]["refitted"]  # not a row this run measured


_MIDDLE = Problem(1536, 1536, 1536)
_PERSISTENT = [("persistent_tma", c) for c in CANDIDATES["middle"]["persistent_tma"][:2]]
_GROUPED = ("grouped", CANDIDATES["middle"]["grouped"][0])


def _refit_where_this_run_measures(monkeypatch, now: dict) -> fit.Fitted:
    """A refit of a record (persistent 1.00 and 0.98, grouped 0.90) that times the grouped
    candidate again, with this run's ratios ``now``."""
    earlier = fit.Fitted.best_of(_MIDDLE, {_PERSISTENT[0]: 1.0, _PERSISTENT[1]: 0.98,
                                           _GROUPED: 0.9})  # fmt: skip
    asked = []

    def ratios(problem, timed, say, pairs):
        asked.append(list(pairs))
        return now

    monkeypatch.setattr(fit, "ratios", ratios)
    refitted = fit.refit(earlier, [_GROUPED], None, lambda line: None)
    assert asked == [[_GROUPED, _PERSISTENT[0]]]  # the new one beside the known best
    return refitted


def test_a_refit_puts_what_it_times_on_the_earlier_runs_scale(monkeypatch):
    # this run is 10% slower on the anchor: the grouped 0.99 counts as 0.99 / 0.9 = 1.10
    refitted = _refit_where_this_run_measures(monkeypatch, {_PERSISTENT[0]: 0.9, _GROUPED: 0.99})
    assert (refitted.path, refitted.config) == _GROUPED
    assert abs(refitted.ratio - 1.1) < 1e-9
    assert refitted.measured()[_PERSISTENT[1]] == 0.98  # not timed again: as it was


def test_noise_on_the_anchor_moves_no_known_winner(monkeypatch):
    # the anchor reads 0.90 now, below the runner-up's 0.98 then: it still wins, at 1.00
    refitted = _refit_where_this_run_measures(monkeypatch, {_PERSISTENT[0]: 0.9, _GROUPED: 0.85})
    assert ((refitted.path, refitted.config), refitted.ratio) == (_PERSISTENT[0], 1.0)


def test_a_refit_times_new_persistent_candidates_beside_a_persistent_anchor(monkeypatch):
    # no grouped candidate is timed in this run: the new persistent one still lands
    monkeypatch.setattr(fit, "ratios", lambda problem, timed, say, pairs: dict.fromkeys(pairs, 1.2))
    earlier = fit.Fitted.best_of(_MIDDLE, {_PERSISTENT[0]: 1.0, _GROUPED: 0.9})
    refitted = fit.refit(earlier, [_PERSISTENT[1]], None, lambda line: None)
    assert refitted.measured()[_PERSISTENT[1]] == 1.0  # 1.2 on a run that reads the anchor 1.2


def test_a_refit_again_of_a_kernel_times_every_candidate_of_it(monkeypatch):
    asked = []
    monkeypatch.setattr(bench.fit, "refit", lambda earlier, new, *_: asked.append(new) or earlier)
    monkeypatch.setattr(bench.fit, "fit", lambda *_: iter(()))
    try:
        bench.suite_refit(1, [shipped()[0].as_dict()], lambda rows: None, again=("grouped",))
    finally:
        capstone.use_fit(None)
    grouped = {("grouped", c) for family in CANDIDATES.values() for c in family["grouped"]}
    assert asked == [NEW | grouped]


class _NoFit:
    """Stands for Fitted where the rows are not real fit records."""

    @staticmethod
    def from_dict(data: dict) -> Problem:
        return Problem.from_dict(data["problem"])


def test_the_shipped_grid_was_raced_with_the_plans_this_code_makes(monkeypatch):
    import torch

    from tmm_course.capstone import launches, plans
    from tmm_course.capstone.problems import LAYOUTS

    monkeypatch.setattr(launches, "program_slots", lambda: 132)  # an H200's SMs
    monkeypatch.setattr(plans, "program_slots", lambda: 132)
    grid = results.grid()
    stored = {row.label: row.plan for row in grid.rows + grid.layouts + grid.paths}
    for p in GRID + LAYOUTS + tuple(row.problem for row in grid.paths):
        if p.label in grid.replanned:  # raced before a change of plan, as the file says
            continue
        dtype = getattr(torch, p.dtype)
        a = torch.empty(p.m, p.k, dtype=dtype) if p.a_layout == "row" else torch.empty(
            p.k, p.m, dtype=dtype).t()  # fmt: skip
        b = torch.empty(p.k, p.n, dtype=dtype) if p.b_layout == "row" else torch.empty(
            p.n, p.k, dtype=dtype).t()  # fmt: skip
        in_place = not plans.copies_pay(p.m, p.n, p.k, p.odd_operands)  # as on a GPU
        chosen = plans.plan_by_fit(a, b, None, in_place)
        assert stored[p.label].startswith(f"{chosen.path} kernel, {chosen.config}:"), p.label


def test_odd_rows_are_off_16_byte_lines_and_fitted_on_one_half_in_each_size_class():
    from tmm_course.capstone.problems import ODD_ROWS, ODD_ROWS_FITTED

    assert not any(p.rows_on_16_bytes for p in ODD_ROWS)
    assert set(ODD_ROWS).isdisjoint(GRID + EXTRA_FITTED)
    fitted = {f.problem for f in shipped()}
    assert set(ODD_ROWS_FITTED) <= fitted and fitted.isdisjoint(ODD_ROWS[1::2])
    classes = {size_class(p.m, p.n) for p in ODD_ROWS_FITTED if p.dtype != "float32"}
    assert classes == set(CANDIDATES) and "float32" in {p.dtype for p in ODD_ROWS_FITTED}


PERSISTENT, GROUPED = (f"matmul_fast(path={path!r})" for path in ("persistent_tma", "grouped"))


def test_the_plan_runs_within_a_tenth_of_the_faster_kernel_on_every_stored_problem():
    from tmm_course.capstone.problems import ODD_ROWS
    from tmm_course.perf.bench import LESSON_4

    rows = results.grid().paths
    assert {p.label for p in GRID + ODD_ROWS} <= {r.label for r in rows}
    assert {"333x7777x2222 float16", "2047x2049x2051 float16"} <= {r.label for r in rows}
    for row in rows:
        r = row.ratio_to_torch
        best = max(r[PERSISTENT], r[GROUPED])
        assert r["matmul_fast"] >= 0.9 * best, row.label
        assert row.code and row.date, row.label  # each row names its code and day
        if row.problem.rows_on_16_bytes:
            continue
        assert r["matmul_fast"] >= 0.85 or best < 0.85, row.label
        # the grouped kernel no slower than lesson 4's, or the plan runs the other one there
        assert r[GROUPED] >= r[LESSON_4] or row.plan.startswith("persistent_tma"), row.label


def _fake_gpu(monkeypatch, here):
    from tmm_course.capstone import plans

    monkeypatch.setattr(gpu, "current", lambda: here)
    plans.use_fit(None)


def test_the_plan_reads_the_fit_measured_on_the_gpu_in_hand_where_it_pays(monkeypatch):
    import torch

    from tmm_course.capstone import plans
    from tmm_course.capstone.fitted import measured, pays

    a, b = torch.empty(3000, 2000).half(), torch.empty(2000, 5000).half()
    assert {"H100", "H200"} <= set(measured()) and pays("H200")
    for card in measured():
        _fake_gpu(monkeypatch, gpu.KNOWN[card])
        assert results.grid(f"grid_{card.lower()}.json").provenance.device == gpu.KNOWN[card].name
        reads = card if pays(card) else "H200"  # else the nearest: the same capability
        table = plans.fit_table()
        assert table and [f.as_dict() for f in table] == [f.as_dict() for f in shipped(reads)]
        said = f"the {card}'s fit" if pays(card) else "derived from the H200's fit"
        assert said in plans.plan_by_fit(a, b, None).reason


def test_a_cards_own_fit_is_read_where_it_ran_held_out_problems_as_fast_as_the_others(
    monkeypatch,
):
    from tmm_course.capstone import fitted

    def compared(*pairs: tuple[float, float]) -> dict:  # (this fit's, the H200's) per problem
        rows = [{"ratio_to_torch": {"torch.matmul": 1.0, fitted.THIS_FIT: mine,
                                    fitted.other_fit("H200"): theirs}}
                for mine, theirs in pairs]  # fmt: skip
        return {"fit": [], "compare": rows}

    def reads(grid: dict) -> str:
        monkeypatch.setattr(fitted, "_READ", {"H100": grid})
        return str(fitted.card_for(gpu.KNOWN["H100"]))

    assert reads(compared((1.2, 1.0), (0.9, 1.0))) == "the H100's fit"  # 1.039 against 1.0
    assert reads(compared((1.1, 1.0), (0.9, 1.0))) == (  # 0.995 against 1.0
        "derived from the H200's fit, which beat the H100's own on held-out problems"
    )
    assert reads({"fit": []}) == (  # never raced: the fit the lessons quote stands
        "derived from the H200's fit (the H100's own is not raced against it yet)"
    )
    assert fitted.pays(fitted.QUOTED) and str(fitted.card_for(None)) == "the H200's fit"


def test_a_gpu_without_a_fit_plans_from_the_nearest_measured_one_and_says_so(monkeypatch):
    import dataclasses

    import torch

    from tmm_course.capstone import plans
    from tmm_course.capstone.fitted import measured, pays

    pcie = dataclasses.replace(gpu.KNOWN["H100"], name="NVIDIA H100 PCIe", sms=114)
    _fake_gpu(monkeypatch, pcie)
    a, b = torch.empty(4096, 4096).half(), torch.empty(4096, 4096).half()
    # the same capability, then the nearest SMs: the H100, where its fit pays
    nearest = "H100" if "H100" in measured() and pays("H100") else "H200"
    assert f"derived from the {nearest}'s fit" in plans.plan_by_fit(a, b, None).reason
    assert [f.as_dict() for f in plans.fit_table()] == [f.as_dict() for f in shipped(nearest)]
    _fake_gpu(monkeypatch, gpu.KNOWN["A100"])  # no TMA: the grouped kernel, from a Hopper's fit
    chosen = plans.plan_by_fit(a, b, None)
    assert chosen.path == "grouped" and "derived from the H" in chosen.reason
