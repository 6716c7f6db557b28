"""Every launch the course picks fits each tier: the capstone's plans and lesson 6's steps, on a
faked GPU of each tier, compiled for that GPU's target on this CPU (tmm_course.compile_ahead) and
read against its limits (tmm_course.gpus): none refused, at least one program per SM. The
capstone's own count of shared memory (plans.shared_memory_bytes) is checked against the
compiler's: never below it, so that the tiles it picks to fit a GPU do fit."""

from __future__ import annotations

import pytest
import torch

import tmm_course
from tmm_course import gpu, gpus
from tmm_course.backend import GPU
from tmm_course.capstone.config import Config
from tmm_course.check.gpu_rules import fits
from tmm_course.compile_ahead import compile_for, specialize

# every plan of the capstone, per tier: each within the GPU's shared memory by the plan's count,
# and the largest (by that count) of each kernel and element size compiled for that tier's GPU:
# none over the GPU's limits, none above the count. float32 plans compiled on the two Blackwell
# tiers only (the H200's are compiled in test_capstone_compiles.py): a compile costs seconds
TIER_CARDS = ("T4", "A100", "H200", "B200", "RTX 5090")
OPTIONS = ("num_warps", "num_stages", "launch_cooperative_grid")


def _fake(monkeypatch, fake: gpu.Gpu) -> None:
    monkeypatch.setattr(tmm_course, "BACKEND", GPU)
    monkeypatch.setattr(gpu, "current", lambda: fake)


def _plans(fake: gpu.Gpu) -> list:
    """(shared memory by the plan's count, plan, a, b) of every GOALS problem on ``fake``."""
    from tmm_course.capstone import plans
    from tmm_course.capstone.problems import GOALS

    found = []
    for problem, _ in GOALS:
        dtype = getattr(torch, problem.dtype)
        if dtype == torch.bfloat16 and not fake.bfloat16:
            continue
        a = torch.empty(problem.m, problem.k, dtype=dtype)
        b = torch.empty(problem.k, problem.n, dtype=dtype)
        chosen = plans.plan(a, b)
        used = plans.shared_memory_bytes(chosen.path, chosen.config, a.element_size(), fake)
        found.append((used, chosen, a, b))
    return found


def _compiled(chosen, a, b, target: str):
    """The capstone's launch of ``chosen`` on ``a @ b``, compiled for ``target``."""
    from tmm_course.capstone import kernels, launches

    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
    tma = chosen.path == "persistent_tma"
    setup = launches.persistent_tma_setup if tma else launches.grouped_setup
    arguments, _, constexprs, _, _ = setup(a, b, out, chosen.config, "tf32")
    given = {name: value for name, value in constexprs.items() if name not in OPTIONS}
    kernel = kernels.persistent_tma_matmul_kernel if tma else kernels.grouped_matmul_kernel
    return fits(compile_for(kernel, specialize(kernel, arguments(a, b, out), given), target,
                            chosen.config.num_warps, chosen.config.num_stages))  # fmt: skip


@pytest.fixture
def compiling(monkeypatch):
    from tmm_course.capstone import kernels, launches

    if kernels.TensorDescriptor is None:
        pytest.skip("this triton has no host-side tensor descriptors")
    monkeypatch.setattr(launches.knobs.runtime, "interpret", False)  # a GPU's launch


def _largest(fake: gpu.Gpu) -> dict:
    """The largest plan (by the plan's count) of each kernel and element size on ``fake``, each
    plan checked first to be within its shared memory by that count."""
    largest: dict = {}
    for used, chosen, a, b in _plans(fake):
        assert used <= fake.shared_memory, (fake.name, str(chosen))
        key = (chosen.path, a.element_size())
        if key not in largest or used > largest[key][0]:
            largest[key] = (used, chosen, a, b)
    return largest


