"""The GPU results the package ships: read from the installed package, typed, and complete."""

from __future__ import annotations

import json

import pytest

from tmm_course.capstone.problems import GOALS
from tmm_course.perf import results, stored


@pytest.mark.parametrize(
    "read",
    [
        results.bench,
        results.sweep,
        results.pitfalls,
        results.grid,
        results.races,
        lambda: results.bench("goals_h200.json"),
    ],
)
def test_shipped_results_say_where_when_and_how(read):
    provenance = read().provenance
    assert provenance.device.startswith("NVIDIA") and provenance.date.count("-") == 2
    assert {"python", "torch", "triton"} <= set(provenance.versions)
    assert provenance.command.startswith("python")
    assert "/root" not in provenance.command and "/home" not in provenance.command
    assert provenance.device in provenance.where and provenance.date in provenance.where


def test_every_shipped_file_has_a_reader():
    assert results.shipped() == [
        "exercises_run.json",  # read by tmm_course.perf.stored.exercises_run (lessons 6-8)
        "goals_h200.json",  # read by results.bench(): the capstone's goals, host times
        "grid_h100.json",  # read by capstone.fitted.card_for: whether an H100 reads its own fit
        "grid_h200.json",
        "lessons_h100.json",  # read by tmm_course.perf.stored.lessons_run (lessons 6 and 7)
        "low_precision_h100.json",  # read by tmm_course.perf.low_precision.stored (lesson 10)
        "pitfalls_h200.json",
        "races_h200.json",
        "sweep_h200.json",  # read by results.sweep(): the run that chose the capstone's rules
        "transposes_h200.json",
    ]
    assert results.transposes().shape == (4096, 4096)
    assert stored.lessons_run().journey["ratio_to_torch"]["torch.matmul"] == 1.0


def test_shipped_benchmark_holds_every_goal_checked_and_timed():
    h200 = results.bench()
    assert {race.label for race in h200.goals} == {problem.label for problem, _ in GOALS}
    for race in h200.goals:
        assert race.wrong == [] and race.error["matmul_fast"] <= race.tolerance
        assert race.ms["matmul_fast"] > 0 and race.ms["torch.matmul"] > 0
        ratio = race.ms["torch.matmul"] / race.ms["matmul_fast"]
        assert race.ratio_to_torch["matmul_fast"] == pytest.approx(ratio)
        assert race.plan and race.host_us["matmul_fast"] > 0 and race.target


def test_shipped_benchmark_has_the_host_times():
    h200 = results.bench()
    assert "matmul_fast()" in h200.host_us and h200.copy_bandwidth_gbs > 0


def test_a_goal_is_found_by_label_and_a_wrong_label_is_named():
    assert results.bench().goal("1024^3 float16").problem.m == 1024
    with pytest.raises(KeyError, match="expected one of: 4096"):
        results.bench().goal("1000^3 float16")


def test_sweep_trials_are_configs():
    row = results.sweep().rows[0]
    assert row.torch_ms > 0 and all(t.config.block_m >= 16 for t in row.trials)


def test_stored_pitfall_figures():
    lab = results.pitfalls()
    assert lab.precision_errors["ieee"] < lab.precision_errors["tf32"]
    assert lab.loop_bound_timing["runtime / constexpr"] > 0


def test_a_race_survives_a_round_trip_through_json():
    race = results.bench().goals[0]
    again = results.Race.from_dict(json.loads(json.dumps(race.as_dict())))
    assert again == race


def test_a_measured_file_is_read_by_path(tmp_path):
    path = tmp_path / "bench_mine.json"
    path.write_text(json.dumps({**results.bench().provenance.as_dict(), "copy_bandwidth_gbs": 1.0}))
    assert results.bench(path).copy_bandwidth_gbs == 1.0


def test_an_unknown_name_says_what_ships():
    with pytest.raises(FileNotFoundError, match=r"goals_h200\.json"):
        results.bench("bench_mine.json")


def test_the_shipped_grid_races_every_grid_problem_with_the_fit_it_was_planned_from():
    from tmm_course.capstone.problems import FITTED, GRID
    from tmm_course.perf.bench import FIT

    grid = results.grid()
    assert {r.label for r in grid.rows} == {p.label for p in GRID}
    assert grid.fitted == {p.label for p in FITTED}
    assert {f.problem.label for f in grid.fit} == {p.label for p in FIT}
    for race in grid.rows:
        assert race.wrong == [] and race.error["matmul_fast"] <= race.tolerance
        assert race.plan and race.host_us["matmul_fast"] > 0
    assert grid.summary(fitted=False).problems == len(GRID) - len(FITTED)
    assert grid.provenance.code and set(grid.replanned) <= {r.label for r in grid.rows}


