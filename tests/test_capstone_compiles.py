"""The capstone's persistent kernel, compiled for an H200 on this machine (``triton.compile``
for sm_90: ptxas ships in the wheel), as ``matmul_fast`` would launch it there."""

from __future__ import annotations

import collections
import dataclasses
import re

import pytest
import torch

from tmm_course import gpu
from tmm_course.capstone import kernels, launches
from tmm_course.capstone.config import Config
from tmm_course.compile_ahead import compile_for, specialize

BIG = Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True)
OPTIONS = ("num_warps", "num_stages", "launch_cooperative_grid")


def _compiled_for_an_h200(monkeypatch, a, b, config):
    if kernels.TensorDescriptor is None:
        pytest.skip("this triton has no host-side tensor descriptors")
    monkeypatch.setattr(launches, "program_slots", lambda: gpu.KNOWN["H200"].sms)
    monkeypatch.setattr(launches.knobs.runtime, "interpret", False)  # a GPU's launch
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
    arguments, _, constexprs, _, _ = launches.persistent_tma_setup(a, b, out, config, "tf32")
    given = {name: value for name, value in constexprs.items() if name not in OPTIONS}
    kernel = kernels.persistent_tma_matmul_kernel
    launch = specialize(kernel, arguments(a, b, out), given)
    return given, compile_for(kernel, launch, "sm_90", config.num_warps, config.num_stages)


@pytest.mark.parametrize(
    "what, shape, dtype, switch",
    [
        ("a last wave cut into K-slices", (3072, 3072, 3072), torch.float16, "TAIL_SPLITS"),
        ("float32's B^T copied first", (256, 256, 256), torch.float32, "COPY_B"),
        ("rows the TMA cannot read copied", (200, 250, 260), torch.float16, "COPY_A"),
    ],
)
def test_the_persistent_kernel_compiles_for_an_h200(monkeypatch, what, shape, dtype, switch):
    m, n, k = shape
    a, b = torch.zeros(m, k, dtype=dtype), torch.zeros(k, n, dtype=dtype)
    config = dataclasses.replace(BIG, split_tail=True) if switch == "TAIL_SPLITS" else BIG
    if dtype == torch.float32:
        config = dataclasses.replace(config, block_k=32)
    given, compiled = _compiled_for_an_h200(monkeypatch, a, b, config)
    taken = given[switch] is True if switch.startswith("COPY") else given[switch] > 1
    assert taken, what  # the launch takes that path
    assert compiled.ok, compiled.error
    assert compiled.matrix_unit == "wgmma"  # Hopper's warpgroup tensor cores
    assert compiled.shared_bytes <= gpu.KNOWN["H200"].shared_memory


def _loads(ptx: str) -> dict[str, int]:
    """The global loads of a kernel's PTX: asynchronous copies by bytes, plain loads by width."""
    copies = re.findall(r"cp\.async\.c[ag]\.shared\.global [^;]*, (0x[0-9a-f]+|\d+)[,;]", ptx)
    found = collections.Counter(f"cp.async {int(size, 0)} bytes" for size in copies)
    found.update(re.findall(r"\bld\.global(?:\.\w+)*?\.((?:v\d\.)?[bu]\d+)\b", ptx))
    return dict(found)


def test_the_grouped_kernel_reads_rows_off_16_byte_lines_16_bytes_a_copy(monkeypatch):
    # columns of A 333 elements apart, rows of B 7,777, as A's rows and B's in 333x7777x2222:
    # loads of the operands as they are move 2 bytes each, none asynchronously (cp.async moves
    # 4 bytes at least); of the copies the grouped kernel reads, 16 bytes at once, pipelined
    a = torch.zeros(2240, 333, dtype=torch.float16).t()
    b = torch.zeros(2240, 7777, dtype=torch.float16)
    out = torch.empty(333, 7777, dtype=torch.float16)
    config = Config(64, 64, 32, num_warps=4, num_stages=3)
    arguments, _, constexprs, _, before = launches.grouped_setup(a, b, out, config, "tf32")
    assert before is not None  # A and B are copied before each launch
    given = {name: value for name, value in constexprs.items() if name not in OPTIONS}
    kernel = kernels.grouped_matmul_kernel
    compiled = compile_for(kernel, specialize(kernel, arguments(a, b, out), given), "sm_90", 4, 3)
    assert compiled.ok, compiled.error
    loads = _loads(compiled.ptx)
    assert loads.get("cp.async 16 bytes", 0) >= 6 and set(loads) == {"cp.async 16 bytes"}, loads
    monkeypatch.setattr(kernels, "rows_on_16_bytes", lambda t: True)  # read them as they are
    arguments, _, constexprs, _, before = launches.grouped_setup(a, b, out, config, "tf32")
    given = {name: value for name, value in constexprs.items() if name not in OPTIONS}
    compiled = compile_for(kernel, specialize(kernel, arguments(a, b, out), given), "sm_90", 4, 3)
    assert before is None and compiled.ok, compiled.error
    assert set(_loads(compiled.ptx)) == {"b16"}, _loads(compiled.ptx)  # 2 bytes, synchronous
