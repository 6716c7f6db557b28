"""Claims the lessons make, checked against what their cells print and what the code does."""

from __future__ import annotations

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

from tmm_course.capstone import plans
from tmm_course.capstone.problems import family
from tmm_course.kernels.launch_order import launch_order, wave_strips
from tmm_course.perf import intensity, journey, results, roofline


@pytest.fixture(scope="module")
def lesson_6(tmp_path_factory):
    notebook = nbformat.read(ROOT / "notebooks" / "06_performance.ipynb", as_version=4)
    folder = tmp_path_factory.mktemp("run")
    NotebookClient(notebook, timeout=300, resources={"metadata": {"path": str(folder)}}).execute()
    return notebook


def printed(notebook, marker: str) -> str:
    cell = next(c for c in notebook.cells if c.cell_type == "code" and marker in c.source)
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def test_block_k_cancels_in_the_printed_slab_intensities(lesson_6):
    lines = [x for x in printed(lesson_6, "slab_intensity").splitlines() if "BLOCK_K" in x]
    assert len(lines) == 3 and len({x.split("=")[-1] for x in lines}) == 1
    assert {intensity.slab_intensity(64, 64, bk) for bk in (16, 32, 64)} == {16.0}


def test_predict_first_reveals_nothing_before_an_answer(lesson_6):
    text = printed(lesson_6, "my_answers")
    assert "your answer first" in text
    for value in (roofline.attainable(8, 80), roofline.attainable(16, 80), roofline.ridge(80)):
        assert f"{value:.1f}" not in text


def test_the_datasheet_ridge_is_printed_beside_the_measured_one(lesson_6):
    text = printed(lesson_6, "datasheet_ridge")
    assert "ridge 206 FLOP/byte" in text and "989 TFLOP/s" in text


def test_row_major_launch_order_sweeps_a_row_and_lesson_4_walks_a_column():
    order = launch_order(4, 4)  # a 1-D grid taken row by row
    assert order[0].tolist() == [0, 1, 2, 3]
    # lesson 4's 2-D grid: program (pid_m, pid_n) starts in the order axis 0 varies fastest
    grid_m, grid_n = 4, 4
    started = [(pid_m, pid_n) for pid_n in range(grid_n) for pid_m in range(grid_m)]
    assert started[:4] == [(0, 0), (1, 0), (2, 0), (3, 0)]  # a column of tiles


def test_the_pipelined_step_changes_what_the_lesson_says():
    before, after = journey.BIG, journey.DEEP
    assert (before.block_k, before.num_warps, before.num_stages) == (32, 4, 2)
    assert (after.block_k, after.num_warps, after.num_stages) == (64, 8, 4)
    assert (before.block_m, before.block_n) == (after.block_m, after.block_n)
    text = (ROOT / "notebooks" / "06_performance.ipynb").read_text(encoding="utf-8")
    assert "`BLOCK_K` 32 to 64,\\n" in text or "`BLOCK_K` 32 to 64" in text


def test_a_byte_address_is_base_plus_itemsize_times_the_element_offset():
    notebook = nbformat.read(ROOT / "notebooks" / "03_strides.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300).execute()
    assert "rows are 8186 bytes apart, and 8186 % 16 = 10" in printed(notebook, "8186")


def test_what_lesson_6_says_about_the_compiled_kernels():
    facts = {name: kernels[0] for name, kernels in results.compiled().journey.items()}
    lesson_4, bigger = facts["lesson 4"]["registers"], facts["bigger tiles"]["registers"]
    assert bigger >= 3 * lesson_4  # "three times lesson 4's"
    assert 65_536 // (bigger * 32 * journey.BIG.num_warps) == 2  # "two such programs at most"
    assert facts["grouped order"]["registers"] > facts["pipelined"]["registers"]
    for step in journey.STEPS[:5]:  # the pointer kernels: the formula is the compiler's figure
        predicted = plans.shared_memory_bytes(step.config, itemsize=2)
        assert facts[step.name]["shared_bytes"] == predicted, step.name


def test_a_wave_of_lesson_4_fits_the_h200_l2_at_4096():
    tiles, strip = 4096 // 128, 128 * 4096 * 2
    for order in (launch_order(tiles, tiles).T.copy(), launch_order(tiles, tiles, group_m=8)):
        waves = wave_strips(order, roofline.H200_SMS)
        assert max((a + b) * strip for a, b in waves) < roofline.H200_L2_BYTES
    race = results.bench().journey.ratio_to_torch
    assert 0 < race["pipelined"] - race["grouped order"] < 0.05  # "about 3%"


def test_a_64x64_tile_fed_from_dram_reaches_a_tenth_of_the_h200_peak():
    h200 = results.bench()
    ridge = h200.peak_tflops["float16"] * 1e3 / h200.copy_bandwidth_gbs
    assert round(ridge) == 158
    dram_bound = intensity.tile_intensity(64, 64) * h200.copy_bandwidth_gbs / 1e3
    assert round(dram_bound) == 68 and round(h200.peak_tflops["float16"]) == 671
    assert 0.09 < dram_bound / h200.peak_tflops["float16"] < 0.11  # "a tenth"


def test_what_lesson_6_says_about_the_grid():
    grid = results.grid()
    rows = {r.label: r for r in grid.rows}
    aligned, ragged = rows["4096^3 float16"], rows["4096x4096x4093 float16"]
    assert ragged.tflops["torch.matmul"] < 0.5 * aligned.tflops["torch.matmul"]  # "slows down"
    assert ragged.ratio_to_torch["matmul_fast"] > 1 and "copied" in ragged.plan  # staged, wins
    odd = [r for r in grid.rows if family(r.problem) == "odd sizes"]
    assert "1023x1025x1027 float16" in {r.label for r in odd}  # "the small ... too"
    for row in odd:  # "every odd-sized problem ... runs faster than cuBLAS", through copies
        assert row.ratio_to_torch["matmul_fast"] > 1 and "copied" in row.plan, row.label
    for name, (_, host, device) in grid.families().items():  # the families' two columns
        assert host > 0 and device > 0, name



def test_what_lesson_6_says_about_splitting_the_last_wave():
    splits = results.grid().split_tails()
    k = {r.label: r.problem.k for r in results.grid().rows}
    long_k = [(split, whole) for label, _, _, _, split, whole in splits if k[label] >= 3000]
    short_k = [(split, whole) for label, _, _, _, split, whole in splits if k[label] <= 1536]
    assert long_k and all(split > whole for split, whole in long_k)  # "every one faster"
    assert len(short_k) >= 8 and sum(split > whole for split, whole in short_k) <= 1  # "nearly"
    assert ((1536 + 127) // 128) ** 2 == 132 + 12  # "one full wave of 132 and 12 tiles"


def test_what_lesson_6_says_about_the_host_time_of_copies():
    host = results.bench("goals_h200.json").host_us
    for ours, theirs in [("matmul_fast(), float32 B^T copy", "torch.matmul, float32"),
                         ("matmul_fast(), staged copies", "torch.matmul, 1023x1025x1027")]:
        assert host[ours] > host[theirs]  # "copies cost host time as well"
        assert host[ours] > host["matmul_fast()"]  # more than the plain path
