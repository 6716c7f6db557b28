"""Lesson 6's benchmark: the problems it races, the files it writes, the results we ship."""

from __future__ import annotations

import pytest
import torch

import tmm_course
from tmm_course.backend import GPU
from tmm_course.perf import bench, measure
from tmm_course.perf.problems import GOALS, Problem


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
    assert "unknown suite(s) gools; expected any of goals" in capsys.readouterr().err
