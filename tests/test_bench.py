"""Lesson 6's benchmark: the problems it races, the files it writes, the results we ship."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

import tmm_course
from tmm_course.backend import GPU
from tmm_course.capstone.config import Config
from tmm_course.capstone.problems import GOALS, Problem
from tmm_course.perf import bench, measure


def test_goals_cover_every_shape_and_dtype_of_the_issue():
    labels = {problem.label for problem, _ in GOALS}
    for shape in ["4096^3", "8192^3", "1024^3", "16x4096x4096", "128x4096x4096", "4096x4096x4093"]:
        assert {f"{shape} float16", f"{shape} bfloat16"} <= labels
    assert "4096^3 float32 (tf32)" in labels


def test_problem_kind_names_dtype_and_float32_precision():
    assert Problem(8, 8, 8, "bfloat16").kind == "bfloat16"
    assert Problem(8, 8, 8, "float32", "ieee").as_dict()["kind"] == "float32 (ieee)"


def test_problem_operands_are_row_major_and_reproducible():
    problem = Problem(8, 6, 4, "float16")
    a, b = problem.operands(seed=3)
    a2, _ = problem.operands(seed=3)
    assert a.shape == (8, 4) and b.shape == (4, 6) and a.is_contiguous() and b.is_contiguous()
    assert a.dtype == torch.float16 and torch.equal(a, a2)


def test_torch_precision_is_set_for_the_race_and_restored():
    before = torch.get_float32_matmul_precision()
    with measure.torch_precision(Problem(8, 8, 8, "float32", "tf32")):
        assert torch.get_float32_matmul_precision() == "high"
    with measure.torch_precision(Problem(8, 8, 8, "float32", "ieee")):
        assert torch.get_float32_matmul_precision() == "highest"
    assert torch.get_float32_matmul_precision() == before


def test_peak_fractions_are_relative_to_the_best_torch_rate_per_dtype():
    rows = [
        {"problem": {"kind": "float16"}, "tflops": {"torch.matmul": 100.0, "ours": 50.0}},
        {"problem": {"kind": "float16"}, "tflops": {"torch.matmul": 200.0, "ours": 220.0}},
        {"problem": {"kind": "bfloat16"}, "tflops": {"torch.matmul": 10.0, "ours": 5.0}},
    ]
    peaks = bench.add_peak_fractions(rows)
    assert peaks == {"float16": 200.0, "bfloat16": 10.0}
    assert rows[0]["fraction_of_peak"] == {"torch.matmul": 0.5, "ours": 0.25}
    assert rows[2]["fraction_of_peak"]["ours"] == 0.5


def test_refuses_to_time_on_the_interpreter(tmp_path, capsys):
    if tmm_course.BACKEND == GPU:
        pytest.skip("on a GPU it would run the whole benchmark")
    assert bench.main(["goals", "--out", str(tmp_path / "x.json")]) == 2
    assert "need compiled Triton on a GPU" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_unknown_suite_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["gools", "--out", str(tmp_path / "x.json")])
    assert "unknown suite(s) gools; expected any of fit, grid, goals" in capsys.readouterr().err


def _on_a_pretend_gpu(monkeypatch, today: str) -> None:
    monkeypatch.setattr(tmm_course, "BACKEND", GPU)
    monkeypatch.setattr(
        bench.results,
        "provenance",
        lambda *_: {"date": today, "command": "now", "timing": "with_host"},
    )
    monkeypatch.setattr(bench, "gpu_clocks", lambda: None)
    monkeypatch.setattr(bench, "copy_bandwidth_gbs", lambda: 0.0)
    monkeypatch.setitem(bench.SUITES, "grid", lambda rounds, done, keep: [*done, {"row": "new"}])


def test_a_resumed_file_stamps_each_row_it_adds_with_the_code_and_date(tmp_path, monkeypatch):
    out = tmp_path / "grid.json"
    before = {"date": "2026-12-01", "command": "then", "code": "aaaaaaa", "timing": "with_host",
              "grid": [{"row": "old"}]}  # fmt: skip
    out.write_text(json.dumps(before))
    _on_a_pretend_gpu(monkeypatch, "2026-12-02")
    assert bench.main(["grid", "--out", str(out), "--code-version", "bbbbbbb"]) == 0
    data = json.loads(out.read_text())
    assert data["code"] == "aaaaaaa"  # the file's code is that of the rows it kept
    assert data["grid"] == [{"row": "old"}, {"row": "new", "code": "bbbbbbb", "date": "2026-12-02"}]
    assert data["earlier"] == [{"date": "2026-12-01", "command": "then", "code": "aaaaaaa"}]


def test_a_file_timed_another_way_is_not_resumed(tmp_path, monkeypatch, capsys):
    out = tmp_path / "grid.json"
    out.write_text(json.dumps({"date": "2026-12-01", "command": "then", "grid": [{"row": "old"}]}))
    _on_a_pretend_gpu(monkeypatch, "2026-12-02")
    assert bench.main(["grid", "--out", str(out)]) == 2
    assert "was timed do_bench's" in capsys.readouterr().err  # a file from before named none
    assert json.loads(out.read_text())["grid"] == [{"row": "old"}]


def test_a_new_file_names_its_code_once(tmp_path, monkeypatch):
    out = tmp_path / "grid.json"
    _on_a_pretend_gpu(monkeypatch, "2026-12-02")
    assert bench.main(["grid", "--out", str(out), "--code-version", "bbbbbbb"]) == 0
    data = json.loads(out.read_text())
    assert data["code"] == "bbbbbbb" and data["grid"] == [{"row": "new"}]


def test_the_grid_is_broad_and_split_into_two_halves_that_each_cover_every_family():
    from tmm_course.capstone.problems import FITTED, GRID, HELD_OUT

    labels = [p.label for p in GRID]
    assert len(GRID) >= 60 and len(set(labels)) == len(labels)
    assert set(FITTED).isdisjoint(HELD_OUT) and set(FITTED) | set(HELD_OUT) == set(GRID)
    for half in (FITTED, HELD_OUT):
        assert {p.dtype for p in half} == {"float16", "bfloat16", "float32"}
        assert any(p.b_layout == "col" for p in half)
        assert any(min(p.m, p.n) <= 64 for p in half)  # few rows or columns
        assert any(p.k <= 256 for p in half)  # small K
        assert any(p.k % 8 for p in half)  # rows no tensor descriptor can read
    squares = {p.m for p in GRID if p.m == p.n == p.k}
    assert min(squares) <= 256 and max(squares) >= 16384 and any(s & (s - 1) for s in squares)


def test_a_column_major_b_is_the_transpose_of_a_row_major_tensor():
    b = Problem(8, 6, 4, b_layout="col").operands()[1]
    assert b.shape == (4, 6) and b.stride() == (1, 4)
    assert Problem(8, 6, 4, b_layout="col").label == "8x6x4 float16, B column-major"


def _fitted(m, n, k, path="grouped", dtype="float16", layout="row"):
    from tmm_course.capstone.fitted import Fitted

    config = Config(m % 100 + 16, 64, 64)  # tells the entries apart
    return Fitted(Problem(m, n, k, dtype, b_layout=layout), path, config, 1.1, config, 1.0)


def test_the_plan_takes_the_nearest_fitted_problem_of_the_same_dtype(use_fit):
    from tmm_course.capstone import plans

    near, far = _fitted(16, 4096, 4096), _fitted(4096, 4096, 4096)
    use_fit([far, near, _fitted(24, 4096, 4096, dtype="bfloat16")])
    a, b = torch.empty(20, 3000), torch.empty(3000, 5000)
    chosen = plans.plan_by_fit(a.half(), b.half(), None)
    assert chosen.config == near.config and "fitted on 16x4096x4096 float16" in chosen.reason
    assert plans.plan_by_fit(a.double(), b.double(), None) is None  # nothing fitted


def _timed(m, n, k, ratios, dtype="float16"):
    """A fitted problem on which each (path, config) of ``ratios`` was timed."""
    from tmm_course.capstone.fitted import Fitted

    (path, config), best = max(ratios.items(), key=lambda item: item[1])
    tried = tuple((p, c, r) for (p, c), r in ratios.items())
    return Fitted(Problem(m, n, k, dtype), path, config, best, config, best, tried)


BIG_TILES = ("persistent_tma", Config(128, 256, 64, num_warps=8, num_stages=4, subtile=True))
SMALLER_TILES = ("persistent_tma", Config(128, 128, 64, num_warps=4, num_stages=5))


def test_the_plan_prefers_tiles_that_fill_the_sms_here_over_the_winner_there(use_fit, monkeypatch):
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans, "program_slots", lambda: 132)  # an H200's SMs
    fitted = _timed(4096, 4096, 4096, {BIG_TILES: 1.0, SMALLER_TILES: 0.95})
    use_fit([fitted])
    a, b = torch.empty(4096, 4096).half(), torch.empty(4096, 4096).half()
    assert plans.plan_by_fit(a, b, None).config == BIG_TILES[1]  # 512 tiles: 4 waves
    # 3072^3: 288 big tiles make 3 waves, the last 18% full; 576 smaller ones fill 87% of 5
    # (square roots of the fills: 1.0 * 0.87 for big tiles against 0.95 * 0.95 for smaller)
    a, b = torch.empty(3072, 3072).half(), torch.empty(3072, 3072).half()
    chosen = plans.plan_by_fit(a, b, None)
    assert chosen.config == SMALLER_TILES[1] and "fitted on 4096^3 float16" in chosen.reason


SPLIT_TAIL = ("persistent_tma", Config(64, 128, 128, num_warps=4, num_stages=4, split_tail=True))
WHOLE_TAIL = ("persistent_tma", Config(64, 128, 128, num_warps=4, num_stages=4))


def test_a_split_tail_that_cuts_nothing_and_its_whole_twin_count_as_one_kernel():
    from tmm_course.capstone import plans

    # 1536^3 in 64x128 tiles: 288 on 132 SMs, a last wave of 24 whose 12 K-steps make 1 slice
    fitted = _timed(1536, 1536, 1536, {SPLIT_TAIL: 0.81, WHOLE_TAIL: 0.79})
    ratios = plans.measured_as_run(fitted, 132)
    assert ratios[SPLIT_TAIL] == ratios[WHOLE_TAIL] == pytest.approx((0.81 * 0.79) ** 0.5)


def test_a_split_tail_that_cuts_keeps_its_own_timing():
    from tmm_course.capstone import plans

    # 64 rows: 64 tiles of 64x64 on 132 SMs, each cut into 2 K-slices of 16 K-steps
    split = ("persistent_tma", Config(64, 64, 128, num_warps=4, num_stages=4, split_tail=True))
    whole = ("persistent_tma", Config(64, 64, 128, num_warps=4, num_stages=4))
    fitted = _timed(64, 4096, 4096, {split: 0.9, whole: 0.8})
    assert plans.measured_as_run(fitted, 132) == pytest.approx({split: 0.9, whole: 0.8})


def test_the_plan_names_the_whole_twin_where_a_split_tail_would_cut_nothing(use_fit, monkeypatch):
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans, "program_slots", lambda: 132)
    use_fit([_timed(1536, 1536, 1536, {SPLIT_TAIL: 0.81, WHOLE_TAIL: 0.79})])
    a, b = torch.empty(1536, 1536).half(), torch.empty(1536, 1536).half()
    chosen = plans.plan_by_fit(a, b, None)
    assert chosen.config == WHOLE_TAIL[1] and "(0.80x torch expected)" in chosen.reason


def test_a_k_step_is_cut_to_the_depth_k_needs():
    config = Config(128, 128, 64, num_warps=4, num_stages=5)
    assert config.for_depth(16) == Config(128, 128, 16, num_warps=4, num_stages=5)
    assert config.for_depth(17).block_k == 32  # K rounded up to a power of two
    assert config.for_depth(1).block_k == 16  # tl.dot's least
    assert config.for_depth(64) == config.for_depth(4096) == config


def test_the_plan_runs_k_steps_no_deeper_than_k(use_fit, monkeypatch):
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans, "program_slots", lambda: 132)
    use_fit([_timed(4096, 4096, 64, {SMALLER_TILES: 1.05})])
    a, b = torch.empty(4096, 16).half(), torch.empty(16, 4096).half()
    assert plans.plan_by_fit(a, b, None).config == SMALLER_TILES[1].for_depth(16)


def test_the_fill_correction_takes_only_the_square_root_of_the_fills(use_fit, monkeypatch):
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans, "program_slots", lambda: 132)
    fitted = _timed(4096, 4096, 4096, {BIG_TILES: 1.0, SMALLER_TILES: 0.9})
    use_fit([fitted])
    a, b = torch.empty(3072, 3072).half(), torch.empty(3072, 3072).half()
    # the whole fills (0.73 against 0.87 at 3072^3) would choose the smaller tiles; their
    # square roots keep the big ones: 1.0 * 0.866 against 0.9 * 0.949
    assert plans.plan_by_fit(a, b, None).config == BIG_TILES[1]
    monkeypatch.setattr(plans, "FILLED", 1.0)
    assert plans.plan_by_fit(a, b, None).config == SMALLER_TILES[1]


def test_nearer_fitted_problems_weigh_e_to_the_nearness_more_per_unit(use_fit, monkeypatch):
    from tmm_course.capstone import plans

    one = ("grouped", Config(64, 128, 64, num_warps=4, num_stages=4))  # two candidates
    other = ("grouped", Config(128, 64, 64, num_warps=4, num_stages=4))
    # 2048^3 is 6 units from 512^3 and 3 x log2(4/3) = 1.25 from 1536^3
    near = _timed(1536, 1536, 1536, {one: 0.9, other: 1.0})
    far = _timed(512, 512, 512, {one: 1.2, other: 1.0})
    use_fit([near, far])
    a, b = torch.empty(2048, 2048).half(), torch.empty(2048, 2048).half()
    assert plans.plan_by_fit(a, b, None).config == other[1]  # e**-2.5 against e**-12
    monkeypatch.setattr(plans, "NEARNESS", 0.1)  # nearly equal weights: the far 1.2 counts
    assert plans.plan_by_fit(a, b, None).config == one[1]


def test_a_split_last_wave_counts_as_a_wave_of_slices(use_fit, monkeypatch):
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans, "program_slots", lambda: 132)
    split = ("persistent_tma", Config(128, 128, 64, num_warps=8, num_stages=4, split_tail=True))
    # 1536^3 in 128x128 tiles: 132 + 12, the 12 cut into 3 slices of 8 K-steps: 1 + 1/3 of a wave
    assert abs(plans.filled(*split, 1536, 1536, 1536) - 144 / (132 * (1 + 1 / 3))) < 1e-9
    assert abs(plans.filled(*SMALLER_TILES, 1536, 1536, 1536) - 144 / 264) < 1e-9
    # so what split tiles did where big ones left SMs idle is not scaled up as if theirs had
    fitted = _timed(2304, 2304, 2304, {BIG_TILES: 0.60, split: 0.69})  # 162 big tiles
    use_fit([fitted])
    a, b = torch.empty(4096, 4096).half(), torch.empty(4096, 4096).half()
    assert plans.plan_by_fit(a, b, None).config == BIG_TILES[1]


def test_tiles_past_the_edges_count_as_work_not_done(monkeypatch):
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans, "program_slots", lambda: 132)
    wide = Config(64, 128, 64)
    # 16384 x 64 in 64x128 tiles: 256 tiles, each half past the last column
    assert plans.filled("grouped", wide, 16384, 64, 4096) == 0.5
    assert plans.filled("grouped", wide, 16384, 128, 4096) == 1.0
    assert abs(plans.filled("persistent_tma", wide, 16384, 64, 4096) - 0.5 * 256 / 264) < 1e-9


def test_a_grouped_launch_of_fewer_programs_than_sms_fills_only_its_share(monkeypatch):
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans, "program_slots", lambda: 132)
    # 64 x 4096 in 64x128 tiles: 32 programs; split-K 2 launches 64 (of 132 SMs)
    assert abs(plans.filled("grouped", Config(64, 128, 64), 64, 4096, 4096) - 32 / 132) < 1e-9
    split = Config(64, 128, 64, split_k=2)
    assert abs(plans.filled("grouped", split, 64, 4096, 4096) - 64 / 132) < 1e-9


def test_the_plan_reads_only_fitted_problems_of_the_same_size_class(use_fit):
    from tmm_course.capstone import plans

    one = ("grouped", Config(64, 128, 64, num_warps=4, num_stages=4))
    other = ("grouped", Config(128, 64, 64, num_warps=4, num_stages=4))
    few_rows = _timed(128, 4096, 4096, {one: 1.5, other: 1.0})  # nearer 256 rows, "few rows"
    middle = _timed(1024, 4096, 4096, {one: 0.9, other: 1.0})
    use_fit([few_rows, middle])
    a, b = torch.empty(256, 4096).half(), torch.empty(4096, 4096).half()
    chosen = plans.plan_by_fit(a, b, None)
    assert chosen.config == other[1] and "1024x4096x4096" in chosen.reason


def test_the_plan_weighs_nearer_fitted_problems_more(use_fit, monkeypatch):
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans, "program_slots", lambda: 132)
    near = _timed(4096, 4096, 4096, {BIG_TILES: 1.0, SMALLER_TILES: 0.9})
    far = _timed(8192, 8192, 8192, {BIG_TILES: 0.9, SMALLER_TILES: 1.0})
    use_fit([far, near])
    a, b = torch.empty(4608, 4608).half(), torch.empty(4608, 4608).half()
    assert plans.plan_by_fit(a, b, None).config == BIG_TILES[1]
    a, b = torch.empty(7680, 7680).half(), torch.empty(7680, 7680).half()
    assert plans.plan_by_fit(a, b, None).config == SMALLER_TILES[1]


def test_a_fitted_persistent_choice_stages_unreadable_rows_or_falls_back_to_grouped(
    use_fit, monkeypatch
):
    from tmm_course.capstone import plans

    entry = _fitted(512, 512, 510, path="persistent_tma")  # rows off 16-byte lines too
    use_fit([entry])
    a, b = torch.empty(512, 510).half(), torch.empty(510, 512).half()  # 1020-byte rows
    staged = plans.plan_by_fit(a, b, None)
    assert (staged.path, staged.stage) == ("persistent_tma", True) and "copied" in staged.reason
    no_tma = lambda *args, stage=False: "TMA needs compute capability 9.0"
    monkeypatch.setattr(plans, "tma_problem", no_tma)
    assert plans.plan_by_fit(a, b, None).path == "grouped"


def test_the_grid_summary_is_a_geometric_mean_with_the_worst_first():
    from tmm_course.perf.results import Grid

    def row(m, ratio, fitted):
        problem = Problem(m, m, m).as_dict()
        ratios = {"torch.matmul": 1.0, "matmul_fast": ratio}
        empty = {key: {} for key in ("error", "ms", "tflops", "host_us", "device_ms")}
        return {"problem": problem, "tolerance": 0.0, "wrong": [], "ratio_to_torch": ratios,
                "device_ratio_to_torch": {}, "fitted": fitted, **empty}  # fmt: skip

    data = {"device": "x", "capability": [9, 0], "versions": {}, "date": "d", "command": "c",
            "grid": [row(256, 0.5, True), row(512, 2.0, False), row(1024, 0.8, False)]}  # fmt: skip
    grid = Grid.from_dict(data)
    assert abs(grid.summary().geomean - 0.8 ** (1 / 3)) < 1e-9
    held_out = grid.summary(fitted=False)
    assert held_out.problems == 2 and held_out.worst[0] == ("1024^3 float16", 0.8)
    assert held_out.below == 1 and grid.summary(fitted=True).below == 1


def test_paths_races_the_plan_beside_each_kernel_forced_and_resumes(tmp_path, monkeypatch):
    raced = []

    def race(problem, contenders, rounds, operands):
        a, b = operands
        for name, fn in contenders.items():  # each contender computes the product
            assert torch.allclose(fn(a, b).float(), a.float() @ b.float(), atol=0.05), name
        raced.append((problem.label, sorted(contenders)))
        ms = {"torch.matmul": 1.0, **dict.fromkeys(contenders, 2.0)}
        return measure.Race(problem, 0.1, {}, [], ms, ms, {n: 1.0 / t for n, t in ms.items()},
                            {}, {}, {})  # fmt: skip

    monkeypatch.setattr(bench, "race", race)
    odd, even = Problem(33, 37, 45), Problem(32, 32, 32)
    assert bench.shape("33x37x45") == odd and bench.shape("8x8x8:bfloat16").dtype == "bfloat16"
    with pytest.raises(argparse.ArgumentTypeError, match="expected MxNxK"):
        bench.shape("33x37")
    kept = []
    rows = bench.suite_paths(1, [], kept.append, [odd, even])
    forced = sorted(["matmul_fast", *bench.FORCED.values()])
    assert raced == [(odd.label, sorted([*forced, bench.LESSON_4])), (even.label, forced)]
    assert kept[-1] == rows and rows[0]["ratio_to_torch"]["matmul_fast"] == 0.5
    assert bench.suite_paths(1, rows[:1], kept.append, [odd, even])[0] is rows[0]  # kept
    assert raced[-1][0] == even.label and len(raced) == 3
    picked = bench.paths_problems([odd], everything=True)
    assert picked[0] == Problem(2500, 2500, 2500) and odd in picked and even not in picked
    assert {p.rows_on_16_bytes for p in picked[: picked.index(odd)]} == {False}


def test_rows_off_16_byte_lines_are_planned_from_problems_whose_rows_are_off_them(
    use_fit, monkeypatch
):
    from tmm_course import gpu
    from tmm_course.capstone import plans

    on, off = _fitted(512, 512, 512), _fitted(1024, 1024, 1022, path="persistent_tma")
    use_fit([on, off])
    odd = torch.empty(512, 510).half(), torch.empty(510, 512).half()  # A's rows 1,020 bytes apart
    assert "fitted on 1024x1024x1022" in plans.plan_by_fit(*odd, None).reason
    even = torch.empty(1000, 1024).half(), torch.empty(1024, 1000).half()
    assert "fitted on 512^3" in plans.plan_by_fit(*even, None).reason
    c = torch.empty(1000, 1001, dtype=torch.float16)[:, :1000]  # C's rows 2,002 bytes apart
    assert "fitted on 1024x1024x1022" in plans.plan_by_fit(*even, c).reason
    use_fit([on])
    assert plans.plan_by_fit(*odd, None) is None  # no neighbour off them: the rules
    monkeypatch.setattr(plans.tmm_course, "BACKEND", GPU)
    monkeypatch.setattr(plans.gpu, "current", lambda: gpu.KNOWN["H200"])
    ruled = plans.plan(*odd)
    assert (ruled.path, ruled.stage, ruled.config) == ("persistent_tma", True, plans.LARGE_TMA)
    monkeypatch.setattr(plans, "tma_problem", lambda *args, stage=False: "TMA needs 9.0")
    assert plans.plan(*odd).path == "grouped"
    assert not Problem(333, 7777, 2222).rows_on_16_bytes and Problem(4096, 1, 4096).rows_on_16_bytes
    assert not Problem(36, 32, 32, a_layout="col").rows_on_16_bytes  # A's columns 72 bytes apart


def _tensors(p: Problem) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = getattr(torch, p.dtype)
    a = torch.empty(p.m, p.k, dtype=dtype) if p.a_layout == "row" else torch.empty(
        p.k, p.m, dtype=dtype).t()  # fmt: skip
    b = torch.empty(p.k, p.n, dtype=dtype) if p.b_layout == "row" else torch.empty(
        p.n, p.k, dtype=dtype).t()  # fmt: skip
    return a, b


def test_copies_are_made_only_where_they_paid_on_an_h100():
    from tmm_course.capstone import plans
    from tmm_course.capstone.problems import GRID, ODD_ROWS, TINY

    for p in (*GRID, *ODD_ROWS, *TINY):  # the problem's description and its tensors agree
        assert p.odd_operands == plans.odd_operands(*_tensors(p)), p.label
    pays = lambda p: plans.copies_pay(p.m, p.n, p.k, p.odd_operands)
    in_place = [Problem(63, 65, 67), Problem(255, 257, 259), Problem(3000, 30, 4097),
                Problem(4097, 100, 2999, "bfloat16")]  # fmt: skip
    copied = [Problem(64, 4097, 4093), Problem(100, 5003, 3001), Problem(1023, 1025, 1027),
              Problem(4096, 4096, 4093)]  # fmt: skip
    assert [pays(p) for p in in_place + copied] == [False] * 4 + [True] * 4
    assert pays(Problem(64, 64, 64))  # nothing off 16-byte lines: nothing to decide


def test_a_tiny_odd_product_runs_in_place_in_small_tiles_on_a_gpu(monkeypatch):
    from tmm_course import gpu
    from tmm_course.capstone import plans

    monkeypatch.setattr(plans.tmm_course, "BACKEND", GPU)
    monkeypatch.setattr(plans.gpu, "current", lambda: gpu.KNOWN["H100"])
    chosen = plans.plan(*_tensors(Problem(63, 65, 67)))
    assert (chosen.path, chosen.in_place, chosen.config) == ("grouped", True, plans.SMALL)
    assert not plans.plan(*_tensors(Problem(64, 4097, 4093))).in_place  # B copied: 33 MB


def test_compare_races_this_gpus_fit_beside_each_other_cards_on_held_out_problems(
    use_fit, monkeypatch
):
    from tmm_course import gpu
    from tmm_course.capstone import plans
    from tmm_course.capstone.fitted import THIS_FIT, other_fit, shipped
    from tmm_course.capstone.problems import HELD_OUT, ODD_ROWS_HELD_OUT
    from tmm_course.perf.results import Race

    raced = []

    def fake_race(problem, contenders, rounds, operands):
        raced.append((problem.label, list(contenders)))
        ratios = {"torch.matmul": 1.0, **dict.fromkeys(contenders, 1.0)}
        return Race(problem, 1e-3, {}, [], ratios, ratios, ratios, ratios, ratios, ratios)

    monkeypatch.setattr(bench, "race", fake_race)
    monkeypatch.setattr(gpu, "current", lambda: gpu.KNOWN["H100"])  # raced beside the H200's
    monkeypatch.setattr(bench, "HELD_OUT", HELD_OUT[:2])
    monkeypatch.setattr(bench, "ODD_ROWS_HELD_OUT", ODD_ROWS_HELD_OUT[:1])
    with pytest.raises(SystemExit, match="fit compare"):  # no fit of this GPU's to race
        bench.suite_compare(1, [], lambda rows: None)
    mine = shipped("H200")[:3]
    use_fit(mine)
    rows = bench.suite_compare(1, [], lambda rows: None)
    labels = [p.label for p in (*HELD_OUT[:2], *ODD_ROWS_HELD_OUT[:1])]
    assert raced == [(label, [THIS_FIT, other_fit("H200")]) for label in labels]
    assert all(set(row["plans"]) == {THIS_FIT, other_fit("H200")} for row in rows)
    assert plans.fit_table() == mine  # planning from this GPU's fit again
    assert bench.suite_compare(1, rows[:2], lambda rows: None)[:2] == rows[:2]
    assert [label for label, _ in raced[3:]] == labels[2:]  # the rows kept are not raced again
