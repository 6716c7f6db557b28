"""The compiler, run ahead of time for a named GPU on this CPU, is the course's judge of what a
GPU accepts: its verdict, shared memory, registers and matrix instructions."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import tmm_course
from tmm_course.compile_ahead import compile_everywhere, compile_for, specialize
from tmm_course.kernels.matmul import matmul_kernel


def _lesson4(m: int, n: int, k: int, blocks: tuple[int, int, int], dtype=torch.float16):
    a = torch.empty(m, k, dtype=dtype)
    b = torch.empty(k, n, dtype=dtype)
    c = torch.empty(m, n, dtype=dtype)
    block_m, block_n, block_k = blocks
    args = (a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride())
    constexprs = {
        "PRECISION": "ieee" if dtype == torch.float32 else "tf32",
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "BLOCK_K": block_k,
    }
    return specialize(matmul_kernel, args, constexprs)


@pytest.mark.parametrize("blocks", [(8, 8, 16), (8, 64, 16), (64, 8, 16)])
def test_small_m_and_n_compile_to_tensor_cores(blocks):
    launch = _lesson4(100, 100, 100, blocks)
    results = compile_everywhere(matmul_kernel, launch)
    assert all(r.ok for r in results.values()), {g: r.error for g, r in results.items()}
    assert results["sm_80"].matrix_unit == "mma"
    assert results["sm_90"].matrix_unit in ("mma", "wgmma")
    assert results["sm_75"].matrix_unit == "fma"  # a T4 runs tl.dot without tensor cores


def test_k_below_16_is_refused_for_16_bit_inputs():
    launch = _lesson4(64, 64, 64, (16, 16, 8))
    refused = compile_for(matmul_kernel, launch, "sm_80")
    assert not refused.ok
    assert refused.error == "Input shapes should have M >= 1, N >= 1 and K >= 16"


def test_k_of_8_for_float32_depends_on_the_triton_version():
    """Triton 3.6 wants K >= 16 for float32 too; 3.9 accepts 8."""
    version = _version(triton.__version__)
    if version not in ((3, 6), (3, 9)):
        pytest.skip(f"measured on Triton 3.6 and 3.9 only, this is {triton.__version__}")
    launch = _lesson4(64, 64, 64, (16, 16, 8), torch.float32)
    assert compile_for(matmul_kernel, launch, "sm_80").ok == (version == (3, 9))


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def test_shared_memory_is_the_compilers_own_figure_per_gpu():
    launch = _lesson4(512, 512, 512, (64, 64, 32))
    sm80 = compile_for(matmul_kernel, launch, "sm_80", num_stages=3)
    sm90 = compile_for(matmul_kernel, launch, "sm_90", num_stages=3)
    assert sm80.ok and sm90.ok
    stage = (64 * 32 + 32 * 64) * 2
    assert sm80.shared_bytes == 2 * stage  # Ampere: num_stages - 1 buffers
    assert sm90.shared_bytes == 3 * stage  # Hopper: num_stages buffers
    assert sm80.registers and sm80.spilled_bytes == 0


@triton.jit
def _float16_accumulator(a_ptr, c_ptr, K, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tile = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float16)
    for _ in range(0, K, BLOCK):
        acc = tl.dot(tile, tile, acc.to(tl.float32))
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], acc.to(tl.float16))


@triton.jit
def _static_range_over_runtime_k(a_ptr, c_ptr, K, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in tl.static_range(0, K, BLOCK):
        total += tl.load(a_ptr + k + offs).to(tl.float32)
    tl.store(c_ptr + offs, total)


@pytest.mark.parametrize(
    ("kernel", "words"),
    [(_float16_accumulator, "Loop-carried variable acc"), (_static_range_over_runtime_k, "")],
)
def test_code_the_interpreter_runs_but_a_gpu_compiler_refuses(kernel, words):
    a = torch.empty(256, dtype=torch.float16)
    c = torch.empty(256, dtype=torch.float16)
    launch = specialize(kernel, (a, c, 64), {"BLOCK": 16})
    result = compile_for(kernel, launch, "sm_90")
    assert not result.ok
    assert words in result.error
    assert "\n" not in result.error and len(result.error) < 400


def test_a_launch_without_every_argument_is_a_clear_error():
    a = torch.empty(4, dtype=torch.float16)
    with pytest.raises(TypeError, match="no value for the kernel's argument 'K'"):
        specialize(_float16_accumulator, (a, a), {"BLOCK": 16})


def test_an_unknown_gpu_is_a_clear_error():
    launch = _lesson4(16, 16, 16, (16, 16, 16))
    with pytest.raises(ValueError, match="expected one of sm_75, sm_80, sm_90"):
        compile_for(matmul_kernel, launch, "sm_86")


def test_compiling_leaves_the_interpreter_working():
    from tmm_course.kernels import matmul

    launch = _lesson4(16, 16, 16, (16, 16, 16))
    compile_for(matmul_kernel, launch, "sm_90")
    a = torch.randn(20, 24, device=tmm_course.DEVICE)
    b = torch.randn(24, 12, device=tmm_course.DEVICE)
    torch.testing.assert_close(matmul(a, b, precision="ieee"), a @ b, rtol=1e-4, atol=1e-4)


def test_a_kernel_that_has_run_on_the_interpreter_still_compiles():
    """The interpreter leaves parts of triton.language patched after a launch; the compiler
    must get the language as it was."""
    from tmm_course.kernels import matmul

    a = torch.randn(32, 32, device=tmm_course.DEVICE)
    matmul(a, a, precision="ieee")  # runs the kernel (on the interpreter, it patches tl.core)
    launch = _lesson4(64, 64, 64, (16, 16, 16))
    result = compile_for(matmul_kernel, launch, "sm_90", num_stages=2)
    assert result.ok, result.error
    torch.testing.assert_close(matmul(a, a, precision="ieee"), a @ a, rtol=1e-4, atol=1e-4)


def test_compiling_after_an_interpreted_run_uses_the_compilers_builder(monkeypatch, tmp_path):
    """Triton's interpreter can leave triton.language.core's builtins patched after a kernel
    ran; compiling ahead must not build with the interpreter's builder then."""
    import bug_bank

    from tmm_course import compile_ahead

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # a real compile, not a cached one
    compile_ahead.forget()

    import tmm_course

    if tmm_course.BACKEND != "interpreter":
        pytest.skip("only the interpreter patches the language")
    a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half()
    bug_bank.mm()(a, b, torch.empty(64, 64).half())  # an interpreted run first
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    args = (a, b, c, 64, 64, 64, *a.stride(), *b.stride(), *c.stride(), 1.0, 0.0)
    launch = specialize(
        bug_bank.mm_kernel, args, {"BM": 32, "BN": 32, "BK": 32, **bug_bank.MM_FLAGS}
    )
    compiled = compile_for(bug_bank.mm_kernel, launch, "sm_80")
    assert compiled.ok, compiled.error