def test_the_shipped_layouts_cover_every_combination_of_a_and_b():
    from tmm_course.capstone.problems import LAYOUTS

    layouts = results.grid().layouts
    assert [r.label for r in layouts] == [p.label for p in LAYOUTS]
    assert {(r.problem.a_layout, r.problem.b_layout) for r in layouts} == {
        ("row", "row"),
        ("row", "col"),
        ("col", "row"),
        ("col", "col"),
    }
    for race in layouts:
        assert race.wrong == [] and race.ratio_to_torch["matmul_fast"] > 0


def test_the_shipped_inductor_races_time_both_triton_gemms_against_torch():
    from tmm_course.perf.bench import INDUCTOR

    races = results.races()
    assert len(races.inductor) >= 4 and races.provenance.code
    for race in races.inductor:
        assert race.wrong == [] and {"matmul_fast", INDUCTOR} <= set(race.ratio_to_torch)
        assert races.compile_s[race.label] > 0
    assert races.host_us["matmul_fast()"] > 0 and races.host_us["torch.matmul"] > 0


def test_matmul_fast_takes_no_more_host_time_than_torch_on_any_common_path():
    host = results.races().host_us
    pairs = {"torch.matmul": "matmul_fast()",
             "torch.matmul, float32": "matmul_fast(), float32 (B^T copied)",
             "torch.matmul, 1023x1025x1027": "matmul_fast(), staged copies"}  # fmt: skip
    for name in ("bfloat16", "A and B column-major", "float32, B column-major"):
        pairs[f"torch.matmul, {name}"] = f"matmul_fast(), {name}"
    for theirs, ours in pairs.items():
        assert 0 < host[ours] <= host[theirs], (ours, host[ours], host[theirs])


def test_the_shipped_pitches_race_rows_on_lines_and_mid_line():
    from tmm_course.perf.bench import ON_LINES, PITCHES

    grid = results.grid()
    pitches = grid.pitches
    assert [r.label for r in pitches] == [p.label for p in PITCHES]
    assert grid.provenance.of(pitches).endswith(f"code {pitches[0].code}")  # theirs, not the file's
    for race in pitches:
        assert race.wrong == [] and race.code == pitches[0].code and race.date and race.plan
        assert race.contenders == ["matmul_fast", f"matmul_fast, {ON_LINES}",
                                   f"torch.matmul, {ON_LINES}",
                                   f"matmul_fast, copied to {ON_LINES} first"]  # fmt: skip


def test_a_row_raced_again_later_names_its_code_and_day_in_the_provenance():
    grid = results.grid()
    later = [r for r in grid.rows if r.code]
    assert later and all(r.code != grid.provenance.code and r.date for r in later)
    codes = {r.code for r in later}
    where = grid.provenance.of(grid.rows)
    assert where.endswith(f"code {grid.provenance.code} and {len(codes)} later versions")
    assert f"{grid.provenance.date} to {max(r.date for r in later)}" in where
    untouched = [r for r in grid.rows if not r.code]
    assert grid.provenance.of(untouched).endswith(f"code {grid.provenance.code}")
    for row in (
        grid.rows
        + grid.layouts
        + grid.pitches
        + grid.inductor
        + grid.paths
        + results.races().inductor
    ):
        assert results.Race.from_dict(row.as_dict()) == row
    stored = untouched[0].as_dict()
    assert "code" not in stored and "date" not in stored  # the file's own run names neither


def test_a_file_of_your_own_is_read_by_the_path_the_readme_gives(tmp_path, monkeypatch):
    from importlib import resources

    shipped = resources.files(results.DATA_PACKAGE) / results.DATA_FOLDER / "grid_h200.json"
    (tmp_path / "grid_mine.json").write_text(shipped.read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)  # "./grid_mine.json" is a path here, not a shipped file's name
    assert len(results.grid("./grid_mine.json").rows) == len(results.grid().rows)


def test_stored_runs_read_through_the_one_reader(tmp_path):
    mine = tmp_path / "lessons_mine.json"
    mine.write_text(json.dumps(stored.lessons_run().data))
    assert stored.lessons_run(mine).where == stored.lessons_run().where
    with pytest.raises(FileNotFoundError, match=r"lessons_h100\.json"):  # says what ships
        stored.lessons_run("lessons_mine.json")


def test_a_stored_command_names_its_files_without_this_machines_folders():
    args = ["--out", "/root/out/x.json", "--into=/a/b.json", "--ncu", "/r/n.csv", "--notebooks",
            "notebooks"]  # fmt: skip
    assert results.command("tmm_course.perf.lessons", args) == (
        "python -m tmm_course.perf.lessons --out x.json --into=b.json --ncu n.csv "
        "--notebooks notebooks"
    )
