"""Lesson 4: one kernel for five GPUs. ``portable_matmul(a, b, c)`` stores ``a @ b`` into ``c`` as
lesson 4's ``matmul`` does (the same cases), through a kernel of the learner's launched with
the tile, warps and stages they chose; its launches on a float16 ``4096^3`` product are noted,
not run, compiled for the five GPUs the course names (:data:`tmm_course.gpus.TARGETS`: a T4, an
A100, an H100, a B200, an RTX 5090) and judged by the compiler alone: on each GPU the kernel
compiles within its limits, spills no registers, and at least one program fits an SM. A miss
names the GPU and the knob to turn."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from tmm_course import gpus
from tmm_course.compile_ahead import Compiled, Launched
from tmm_course.exercises import matmul, products
from tmm_course.exercises.faster import float16_product
from tmm_course.exercises.spec import AtScale, Cells, Exercise, Goal

SIZE = 4096  # float16 SIZE^3: the problem its launches are compiled at
TARGETS = tuple(gpus.TARGETS)

# the knob that frees each resource, in a learner's words
KNOBS = {
    "shared memory": "num_stages or BLOCK_K (each stage holds a (BLOCK_M + BLOCK_N) x BLOCK_K "
    "slab of A and B in shared memory)",
    "registers": "num_warps up or BLOCK_M x BLOCK_N down (fewer accumulator values per thread), "
    "or BLOCK_K down (where tl.dot runs on FMA units, a T4's, each thread holds slices of the A "
    "and B slabs in registers too)",
    "tensor memory": "BLOCK_M x BLOCK_N (the accumulator lives in tensor memory there)",
    "warps": "num_warps",
}


def on_gpu(kernel: str, target: str, compiled: Compiled) -> Goal:
    """Whether ``kernel``, compiled for ``target``, fits that GPU: compiled within its limits, no
    spills, at least one program per SM; a miss names the GPU and the knob."""
    where = f"{gpus.described(target)}, {target}"
    asks = f"{kernel} fits {gpus.label(target)} ({target}): compiles, no spills, a program per SM"
    if not compiled.ok:
        error = compiled.error or "refused"
        knob = next((k for r, k in KNOBS.items() if f"out of resource: {r}" in error), "")
        fix = f"{kernel} does not fit {where}: {error}" + (f" Turn {knob}." if knob else "")
        return Goal(asks, False, f"refused: {error}"[:300], "gpu_would_reject", fix)
    held = compiled.occupancy
    seen = compiled.summary()
    if compiled.spilled_bytes:
        fix = (f"{kernel} spills {compiled.spilled_bytes} bytes of registers per thread to memory "
               f"on {where}. Turn {KNOBS['registers']}.")  # fmt: skip
        return Goal(asks, False, seen, "goal_missed", fix)
    if held is not None and held.programs < 1:
        fix = (f"{kernel}: no program fits an SM of {where} ({held.summary()}). Turn "
               f"{KNOBS[held.limited_by]}.")  # fmt: skip
        return Goal(asks, False, seen, "goal_missed", fix)
    return Goal(asks, True, seen)


def judge(launched: Sequence[Launched]) -> list[Goal]:
    """The goals of every kernel of the learner's launched at scale, on each of the five GPUs."""
    if not launched:
        return [Goal("a kernel of yours is launched", False, "no kernel written in the notebook",
                     "course_kernel", "launch a kernel written in the notebook")]  # fmt: skip
    return [on_gpu(x.kernel, t, x.compiled[t]) for x in launched for t in TARGETS]


EXERCISE = Exercise(
    name="five_gpus",
    lesson=4,
    function="portable_matmul",
    signature="portable_matmul(a, b, c)",
    tensors=("a", "b", "c"),
    cases=matmul.cases,
    cells=Cells("04_tiled_matmul", "c23b", "c23c", "c23d"),
    messages=products.MESSAGES,
    at_scale=AtScale(
        f"compiled at {SIZE}^3 float16 for {', '.join(gpus.label(t) for t in TARGETS)}",
        partial(float16_product, SIZE, SIZE, SIZE),
        TARGETS,
        judge,
    ),
)