def test_a_kernel_taking_tensor_descriptors_compiles_ahead_for_hopper():
    from tmm_course.capstone.kernels import TensorDescriptor

    if TensorDescriptor is None:
        pytest.skip("this triton has no host-side tensor descriptors")

    @triton.jit
    def copy_tile(src, dst, BLOCK: tl.constexpr):
        dst.store([0, 0], src.load([0, 0]))

    x, y = torch.zeros(64, 64, dtype=torch.float16), torch.zeros(64, 64, dtype=torch.float16)
    args = (TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor.from_tensor(y, [64, 64]))
    compiled = compile_for(copy_tile, specialize(copy_tile, args, {"BLOCK": 64}), "sm_90", 4, 1)
    assert compiled.ok, compiled.error
    assert "cp.async.bulk.tensor" in compiled.ptx  # the TMA unit moves the tile


def test_a_spilling_kernel_reports_its_spills_and_its_occupancy():
    """Lesson 4's kernel with 128x256 tiles on 4 warps holds 256 accumulator values per thread:
    more than 255 registers, so ptxas spills (``cuobjdump`` counts them as STACK, not LOCAL);
    8 warps hold the same tile without spilling."""
    launch = _lesson4(4096, 4096, 4096, (128, 256, 64))
    four = compile_for(matmul_kernel, launch, "sm_90", num_warps=4, num_stages=3)
    assert four.ok and four.registers == 255 and four.spilled_bytes > 0
    assert four.occupancy is not None and four.occupancy.programs == 1
    assert four.occupancy.limited_by == "shared memory"  # 144 KB of 228: one program
    assert "bytes spilled" in four.summary() and "1 program per SM" in four.summary()


def test_a_spill_below_255_registers_says_the_compiler_chose_local_memory():
    """On a T4 (FMA path: the A and B slabs sit in registers too) 128x128x64 tiles on 4 warps
    leave a thread 64 registers and kilobytes of local memory; the line says so, not a bare
    "64 registers, N bytes spilled" that reads as a contradiction."""
    launch = _lesson4(4096, 4096, 4096, (128, 128, 64))
    t4 = compile_for(matmul_kernel, launch, "sm_75", num_warps=4, num_stages=2)
    assert t4.ok and t4.registers < 255 and t4.spilled_bytes > 1024
    assert "(to local memory, though a thread may have 255 registers)" in t4.summary()
    full = compile_for(matmul_kernel, _lesson4(4096, 4096, 4096, (128, 256, 64)), "sm_90", 4, 3)
    assert full.registers == 255 and "though a thread" not in full.summary()


def test_occupancy_follows_the_occupancy_calculator():
    from tmm_course.compile_ahead import occupancy

    # 255 registers: 8,192 per warp, two warps per quarter of the register file, 8 warps per SM
    assert occupancy("sm_90", 255, 0, num_warps=4).by_registers == 2
    assert occupancy("sm_90", 255, 0, num_warps=8).programs == 1
    # 128 registers and 4 warps: 4 programs; 64 KB of shared memory: 3 on sm_90 (1 KB reserve)
    held = occupancy("sm_90", 128, 64 * 1024, num_warps=4)
    assert (held.by_registers, held.by_shared, held.programs) == (4, 3, 3)
    assert held.limited_by == "shared memory"
    # a T4 holds 32 warps and 64 KB: warps limit 8-warp programs to 4, 32 KB each to 2
    t4 = occupancy("sm_75", 32, 32 * 1024, num_warps=8)
    assert (t4.by_warps, t4.by_shared, t4.programs) == (4, 2, 2)
    none = occupancy("sm_80", 32, 200 * 1024, num_warps=4)
    assert none.programs == 0 and none.limited_by == "shared memory"
    assert none.summary().startswith("no program fits on an SM (shared memory allow none")
