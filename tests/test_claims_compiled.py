"""Sentences of the lessons about GPUs and debugging, each checked by compiling ahead of time
for the GPU it names (on this CPU) or by running it, on whichever Triton is installed (CI runs
this file on 3.6 and 3.9)."""

from __future__ import annotations

import re
import sys

import nbformat
import pytest
import torch
import triton
import triton.language as tl
from conftest import ROOT, on_interpreter
from nbclient import NotebookClient

from tmm_course.compile_ahead import compile_for, specialize
from tmm_course.kernels import coalescing, pitfalls
from tmm_course.kernels.matmul import matmul_kernel
from tmm_course.kernels.strides import strided_copy_kernel
from tmm_course.perf import results


def cell(lesson: str, cell_id: str) -> str:
    notebook = nbformat.read(ROOT / "notebooks" / lesson, as_version=4)
    return " ".join(next(c for c in notebook.cells if c.get("id") == cell_id).source.split())


def _matmul_launch(kernel, dtype: torch.dtype, out_dtype: torch.dtype, blocks=(64, 64, 32),
                   **constexprs):  # fmt: skip
    m = n = k = 256
    a, b = torch.empty(m, k, dtype=dtype), torch.empty(k, n, dtype=dtype)
    c = torch.empty(m, n, dtype=out_dtype)
    block_m, block_n, block_k = blocks
    args = (a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride())
    kw = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, **constexprs}
    return specialize(kernel, args, kw)


# lesson 9, c08: the float16-accumulator kernel on float32 inputs


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
def test_float32_inputs_make_the_float16_accumulator_kernel_change_type(gpu):
    assert "returns float32 whatever `out_dtype` asks for" in cell("09_pitfalls.ipynb", "c08")
    launch = _matmul_launch(pitfalls.fp16_accumulator_kernel, torch.float32, torch.float32)
    refused = compile_for(pitfalls.fp16_accumulator_kernel, launch, gpu)
    assert not refused.ok
    assert "Loop-carried variable acc" in refused.error and "fp16" in refused.error
    assert "fp32> in loop!" in refused.error
    half = _matmul_launch(pitfalls.fp16_accumulator_kernel, torch.float16, torch.float16)
    assert compile_for(pitfalls.fp16_accumulator_kernel, half, gpu).ok  # float16 inputs: runs


