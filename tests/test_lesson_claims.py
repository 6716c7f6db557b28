"""Claims the lessons make, checked against what their cells print and what the code does."""

from __future__ import annotations

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

from tmm_course.capstone.problems import family
from tmm_course.kernels.launch_order import launch_order
from tmm_course.perf import intensity, results, roofline


@pytest.fixture(scope="module")
def lesson_6(tmp_path_factory):
    notebook = nbformat.read(ROOT / "notebooks" / "06_making_it_fast.ipynb", as_version=4)
    folder = tmp_path_factory.mktemp("run")
    NotebookClient(notebook, timeout=300, resources={"metadata": {"path": str(folder)}}).execute()
    return notebook


def printed(notebook, marker: str) -> str:
    cell = next(c for c in notebook.cells if c.cell_type == "code" and marker in c.source)
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def test_block_k_cancels_in_the_tile_intensity():
    assert {intensity.slab_intensity(64, 64, bk) for bk in (16, 32, 64)} == {16.0}
    assert intensity.tile_intensity(64, 64, element_bytes=4) == 64 * 64 / (2 * (64 + 64))


def test_predict_first_reveals_nothing_before_an_answer(lesson_6):
    text = printed(lesson_6, "my_answers")
    assert "your answer first" in text
    for value in (roofline.attainable(8, 80), roofline.attainable(16, 80), roofline.ridge(80)):
        assert f"{value:.1f}" not in text


def test_float32_tiles_sit_under_the_tf32_roof(lesson_6):
    text = printed(lesson_6, 'for precision, tile_bytes in [("tf32", 4)')
    assert text.splitlines()[0].startswith("tf32") and "16.0 FLOP/byte" in text.splitlines()[0]
    assert "L2 52 MB" in text  # read from the device, stored with the run; MB as in the figures


def test_the_compiler_keeps_one_buffer_fewer_on_sm_80(lesson_6):
    text = printed(lesson_6, "shared_kb = {gpu")
    assert "sm_80 s1:    8 KB  s2:    8 KB  s3:   16 KB" in text
    assert "sm_90 s1:    8 KB  s2:   16 KB  s3:   24 KB" in text


def test_row_major_launch_order_sweeps_a_row_and_lesson_4_walks_a_column():
    order = launch_order(4, 4)  # a 1-D grid taken row by row
    assert order[0].tolist() == [0, 1, 2, 3]
    # lesson 4's 2-D grid: program (pid_m, pid_n) starts in the order axis 0 varies fastest
    grid_m, grid_n = 4, 4
    started = [(pid_m, pid_n) for pid_n in range(grid_n) for pid_m in range(grid_m)]
    assert started[:4] == [(0, 0), (1, 0), (2, 0), (3, 0)]  # a column of tiles


def test_a_byte_address_is_base_plus_itemsize_times_the_element_offset():
    notebook = nbformat.read(ROOT / "notebooks" / "03_strides.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300).execute()
    assert "rows are 8186 bytes apart, and 8186 % 16 = 10" in printed(notebook, "8186")


def test_what_lesson_8_says_about_the_grid():
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
