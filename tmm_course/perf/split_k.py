"""Lesson 8's exercise: fill the machine on a deep product with few tiles.

A float16 ``512 x 512 x 16384`` product has 64 tiles of lesson 4's 64x64 and 16 of 128x128: an
H200 has 132 SMs, so most of them would wait. The learner launches the capstone's grouped
kernel (:func:`tmm_course.capstone.launches.launch_grouped`) with a configuration of their own:
tile, warps, stages, and ``SPLIT_K``, K cut into slices, one program per (tile, slice), the
last to finish a tile adding the float32 partials. On any machine the compiler judges it
(:func:`compiler_goals`: compiled for an A100 and an H200, no spills, ``wgmma``, every SM of an
H200 given a program, all of them in one wave by the compiler's occupancy, slices of whole
steps, deep enough to pipeline); on a GPU the clock judges it too
(:func:`race`, :func:`clock_goal`) against lesson 4's kernel on the same product."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import torch

from tmm_course.capstone.config import Config
from tmm_course.capstone.launches import K_STEPS_A_SLICE
from tmm_course.compile_ahead import Compiled, Launched, Occupancy, compile_for, specialize
from tmm_course.gpu import KNOWN
from tmm_course.perf import faster
from tmm_course.perf.faster import Goal, knob_values
from tmm_course.perf.knobs import BASELINE

M, N, K = 512, 512, 16384  # float16: the problem the goals are stated for
KNOB_NAMES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "SPLIT_K")
H200_SMS = KNOWN["H200"].sms
TARGETS = ("sm_80", "sm_90")  # an A100 and an H200
MIN_K_STEPS = K_STEPS_A_SLICE  # per slice: the capstone's own rule for its tail's slices
# loads in flight per SM (the ring of slabs every resident program holds, shared among the
# SMs) a thin, deep product needs before it stops waiting on memory: where the stored sweep
# (exercises_run.json, "split_k_sweep", on an H100: 132 SMs like an H200's) splits its
# launches, 11 of the 15 below it under 3 times lesson 4's speed, 35 of the 37 above it over
MIN_IN_FLIGHT = 64 * 1024
LESSON_4 = {"BLOCK_M": BASELINE.block_m, "BLOCK_N": BASELINE.block_n,
            "BLOCK_K": BASELINE.block_k, "num_warps": BASELINE.num_warps,
            "num_stages": BASELINE.num_stages, "SPLIT_K": 1}  # fmt: skip
# the factor over lesson 4's kernel a launch must reach on each GPU, and where it comes from
CLOCK_FACTORS: dict[str, tuple[float, str]] = {
    "H100": (3.0, "the stored H100 run measured lesson 8's solution at about 4.6"),
    "H200": (3.0, "as on an H100, its twin (no stored H200 run)"),
    "A100": (2.0, "no stored A100 run: a stated margin over noise"),
}
OTHER_GPU = (1.3, "no stored run for this GPU: a stated margin over noise")


def config_of(launch: Mapping[str, object]) -> Config:
    """The capstone :class:`Config` of a learner's ``{"BLOCK_M": ..., "SPLIT_K": ...}``; a
    clear error for a key or value that is not one."""
    values = knob_values(launch, LESSON_4, KNOB_NAMES)
    if values["SPLIT_K"] * values["BLOCK_K"] > K:
        raise ValueError(f"SPLIT_K={values['SPLIT_K']}: more slices than K={K} has BLOCK_K steps")
    return Config(values["BLOCK_M"], values["BLOCK_N"], values["BLOCK_K"], values["num_warps"],
                  values["num_stages"], split_k=values["SPLIT_K"])  # fmt: skip


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

    @classmethod
    def of_config(cls, config: Config) -> Split:
        """The capstone grouped kernel's launch with ``config``: one program per (tile,
        K-slice)."""
        tiles = -(-M // config.block_m) * -(-N // config.block_n)
        return cls(config.block_m, config.block_n, config.block_k, config.num_warps,
                   config.num_stages, tiles * config.split_k, config.split_k)  # fmt: skip


def programs(config: Config) -> int:
    """Programs one launch of the grouped kernel starts: one per (tile, K-slice)."""
    return Split.of_config(config).programs


def resident(split: Split, held: Occupancy) -> float:
    """Programs each SM of an H200 holds at once: the launch's programs spread over the SMs,
    at most what the compiled occupancy allows."""
    return min(held.programs, split.programs / H200_SMS)


def in_flight(split: Split | Config, h200: Compiled) -> float | None:
    """Bytes of loads in flight per SM of an H200: the shared memory of one program (its ring
    of ``num_stages`` slabs, compiled for sm_90) times the programs each SM holds at once
    (:func:`resident`); None when it does not compile."""
    split = Split.of_config(split) if isinstance(split, Config) else split
    held = h200.occupancy if h200.ok else None
    if held is None or h200.shared_bytes is None:
        return None
    return h200.shared_bytes * resident(split, held)


def k_steps(split: Split) -> int:
    """BLOCK_K steps each program's slice of K takes."""
    return -(-K // (split.block_k * split.slices))


@cache
def compiled(config: Config) -> dict[str, Compiled]:
    """The capstone's grouped kernel as :func:`launch_grouped` launches it with ``config`` on
    the float16 problem, compiled for an A100 and an H200."""
    from tmm_course.capstone import kernels, launches

    a = torch.empty(M, K, dtype=torch.float16)
    b = torch.empty(K, N, dtype=torch.float16)
    out = torch.empty(M, N, dtype=torch.float16)
    arguments, _, constexprs, _, _ = launches.grouped_setup(a, b, out, config, "ieee")
    given = {k: v for k, v in constexprs.items() if k not in ("num_warps", "num_stages")}
    kernel = kernels.grouped_matmul_kernel
    launch = specialize(kernel, arguments(a, b, out), given)
    return {gpu: compile_for(kernel, launch, gpu, config.num_warps, config.num_stages)
            for gpu in TARGETS}  # fmt: skip


def compiler_goals(split: Split | Config, figures: Mapping[str, Compiled]) -> list[Goal]:
    """The goals the compiler and the launch's arithmetic judge: compiled for an A100 and an
    H200 without spills, ``wgmma`` on an H200, a program for every SM of an H200 yet one wave,
    enough loads in flight, and slices of K deep enough to pipeline."""
    split = Split.of_config(split) if isinstance(split, Config) else split
    goals = []
    per_thread = split.block_m * split.block_n // (32 * split.num_warps)
    more_warps = "num_warps (more warps share the accumulator) or a smaller tile"
    for gpu, unit in (("sm_80", None), ("sm_90", "wgmma")):
        goals += faster.per_gpu_goals(gpu, figures[gpu], unit, per_thread, more_warps)
    h200 = figures["sm_90"]
    count = split.programs
    filled = count >= H200_SMS
    goals.append(Goal(
        f"a program for each of an H200's {H200_SMS} SMs",
        filled,
        f"{count // split.slices} tiles x {split.slices} K-slices = {count} programs",
        "" if filled else "SPLIT_K (more slices of K, each its own program) or a smaller tile",
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


TILE_NAMES = ("BLOCK_M", "BLOCK_N", "BLOCK_K")


def launch_goals(launched: Sequence[Launched]) -> list[Goal]:
    """The goals of a learner's split-K on the float16 problem, from the launches their
    function made there (noted, not run; each compiled for an A100 and an H200): the launch
    with ``tl.dot`` is judged by :func:`compiler_goals`, its tile read from its
    ``BLOCK_M``, ``BLOCK_N`` and ``BLOCK_K`` and its slices from its grid; every other
    kernel of theirs must compile for both."""
    dots = [x for x in launched
            if any(c.matrix_unit in ("mma", "wgmma") for c in x.compiled.values())]  # fmt: skip
    if not dots:
        seen = ", ".join(x.kernel for x in launched) or "no kernel written in the notebook"
        return [Goal("a kernel of yours multiplies tiles with tl.dot", False,
                     f"launched: {seen}", "the kernel (its K loop must call tl.dot)")]  # fmt: skip
    dot = max(dots, key=lambda x: x.programs)
    goals = []
    others = [x for x in launched if x is not dot]
    if others:
        refused = [f"{x.kernel} ({c.gpu}: {c.error})" for x in others
                   for c in x.compiled.values() if not c.ok]  # fmt: skip
        goals.append(Goal(f"your other kernels compile for {' and '.join(TARGETS)}",
                          not refused, "; ".join(refused)[:300] or
                          ", ".join(sorted({x.kernel for x in others})) + ": they do",
                          "the kernel the compiler refused" if refused else ""))  # fmt: skip
    missing = [name for name in TILE_NAMES if name not in dot.constants]
    if missing:
        return [*goals, Goal(
            f"{dot.kernel} takes its tile as tl.constexpr BLOCK_M, BLOCK_N and BLOCK_K",
            False, f"no {', '.join(missing)} among its constexprs",
            "the kernel's signature (name its tile sizes as the skeleton does)")]  # fmt: skip
    bm, bn, bk = (dot.constants[name] for name in TILE_NAMES)
    tiles = -(-M // bm) * -(-N // bn)
    split = Split(bm, bn, bk, dot.num_warps, dot.num_stages, dot.programs,
                  max(1, dot.programs // tiles))  # fmt: skip
    return goals + compiler_goals(split, dot.compiled)


def launcher(config: Config) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``(a, b) -> a @ b`` through the grouped kernel with ``config``, launched the way
    ``matmul_fast`` relaunches a call signature it has seen (checked and set up once, then
    straight to the kernel), so that the clock times the launch and not its first setup."""
    from tmm_course.capstone.launches import prepare_grouped

    ready: dict[tuple, Callable] = {}

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        key = (a.data_ptr(), b.data_ptr())
        if key not in ready:
            out = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
            ready[key] = prepare_grouped(a, b, out, config, "ieee")
        return ready[key](a, b, None)

    return run


def race(config: Config, rounds: int = 5) -> dict[str, float]:
    """Median milliseconds per call (host time included) of the grouped kernel with
    ``config`` (:func:`launcher`), lesson 4's ``matmul()`` and ``torch.matmul`` on the float16
    problem, interleaved, on this GPU (:func:`tmm_course.perf.faster.race`)."""
    return faster.race(launcher(config), rounds=rounds, shape=(M, N, K))


def launch_of(config: Config) -> dict[str, int]:
    """The learner's dict of knobs for ``config``."""
    c = config
    return {"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k,
            "num_warps": c.num_warps, "num_stages": c.num_stages, "SPLIT_K": c.split_k}  # fmt: skip


# the launches the stored sweep races: 64x64 tiles on 4 warps at every depth of ring and
# slicing, and the wider tiles lessons 6 and 7 use
SWEEP = tuple(
    [Config(64, 64, bk, 4, stages, split_k=split)
     for bk in (32, 64, 128) for stages in (2, 3, 4, 5) for split in (2, 4, 8)]
    + [Config(bm, bn, bk, 4, stages, split_k=split)
       for bm, bn in ((128, 64), (64, 128)) for bk in (64,) for stages in (3, 4)
       for split in (4, 8)]
    + [Config(128, 128, bk, 8, stages, split_k=split)
       for bk in (32, 64) for stages in (3, 4) for split in (8, 16)]
)  # fmt: skip


def sweep(configs: tuple[Config, ...] = SWEEP, rounds: int = 5) -> dict[str, object]:
    """Every launch of ``configs`` raced with lesson 4's kernel and ``torch.matmul``,
    interleaved, on this GPU: for each, its knobs, median milliseconds per call (host time
    included), its loads in flight per SM and whether it meets every compiler goal."""
    from tmm_course.timing import interleaved

    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16, generator=generator)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16, generator=generator)
    lesson_4 = BASELINE.launcher()
    runs = {"lesson 4": lambda: lesson_4(a, b), "torch.matmul": lambda: torch.matmul(a, b)}
    for i, config in enumerate(configs):
        runs[str(i)] = functools.partial(launcher(config), a, b)
    ms = interleaved(runs, rounds=rounds)
    launches = []
    for i, config in enumerate(configs):
        figures = compiled(config)
        goals = compiler_goals(config, figures)
        launches.append({"launch": launch_of(config), "ms": ms[str(i)],
                         "in_flight": in_flight(config, figures["sm_90"]),
                         "compiler_goals_met": all(g.met for g in goals)})  # fmt: skip
    return {"problem": f"{M}x{N}x{K} float16", "lesson 4": ms["lesson 4"],
            "torch.matmul": ms["torch.matmul"], "launches": launches}  # fmt: skip


def factor_for(gpu_name: str) -> tuple[float, str]:
    """The factor over lesson 4's kernel a GPU named ``gpu_name`` asks for, and its source."""
    return faster.factor_for(gpu_name, CLOCK_FACTORS, OTHER_GPU)


def clock_goal(ms: Mapping[str, float], gpu_name: str, knob: str = "") -> Goal:
    """Whether ``ms`` (from :func:`race`) shows the learner's launch ahead of lesson 4's by
    this GPU's factor (:data:`CLOCK_FACTORS`); ``knob``: what the compiler's goals point at,
    named on a miss."""
    return faster.clock_goal(ms, gpu_name, knob, CLOCK_FACTORS, OTHER_GPU, "SPLIT_K and the tile")
