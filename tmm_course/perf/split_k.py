"""Lesson 8's exercise: split-K of the learner's own, on a deep product with few tiles.

A float16 ``512 x 512 x 16384`` product has 64 tiles of lesson 4's 64x64 and 16 of 128x128: an
H200 has 132 SMs, so most of them would wait. The learner writes split-K (``K`` cut into
``SPLIT_K`` slices, one program per (tile, slice), the float32 partials added by a kernel of
theirs) with knobs of their choosing. On any machine the compiler judges the launches their
function makes on that product, noted and not run (:func:`launch_goals`: compiled for an A100
and an H200, no spills, ``wgmma``, every SM of an H200 given a program, all of them in one wave
by the compiler's occupancy, enough loads in flight, slices deep enough to pipeline); on a GPU
the clock judges it too (:func:`clock_goal`) against lesson 4's kernel on the same product, and
:func:`sweep` races a launcher at many knobs (the stored run's evidence for the goals)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tmm_course.capstone.launches import K_STEPS_A_SLICE
from tmm_course.compile_ahead import Compiled, Launched, Occupancy
from tmm_course.gpu import KNOWN
from tmm_course.perf import faster
from tmm_course.perf.faster import Goal

M, N, K = 512, 512, 16384  # float16: the problem the goals are stated for
# how the clock times it: the GPU's time alone (a CUDA graph's replay). Its GPU work is about as
# short as launching it from Python: on an H100 the stored run measured lesson 8's solution at
# 0.035 ms of GPU time a call (exercises_run.json, "lesson_8"), where one kernel[grid](...)
# launch from Python costs the host 0.02 to 0.04 ms (goals_h200.json's host figures, an H200),
# and the solution launches two kernels: host time would hide what split-K does
TIMED = "device"
H200_SMS = KNOWN["H200"].sms
TARGETS = ("sm_80", "sm_90")  # an A100 and an H200
MIN_K_STEPS = K_STEPS_A_SLICE  # per slice: the capstone's own rule for its tail's slices
# loads in flight per SM (the ring of slabs every resident program holds, shared among the
# SMs) a thin, deep product needs before it stops waiting on memory: where the stored sweep of
# lesson 8's solution (exercises_run.json, "split_k_sweep", on an H100: 132 SMs like an
# H200's) splits its launches, 29 of the 42 below it under 2.5 times lesson 4's speed,
# 40 of the 41 above it over
MIN_IN_FLIGHT = 64 * 1024
# the factor over lesson 4's kernel a launch must reach on each GPU, and where it comes from
CLOCK_FACTORS: dict[str, tuple[float, str]] = {
    "H100": (2.5, "the stored H100 run measured lesson 8's solution at about 4.2"),
    "H200": (2.5, "as on an H100, its twin (no stored H200 run)"),
    "A100": (2.0, "no stored A100 run: a stated margin over noise"),
}
OTHER_GPU = (1.3, "no stored run for this GPU: a stated margin over noise")


@dataclass(frozen=True)
class Split:
    """A split-K launch as the goals read it: its tile, launch options, the programs it
    starts and the slices of K they share."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    programs: int
    slices: int


def resident(split: Split, held: Occupancy) -> float:
    """Programs each SM of an H200 holds at once: the launch's programs spread over the SMs,
    at most what the compiled occupancy allows."""
    return min(held.programs, split.programs / H200_SMS)


def in_flight(split: Split, h200: Compiled) -> float | None:
    """Bytes of loads in flight per SM of an H200: the shared memory of one program (its ring
    of ``num_stages`` slabs, compiled for sm_90) times the programs each SM holds at once
    (:func:`resident`); None when it does not compile."""
    held = h200.occupancy if h200.ok else None
    if held is None or h200.shared_bytes is None:
        return None
    return h200.shared_bytes * resident(split, held)