@triton.jit
def _dot_to_float16(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
    o = tl.arange(0, B)
    a = tl.load(a_ptr + o[:, None] * B + o[None, :])
    b = tl.load(b_ptr + o[:, None] * B + o[None, :])
    tl.store(c_ptr + o[:, None] * B + o[None, :], tl.dot(a, b, out_dtype=tl.float16))


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
def test_tl_dot_of_float32_inputs_returns_float32_despite_out_dtype(gpu):
    a, c = torch.empty(64, 64), torch.empty(64, 64, dtype=torch.float16)
    compiled = compile_for(_dot_to_float16, specialize(_dot_to_float16, (a, a, c), {"B": 64}), gpu)
    assert compiled.ok, compiled.error  # a float16 out_dtype is not refused...
    products = re.findall(r"(?:tt\.dot|ttng\.warp_group_dot) [^\n]*", compiled.ttgir)
    assert products and all("-> tensor<64x64xf32" in line for line in products)  # ...but unused


# lesson 4 c14, lesson 9 c26: TF32 reads the raw float32 bits


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
def test_tf32_feeds_raw_float32_registers_to_the_tensor_cores(gpu):
    assert "truncated, not rounded" in cell("04_tiled_matmul.ipynb", "c14")
    assert "no `cvt.rna.tf32` rounding step" in cell("09_pitfalls.ipynb", "c26")
    launch = _matmul_launch(matmul_kernel, torch.float32, torch.float32, PRECISION="tf32")
    compiled = compile_for(matmul_kernel, launch, gpu)
    assert compiled.ok, compiled.error
    assert re.search(r"\bw?mma[.\w]*\.tf32", compiled.ptx), "no TF32 tensor-core instruction"
    assert not re.search(r"cvt\.[.\w]*tf32", compiled.ptx)  # no conversion to TF32 first


# lesson 4, c00: tensor cores on Ampere and newer, not on a T4


def test_tl_dot_uses_tensor_cores_from_ampere_but_not_on_a_t4():
    text = cell("04_tiled_matmul.ipynb", "c00")  # a T4 has tensor cores: Triton leaves them
    assert "a T4 has tensor cores too, but Triton does not use them before Ampere" in text
    launch = _matmul_launch(matmul_kernel, torch.float16, torch.float16, PRECISION="tf32")
    units = {gpu: compile_for(matmul_kernel, launch, gpu).matrix_unit for gpu in
             ("sm_75", "sm_80", "sm_90")}  # fmt: skip
    assert units["sm_75"] == "fma"
    assert units["sm_80"] == "mma" and units["sm_90"] in ("mma", "wgmma")


# lesson 3, b7e1a2c4: a K of 4093 is copied to aligned rows for the TMA kernel


def test_rows_of_4093_float16_are_refused_by_the_tma_and_copied_by_the_capstone():
    text = cell("03_strides.ipynb", "b7e1a2c4")
    assert "runs its TMA kernel on the copy" in text
    from triton.tools.tensor_descriptor import TensorDescriptor

    with pytest.raises(AssertionError, match="16-byte aligned"):
        TensorDescriptor.from_tensor(torch.empty(64, 4093, dtype=torch.float16), [64, 64])
    TensorDescriptor.from_tensor(torch.empty(64, 4096, dtype=torch.float16), [64, 64])
    # what lesson 6 shows from the H200: the TMA kernel, on copies
    plans = {row.label: row.plan for row in results.bench("goals_h200.json").goals}
    plan = plans["4096x4096x4093 float16"]
    assert plan.startswith("persistent_tma") and "rows the TMA cannot read are copied" in plan


# lesson 5, co05c/co05d: what the compiler makes of the two Triton transposes


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
def test_the_tiled_transpose_stores_16_bytes_through_shared_memory(gpu):
    text = cell("05_homework_transpose.ipynb", "co05c")
    assert "stores 16 bytes per instruction" in text and "16 KB of shared memory" in text
    x, out = torch.empty(4096, 4096), torch.empty(4096, 4096)
    view = x.t()
    tiled = compile_for(strided_copy_kernel, specialize(
        strided_copy_kernel, (view, out, 4096, 4096, *view.stride(), *out.stride()),
        {"BLOCK_M": 64, "BLOCK_N": 64}), gpu)  # fmt: skip
    row = compile_for(coalescing.row_transpose_kernel, specialize(
        coalescing.row_transpose_kernel, (x, out, 4096, 4096), {"BLOCK_N": 256}), gpu)  # fmt: skip
    assert tiled.ok and row.ok
    assert "st.global.v4" in tiled.ptx and tiled.shared_bytes == 16 * 1024
    assert "st.global.v4" not in row.ptx and "st.global.b32" in row.ptx


@on_interpreter
def test_lesson_5_shows_stored_h200_numbers_with_provenance_on_a_cpu():
    notebook = nbformat.read(ROOT / "notebooks" / "05_homework_transpose.ipynb", as_version=4)
    notebook.cells = [c for c in notebook.cells if c.get("id") in ("c02", "co05b", "co05d")]
    NotebookClient(notebook, timeout=120).execute()
    text = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    stored = results.transposes()
    assert stored.provenance.where in text
    for name, gbs in stored.gbs.items():
        assert f"{name:34s} {gbs:7.0f} GB/s" in text
    assert "stores 16 bytes per instruction" in text and "stores  4 bytes" in text


def test_the_stored_transposes_rank_as_lesson_5_explains():
    """Coalesced stores beat one row per program; the tiled kernel is the fastest of the three."""
    gbs = results.transposes().gbs
    tiled = gbs["tiled (lesson 3's copy of x.t())"]
    assert tiled > gbs["torch: x.t().contiguous()"] > gbs["one row per program"]


# lesson 0, e0a00003 and e0a00005: looking inside a kernel


@on_interpreter
def test_breakpoint_on_the_interpreter_sees_triton_tensors_with_arrays_in_handle_data(
    monkeypatch,
):
    text = cell("00_start_here.ipynb", "e0a00003")
    assert "`triton.language.tensor` objects" in text and "`x.handle.data`" in text
    seen = {}

    def hook(*args, **kwargs):
        seen.update(sys._getframe(1).f_locals)

    monkeypatch.setattr(sys, "breakpointhook", hook)

    @triton.jit
    def peek(x_ptr, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        breakpoint()
        tl.store(x_ptr + tl.arange(0, BLOCK), x)

    peek[(1,)](torch.arange(4.0), BLOCK=4, num_warps=1)
    assert isinstance(seen["x"], tl.tensor)
    assert seen["x"].handle.data.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_kernel_process_own_output_reaches_the_notebook(monkeypatch):
    """Device prints go to the process's own stdout; ipykernel forwards it to the notebook."""
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # ipykernel does not watch its stdout under pytest
    text = cell("00_start_here.ipynb", "e0a00005")
    assert "ipykernel 6 and later forward to the notebook" in text
    code = "import os, time\nos.write(1, b'from the process itself\\n')\ntime.sleep(0.5)"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(notebook, timeout=60, kernel_name="python3").execute()
    text = "".join(o.get("text", "") for o in notebook.cells[0].outputs)
    assert "from the process itself" in text
