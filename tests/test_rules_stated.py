"""Rules the lessons state, each with its domain, checked by compiling what they say
(:mod:`tmm_course.compile_ahead`, for the GPU each names) on this machine."""

from __future__ import annotations

import json
import re

import torch
from conftest import ROOT

from tmm_course.compile_ahead import compile_for, specialize
from tmm_course.kernels.matmul import matmul_kernel
from tmm_course.kernels.persistent_tma import PersistentConfig, compiler_view
from tmm_course.kernels.persistent_tma import persistent_matmul_kernel as descriptor_kernel


def _prose(name: str) -> str:
    cells = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))["cells"]
    return " ".join(
        " ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown"
    )


def test_the_buffer_rule_names_its_kernel_and_the_descriptor_kernels_count_is_compiled():
    """Lesson 6's recap: num_stages - 1 buffers on sm_80 is lesson 4's pointer kernel's rule
    (tests/test_compile_ahead.py compiles it); lesson 7's float32 descriptor kernel on
    128x256x64 tiles takes num_stages there, at the figures the recap prints."""
    text = _prose("06_making_it_fast.ipynb")
    assert "For lesson 4's pointer kernel Triton allocates `num_stages` buffers on `sm_90`" in text
    said = re.search(
        r"lesson 7's descriptor kernel on float32 128x256x64 tiles takes `num_stages` on `sm_80` "
        r"too \((\d+), (\d+) and (\d+) KB at 1, 2 and 3\)",
        text,
    )
    assert said, "the recap's descriptor-kernel figures"
    for stages, kb in zip((1, 2, 3), map(int, said.groups()), strict=True):
        view = compiler_view(PersistentConfig(128, 256, 64, num_stages=stages), torch.float32)
        compiled = compile_for(descriptor_kernel, view, "sm_80", num_warps=8, num_stages=stages)
        assert compiled.ok and compiled.shared_bytes == kb * 1024, (stages, compiled)
        slab = (128 * 64 + 64 * 256) * 4
        assert compiled.shared_bytes == stages * slab  # num_stages buffers, not num_stages - 1


def test_a_t4_is_refused_bfloat16_by_policy_not_by_the_compiler():
    """Lesson 4: Triton compiles lesson 4's bfloat16 tl.dot for a T4 (sm_75) on plain FMA
    instructions; the refusal is the course's, and the page says so."""
    a = torch.empty(16, 16, dtype=torch.bfloat16)  # only its dtype and alignment matter
    size = 512
    launch = specialize(
        matmul_kernel,
        (a, a, a, size, size, size, size, 1, size, 1, size, 1),
        {"PRECISION": None, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
    )
    compiled = compile_for(matmul_kernel, launch, "sm_75")
    assert compiled.ok and compiled.matrix_unit == "fma"
    text = _prose("04_tiled_matmul.ipynb")
    assert "by the course's choice" in text
    assert "Triton compiles a bfloat16 `tl.dot` onto plain FMA instructions" in text