def k_steps(split: Split) -> int:
    """BLOCK_K steps each program's slice of K takes."""
    return -(-K // (split.block_k * split.slices))


def compiler_goals(split: Split, figures: Mapping[str, Compiled]) -> list[Goal]:
    """The goals the compiler and the launch's arithmetic judge: compiled for an A100 and an
    H200 without spills, ``wgmma`` on an H200, K cut into slices, a program for every SM of
    an H200 yet one wave, enough loads in flight, and slices of K deep enough to pipeline."""
    goals = []
    per_thread = split.block_m * split.block_n // (32 * split.num_warps)
    more_warps = "num_warps (more warps share the accumulator) or a smaller tile"
    for gpu, unit in (("sm_80", None), ("sm_90", "wgmma")):
        goals += faster.per_gpu_goals(gpu, figures[gpu], unit, per_thread, more_warps)
    h200 = figures["sm_90"]
    count = split.programs
    sliced = split.slices >= 2
    goals.append(Goal(
        "K cut into slices: more than one program per tile (split-K)",
        sliced,
        f"{count // split.slices} tiles x {split.slices} K-slices",
        "" if sliced else "SPLIT_K (a grid of tiles x slices, each slice its own program)",
    ))  # fmt: skip
    filled = count >= H200_SMS
    goals.append(Goal(
        f"a program for each of an H200's {H200_SMS} SMs",
        filled,
        f"{count // split.slices} tiles x {split.slices} K-slices = {count} programs",
        "" if filled else "SPLIT_K (more slices of K, each its own program)",
    ))  # fmt: skip
    held = h200.occupancy if h200.ok else None
    if held is not None and held.programs:  # one wave: every program runs at once
        slots = held.programs * H200_SMS
        one_wave = count <= slots
        goals.append(Goal(
            "one wave: no more programs than an H200 runs at once (132 SMs x the programs per "
            "SM its compiled figures allow)",
            one_wave,
            f"{count} programs for {slots} places: {held.summary()}",
            "" if one_wave else "SPLIT_K (fewer slices), or registers and shared memory "
            "(num_stages, the tile) so that more programs fit on an SM",
        ))  # fmt: skip
    loads = in_flight(split, h200)
    if loads is not None and held is not None:
        fed = loads >= MIN_IN_FLIGHT
        goals.append(Goal(
            f"at least {MIN_IN_FLIGHT // 1024} KB of loads in flight per SM on sm_90 (shared "
            "memory per program x programs per SM): a thin, deep product waits on memory",
            fed,
            f"{h200.shared_bytes / 1024:.0f} KB per program x {resident(split, held):.2f} "
            f"programs per SM = {loads / 1024:.0f} KB",
            "" if fed else "num_stages or BLOCK_K (a deeper ring of slabs per program)",
        ))  # fmt: skip
    steps = k_steps(split)
    deep = steps >= MIN_K_STEPS
    goals.append(Goal(
        f"at least {MIN_K_STEPS} BLOCK_K steps per slice (the pipeline needs a run to fill)",
        deep,
        f"{steps} steps of {split.block_k} per slice of about {-(-K // split.slices)}",
        "" if deep else "SPLIT_K (fewer, deeper slices)",
    ))  # fmt: skip
    return goals


def launch_goals(launched: Sequence[Launched]) -> list[Goal]:
    """The goals of a learner's split-K on the float16 problem, from the launches their
    function made there (noted, not run; each compiled for an A100 and an H200): the launch
    with ``tl.dot`` is judged by :func:`compiler_goals`, its tile read from its ``BLOCK_M``,
    ``BLOCK_N`` and ``BLOCK_K`` and its slices from its grid; every other kernel of theirs
    must compile for both (:func:`tmm_course.perf.faster.read_launches`)."""
    dot, goals = faster.read_launches(launched, TARGETS)
    return goals if dot is None else goals + compiler_goals(split_of(dot), dot.compiled)


def split_of(dot: Launched) -> Split:
    """The :class:`Split` of a launch on the problem that has its tile constexprs
    (:func:`tmm_course.perf.faster.read_launches`): its slices from its grid."""
    knobs = faster.knobs_of(dot)
    bm, bn, bk = knobs.block_m, knobs.block_n, knobs.block_k
    tiles = -(-M // bm) * -(-N // bn)
    return Split(bm, bn, bk, dot.num_warps, dot.num_stages, dot.programs,
                 max(1, dot.programs // tiles))  # fmt: skip


# the knobs the stored sweep races: 64x64 tiles on 4 warps at every depth of ring and
# slicing, and the wider tiles lessons 6 and 7 use
KNOB_SETS = tuple(
    [{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": bk, "SPLIT_K": split, "num_warps": 4,
      "num_stages": stages}
     for bk in (32, 64, 128) for stages in (2, 3, 4, 5) for split in (1, 2, 4, 8, 16)
     if not (bk == 128 and stages == 5)]
    + [{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": bk, "SPLIT_K": split, "num_warps": 8,
        "num_stages": stages}
       for bk in (32, 64) for stages in (3, 4) for split in (1, 2, 4, 8)]
    + [{"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 64, "SPLIT_K": split, "num_warps": 4,
        "num_stages": stages}
       for bm, bn in ((128, 64), (64, 128)) for stages in (3, 4) for split in (2, 4, 8)]
)  # fmt: skip


def knobs_label(knobs: Mapping[str, int]) -> str:
    """``64x64x128 w4 s5 split-K 2``: a launch's knobs, as the sweep's figure names them."""
    k = knobs
    return (f"{k['BLOCK_M']}x{k['BLOCK_N']}x{k['BLOCK_K']} w{k['num_warps']} "
            f"s{k['num_stages']} split-K {k['SPLIT_K']}")  # fmt: skip


def race(fn: Callable[..., object], rounds: int = 5, **knobs: object) -> dict[str, float]:
    """Median milliseconds per call (:data:`TIMED`: the GPU's alone) of a learner's ``fn(a, b,
    c, **knobs)``, lesson 4's ``matmul()`` and ``torch.matmul`` on the float16 problem,
    interleaved, on this GPU (:func:`tmm_course.perf.faster.race`)."""
    return faster.race(faster.filled(fn, **knobs), rounds=rounds, shape=(M, N, K), timed=TIMED)


def sweep(fn: Callable[..., object], knob_sets: Sequence[Mapping[str, int]] = KNOB_SETS,
          rounds: int = 3) -> dict[str, object]:  # fmt: skip
    """``fn(a, b, c, **knobs)`` at every one of ``knob_sets`` on the float16 problem
    (:func:`tmm_course.perf.faster.sweep`)."""
    return faster.sweep(fn, knob_sets, (M, N, K), rounds, timed=TIMED)


def factor_for(gpu_name: str) -> tuple[float, str]:
    """The factor over lesson 4's kernel a GPU named ``gpu_name`` asks for, and its source."""
    return faster.factor_for(gpu_name, CLOCK_FACTORS, OTHER_GPU)


def clock_goal(ms: Mapping[str, float], gpu_name: str, knob: str = "") -> Goal:
    """Whether ``ms`` (from :func:`race`) shows the learner's launch ahead of lesson 4's by
    this GPU's factor (:data:`CLOCK_FACTORS`); ``knob``: what the compiler's goals point at,
    named on a miss."""
    return faster.clock_goal(
        ms, gpu_name, knob, CLOCK_FACTORS, OTHER_GPU, "SPLIT_K and the tile", TIMED
    )
