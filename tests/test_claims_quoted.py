"""Figures and rules lessons 3-7 quote, checked against the stored run they come from and
against what Triton's compiler makes of the kernel they name."""

from __future__ import annotations

import re

import nbformat
import pytest
import torch
import triton
import triton.language as tl
from conftest import ROOT

from tmm_course.compile_ahead import Specialization, compile_for
from tmm_course.kernels import persistent_tma
from tmm_course.perf import knobs, stored

RUN = stored.lessons_run()


def cell(lesson: str, cell_id: str) -> str:
    notebook = nbformat.read(ROOT / "notebooks" / lesson, as_version=4)
    return " ".join(next(c for c in notebook.cells if c.get("id") == cell_id).source.split())


def test_lesson_6_says_the_float16_roof_is_cublas_best_and_quotes_the_races_below_it():
    text = cell("06_making_it_fast.ipynb", "mf10")
    low, high = map(int, re.search(r"at (\d+) to (\d+) TFLOP/s", text).groups())
    races = [RUN.journey, *RUN.data["sweeps"].values(), *RUN.tma]
    seen = [r["tflops"]["torch.matmul"] for r in races if r["problem"].split()[-1] == "float16"]
    assert (low, high) == (round(min(seen)), round(max(seen)))
    roof = RUN.device["peak_tflops"]["float16"]
    assert "best of three" in text and "not a hardware limit" in text
    assert ("above it at times" in text) == (max(seen) > roof)


def test_lesson_6_explains_written_bytes_below_the_size_of_c():
    text = cell("06_making_it_fast.ipynb", "mf12")
    c_bytes = 4096 * 4096 * 2
    assert f"the {c_bytes / 1e6:.0f} MB of `C`" in text and "dirty in the L2" in text
    written = RUN.dram("4096^3 lesson 4")["written_bytes"]
    assert f"(lesson 4: {written / 1e6:.0f} MB)" in text
    for label, row in RUN.data["dram"].items():  # every 4096^3 kernel writes less than C ...
        if label.startswith("4096^3"):
            # ... and what is missing fits in the L2 that holds it
            assert 0 < c_bytes - row["written_bytes"] < RUN.device["l2_bytes"], label


def test_lesson_6_quotes_the_bigger_tiles_it_raced_and_the_sweeps_best():
    text = cell("06_making_it_fast.ipynb", "mf40")
    journey = RUN.journey["ratio_to_torch"]
    tiles = RUN.sweep("tiles")["ratio_to_torch"]
    big = knobs.BIGGER_TILES
    raced = f"{big.block_m}x{big.block_n}x{big.block_k} on {big.num_warps} warps"
    assert f"Bigger tiles ({journey['bigger tiles']:.3f} at {raced}" in text
    swept = tiles["128x256x64 w8 s3 2-D grid"]
    assert f"{swept:.3f} at 128x256x64 in section 3's sweep" in text
    assert max(tiles, key=tiles.get) in ("torch.matmul", "128x256x64 w8 s3 2-D grid")


def test_lesson_6_says_two_races_of_the_persistent_kernel_differ():
    text = cell("06_making_it_fast.ipynb", "mf40")
    journey = RUN.journey["ratio_to_torch"]["persistent + TMA"]
    lesson_7 = next(r for r in RUN.tma if r["problem"] == RUN.journey["problem"])
    other = lesson_7["ratio_to_torch"]["persistent_matmul"]
    assert f"reaches {journey:.3f} ({other:.3f} in lesson 7's race of the same run)" in text
    step = next(s for s in knobs.STEPS if s.name == "persistent + TMA")
    assert step.tile == (persistent_tma.H200_CONFIG.block_m, persistent_tma.H200_CONFIG.block_n)


def test_lesson_6_does_not_equate_num_stages_with_buffers():
    text = cell("06_making_it_fast.ipynb", "mf16")
    assert "With `num_stages` buffers" not in text and "depends on the GPU" in text


def test_sm_80_compiles_descriptor_loads_to_ordinary_loads_without_a_pipeline():
    text = cell("07_persistent_tma.ipynb", "pt06")
    assert "ordinary loads, for these float16 tiles not pipelined" in text
    assert "float32 tiles do get `cp.async` there" in text
    assert "on an A100 only float32 tiles are still pipelined" in cell(
        "07_persistent_tma.ipynb", "pt01"
    )
    kernel = persistent_tma.persistent_matmul_kernel
    for dtype in (torch.float16, torch.float32):
        view = persistent_tma.compiler_view(persistent_tma.H200_CONFIG, dtype=dtype)
        one, three = (compile_for(kernel, view, "sm_80", num_warps=8, num_stages=s)
                      for s in (1, 3))  # fmt: skip
        assert one.ok and three.ok and one.matrix_unit == three.matrix_unit == "mma"
        pipelined = dtype == torch.float32
        assert (one.shared_bytes < three.shared_bytes) == pipelined
        assert ("cp.async" in three.ptx) == pipelined and "cp.async" not in one.ptx


@triton.jit
def _descriptor_in_kernel(x_ptr, M, N, B: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[B, B])
    desc.store([0, 0], desc.load([0, 0]) + 1)


def test_a_descriptor_made_in_a_kernel_needs_the_allocators_scratch_on_a_gpu():
    assert "call `triton.set_allocator` first" in cell("07_persistent_tma.ipynb", "pt22")
    view = Specialization({"x_ptr": "*fp16", "M": "i32", "N": "i32", "B": "constexpr"},
                          {"B": 64}, divisible_by_16=(0, 1, 2))  # fmt: skip
    compiled = compile_for(_descriptor_in_kernel, view, "sm_90")
    assert compiled.ok and compiled.scratch_bytes > 0  # launched, it asks the allocator
    from triton.runtime import _allocation

    with pytest.raises(RuntimeError, match="set_allocator"):  # Triton's default allocator
        _allocation.NullAllocator()(compiled.scratch_bytes, 128, None)


def test_lessons_3_and_0_send_descriptors_to_lesson_7_and_matmul_fast_to_lesson_8():
    assert "lesson 7's persistent kernel" in cell("00_start_here.ipynb", "c00")
    assert "lesson 7's rule that tensor descriptors" in cell("03_strides.ipynb", "c00")
    text = cell("03_strides.ipynb", "b7e1a2c4")
    assert "(lesson 7's tensor descriptors)" in text and "lesson 8's `matmul_fast`" in text
