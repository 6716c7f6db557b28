"""Five GPUs from a CPU: the table of GPUs (tmm_course.gpus) against what Triton's compiler makes
of the course's kernels for each (on whichever Triton is installed: CI runs this file on 3.6 and
3.9), and lesson 4's exercise on the five (every launch per tier: tests/test_tiers_fit.py)."""

from __future__ import annotations

import pytest
import torch

from tmm_course import gpu, gpus
from tmm_course.check.gpu_rules import fits
from tmm_course.compile_ahead import (
    GPUS,
    Compiled,
    compile_everywhere,
    compile_for,
    occupancy,
    specialize,
)
from tmm_course.kernels import persistent_tma
from tmm_course.kernels.matmul import matmul_kernel


def _lesson4(blocks=(64, 64, 32), dtype=torch.float16):
    m = n = k = 512
    a, b, c = (torch.empty(m, k, dtype=dtype), torch.empty(k, n, dtype=dtype),
               torch.empty(m, n, dtype=dtype))  # fmt: skip
    args = (a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride())
    block_m, block_n, block_k = blocks
    return specialize(matmul_kernel, args, {"PRECISION": "tf32", "BLOCK_M": block_m,
                                            "BLOCK_N": block_n, "BLOCK_K": block_k})  # fmt: skip


def test_the_table_names_five_targets_and_each_card_its_own_shared_memory():
    assert list(GPUS) == ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"]
    assert [gpus.for_target(t).short for t in GPUS] == ["T4", "A100", "H100", "B200", "RTX 5090"]
    # not ordered by capability: the newest has less than an A100, as Triton's launcher says
    assert gpus.CARDS["RTX 5090"].shared_per_block == 101376  # "Hardware limit: 101376"
    assert gpus.CARDS["A100"].shared_per_block == 166912
    for card in gpus.CARDS.values():  # every figure has a source
        assert card.source("shared_per_block") and card.source("sms")
        assert card.shared_per_block + card.reserved_shared == card.shared_per_sm
        assert (card.tensor_memory > 0) == (card.matrix_unit == "tcgen05")
    with pytest.raises(ValueError, match="expected one of sm_75, sm_80"):
        gpus.for_target("sm_89")


def test_lesson_4s_kernel_compiles_on_each_gpus_matrix_unit_as_the_table_says():
    """Done when: tcgen05 and tensor memory on sm_100, mma.sync on sm_120."""
    compiled = compile_everywhere(matmul_kernel, _lesson4(), num_warps=4, num_stages=3)
    assert all(c.ok for c in compiled.values()), {t: c.error for t, c in compiled.items()}
    units = {t: c.matrix_unit for t, c in compiled.items()}
    assert units == {t: gpus.for_target(t).matrix_unit for t in GPUS}
    assert units == {"sm_75": "fma", "sm_80": "mma", "sm_90": "wgmma", "sm_100": "tcgen05",
                     "sm_120": "mma"}  # fmt: skip
    b200, rtx = compiled["sm_100"], compiled["sm_120"]
    assert "tcgen05.mma" in b200.ptx and "tcgen05.alloc" in b200.ptx
    assert b200.tensor_memory == 64  # a 64x64 float32 accumulator: 64 columns of 128 lanes
    assert b200.occupancy.by_tensor_memory == 8  # of the SM's 512 columns
    assert "64 columns of tensor memory, tl.dot on Blackwell's tensor cores" in b200.summary()
    assert "mma.sync" in rtx.ptx and "tcgen05" not in rtx.ptx and not rtx.tensor_memory
    assert rtx.occupancy.by_tensor_memory is None


def test_the_descriptor_and_persistent_kernel_on_blackwell_and_an_rtx_50():
    """Lesson 7's persistent kernel, loading through tensor descriptors: tcgen05 with tensor
    memory and TMA copies on a B200; mma.sync with TMA copies on an RTX 50, its tiles fitting
    (lesson 7, pt08b, says so)."""
    import nbformat
    from conftest import ROOT

    lesson = nbformat.read(ROOT / "notebooks" / "07_persistent_tma.ipynb", as_version=4)
    said = " ".join(next(c for c in lesson.cells if c.get("id") == "pt08b").source.split())
    assert "`tl.dot` becomes `tcgen05`" in said and "`tl.dot` stays `mma`" in said
    assert "the H200's tiles are refused there" in said and "still TMA copies" in said
    cfg = persistent_tma.FITTING_CONFIG
    view = persistent_tma.compiler_view(cfg)
    kernel = persistent_tma.persistent_matmul_kernel
    b200 = compile_for(kernel, view, "sm_100", cfg.num_warps, cfg.num_stages)
    rtx = fits(compile_for(kernel, view, "sm_120", cfg.num_warps, cfg.num_stages))
    assert b200.ok and rtx.ok, (b200.error, rtx.error)
    assert b200.matrix_unit == "tcgen05" and b200.tensor_memory
    assert rtx.matrix_unit == "mma" and not rtx.tensor_memory
    assert "cp.async.bulk.tensor" in b200.ptx and "cp.async.bulk.tensor" in rtx.ptx
    assert rtx.occupancy.programs >= 1  # (Triton 3.6 keeps an 8-byte stack there, 3.9 none)
    big = persistent_tma.H200_CONFIG  # the H200's tiles do not fit an RTX 50
    too_big = fits(compile_for(kernel, persistent_tma.compiler_view(big), "sm_120",
                               big.num_warps, big.num_stages))  # fmt: skip
    assert not too_big.ok and "Hardware limit: 101376" in too_big.error