@pytest.mark.parametrize("short", TIER_CARDS)
def test_the_capstones_plans_fit_each_tier_compiled(short, monkeypatch, compiling):
    fake, card = gpu.KNOWN[short], gpus.CARDS[short]
    _fake(monkeypatch, fake)
    for (_, itemsize), (used, chosen, a, b) in _largest(fake).items():
        if itemsize == 4 and fake.capability < (10, 0):
            continue
        compiled = _compiled(chosen, a, b, card.target)
        assert compiled.ok, (short, str(chosen), compiled.error)
        assert compiled.shared_bytes <= used, (short, str(chosen), compiled.shared_bytes)
        assert compiled.occupancy.programs >= 1, (short, str(chosen), compiled.occupancy.summary())
        assert compiled.matrix_unit in ("fma", "mma", card.matrix_unit), (short, str(chosen))


def test_a_fake_12x_gpu_gets_persistent_float32_tiles_that_fit(monkeypatch, compiling):
    """A faked RTX 50: the capstone's largest float32 plan through the persistent kernel, shrunk
    by the plan's count (C's staging buffer included) to tiles that fit, compiled for sm_120
    (the walk above compiled the same launch: cached)."""
    from tmm_course.capstone import plans

    fake = gpu.KNOWN["RTX 5090"]
    _fake(monkeypatch, fake)
    assert fake.tier == "consumer Blackwell"
    used, chosen, a, b = _largest(fake)["persistent_tma", 4]
    assert "shrunk to fit 99 KB" in chosen.reason
    compiled = _compiled(chosen, a, b, "sm_120")
    assert compiled.ok, (str(chosen), compiled.error)
    assert compiled.shared_bytes <= used <= fake.shared_memory
    # what the count left out before: C's tile on its way out (64 KB of float32 at 128x256,
    # subtiled), which took the plan it let through to 114,696 bytes compiled for sm_120
    big = Config(128, 256, 32, num_warps=8, num_stages=2, subtile=True)
    assert plans.shared_memory_bytes("grouped", big, 4) <= fake.shared_memory
    assert plans.shared_memory_bytes(chosen.path, big, 4) > fake.shared_memory
    assert plans.fit_shared_memory(chosen.path, big, 4, fake) != big


def test_lessons_6_and_7_exercises_gate_on_every_gpu_the_course_names():
    """Their checks compile every launch for the five GPUs (Exercise.gpus None: the compile
    gate's every target) and lesson 6's goals read each; the notebooks' solution cells, run
    by nbval on Triton 3.6 and 3.9, pass those checks, so their launches fit each tier."""
    from tmm_course.exercises import descriptor_matmul, faster
    from tmm_course.perf import faster as lab

    assert faster.EXERCISE.gpus is None and descriptor_matmul.EXERCISE.gpus is None
    assert tuple(gpus.TARGETS) == lab.TARGETS


# lesson 6's steps as a GPU runs them live (mf39), per tier: each step's launches noted, not run,
# and compiled for that tier's GPU. The two that need most shared memory of their kernels (all
# three knobs: 128x128x64 on 4 stages, grouped; lesson 7's persistent kernel); the others are
# smaller tiles or fewer stages of the same kernels
LARGEST_STEPS = ("all three", "persistent + TMA")


@pytest.mark.parametrize("short", TIER_CARDS)
def test_lesson_6s_largest_steps_fit_each_tier_compiled(short, monkeypatch):
    from tmm_course.check.compiled import launched
    from tmm_course.check.launches import grid_of, recording
    from tmm_course.perf import knobs

    fake, card = gpu.KNOWN[short], gpus.CARDS[short]
    _fake(monkeypatch, fake)
    a = torch.zeros(4096, 4096, dtype=torch.float16)
    steps = [s for s in knobs.STEPS if s.name in LARGEST_STEPS]
    assert len(steps) == len(LARGEST_STEPS)
    with recording(dry=True) as seen:
        for step in steps:
            step.run(a, a)
    assert len(seen.seen) == len(steps)
    for x in seen.seen:
        found = launched(x.jit, x.kernel, x.args, x.kwargs, grid_of(x), (card.target,))
        compiled = found.compiled[card.target]
        assert compiled.ok, (x.kernel, found.constants, compiled.error)
        assert compiled.occupancy.programs >= 1, (x.kernel, compiled.occupancy.summary())