def test_lesson_7_picks_tiles_by_shared_memory_not_by_compute_capability():
    pick = persistent_tma.config_for
    assert pick(gpu.KNOWN["H200"]) == pick(gpu.KNOWN["B200"]) == persistent_tma.H200_CONFIG
    assert pick(gpu.KNOWN["RTX 5090"]) == persistent_tma.FITTING_CONFIG
    assert pick(None) == persistent_tma.SMALL_CONFIG


def test_tensor_memory_is_a_resource_of_the_occupancy_and_the_launch():
    held = occupancy("sm_100", registers=64, shared_bytes=16 * 1024, num_warps=4,
                     tensor_memory=256)  # fmt: skip
    assert held.programs == 2 and held.limited_by == "tensor memory"
    assert occupancy("sm_100", 64, 16 * 1024, 4, tensor_memory=100).by_tensor_memory == 4  # 128
    refused = fits(Compiled("sm_100", True, shared_bytes=1024, registers=32, tensor_memory=1024))
    assert not refused.ok
    assert refused.error.startswith(
        "out of resource: tensor memory, Required: 1024, Hardware limit: 512"
    )
    said = fits(Compiled("sm_120", True, shared_bytes=131072, registers=32)).error
    assert "Required: 131072, Hardware limit: 101376" in said  # triton-lang/triton #8182's words


# lesson 4's exercise 3: one kernel for five GPUs, judged by the compiler alone


def _exercise_launch(blocks: tuple[int, int, int]):
    a = torch.zeros(16, 16, dtype=torch.float16)  # only its dtype and alignment matter
    size = 4096
    block_m, block_n, block_k = blocks
    return specialize(matmul_kernel, (a, a, a, size, size, size, size, 1, size, 1, size, 1),
                      {"PRECISION": None, "BLOCK_M": block_m, "BLOCK_N": block_n,
                       "BLOCK_K": block_k})  # fmt: skip


def test_the_five_gpu_exercise_names_the_gpu_and_the_knob():
    from tmm_course.exercises import five_gpus

    def goal(target, blocks, warps, stages):
        launch = _exercise_launch(blocks)
        compiled = fits(compile_for(matmul_kernel, launch, target, warps, stages))
        return five_gpus.on_gpu("portable_kernel", target, compiled)

    # the lesson's first try: 64x64x32 on 4 warps spills on a T4 (Triton 3.6 and 3.9)
    spills = goal("sm_75", (64, 64, 32), 4, 3)
    assert not spills.met and spills.code == "goal_missed"
    assert "spills" in spills.fix and "a T4 (compute capability 7.5" in spills.fix
    assert "Turn num_warps up or BLOCK_M x BLOCK_N down" in spills.fix
    # eight stages of 64x64x64: an H100 holds them, an RTX 5090 refuses them
    assert goal("sm_90", (64, 64, 64), 8, 8).met
    refused = goal("sm_120", (64, 64, 64), 8, 8)
    assert not refused.met and refused.code == "gpu_would_reject"
    assert "an RTX 5090 (compute capability 12.0" in refused.fix
    assert "Hardware limit: 101376" in refused.fix and "Turn num_stages or BLOCK_K" in refused.fix
    # the solution's launch (lesson 4, c23c) fits all five
    for target in GPUS:
        assert goal(target, (64, 64, 32), 8, 3).met, target
    assert five_gpus.judge([])[0].code == "course_kernel"


def test_lesson_7s_float32_slabs_fit_an_rtx_50_as_its_solution_says():
    """pt20: float32 slabs 16 deep, "so that 3 stages fit an RTX 50's 99 KB (32-deep ones ask
    128 KB there on Triton 3.6)"; compiled for sm_120 on whichever Triton is installed."""
    import triton
    from test_performance_lessons import descriptor_solution

    from tmm_course.check.compiled import launched
    from tmm_course.check.launches import grid_of, recording

    fn = descriptor_solution()
    a, w, c = torch.zeros(64, 64), torch.zeros(64, 64), torch.zeros(64, 64)
    rtx = {}
    for tile_k in (64, 128):  # the solution's float32 BLOCK_K: a quarter, 16 and 32 deep
        with recording(dry=True) as seen:
            fn(a, w, c, tile=(128, 128, tile_k))
        (x,) = seen.seen
        found = launched(x.jit, x.kernel, x.args, x.kwargs, grid_of(x), ("sm_120",))
        rtx[found.constants["BLOCK_K"]] = found.compiled["sm_120"]
    assert rtx[16].ok and rtx[16].shared_bytes <= gpus.CARDS["RTX 5090"].shared_per_block
    if triton.__version__.startswith("3.6."):
        assert not rtx[32].ok and "Required: 131104" in rtx[32].error  # 128 KB
