"""Lesson 6's exercise: make lesson 4's kernel faster, and prove it twice.

The learner writes ``fast_matmul(a, b, c)``: a tiled matmul kernel of their own and its launch
(tile, warps, stages). On any machine the compiler judges it: the launches their function makes
on a float16 ``SIZE^3`` product are noted, not run, each compiled ahead for the five GPUs the
course names (:mod:`tmm_course.compile_ahead`), and :func:`launch_goals` reads the goals of
:func:`compiler_goals` off what the compiler made of the launch that calls ``tl.dot``. On a GPU
the clock judges it too: :func:`race` runs the learner's launcher, lesson 4's and
``torch.matmul`` interleaved, and :func:`clock_goal` asks for a stated factor over lesson 4's
kernel on that GPU."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from tmm_course import gpus
from tmm_course.compile_ahead import Compiled, Launched
from tmm_course.perf.intensity import tile_intensity
from tmm_course.perf.knobs import BASELINE, Knobs
from tmm_course.timing import TIMINGS

SIZE = 4096  # float16 SIZE^3: the problem the goals are stated for
TARGETS = tuple(gpus.TARGETS)  # the five GPUs the course names: its goals read each
# the GPUs whose goal is only that a program fits their shared memory (a T4, a B200, an RTX 50;
# an A100's and an H200's goals are per_gpu_goals)
FIT_ONLY = ("sm_75", "sm_100", "sm_120")
TILE_NAMES = ("BLOCK_M", "BLOCK_N", "BLOCK_K")  # the constexprs a launch's tile is read from
# the tile class of the stored sweep's fastest launch (128x256x64 on 8 warps: 0.890 of
# torch.matmul on the H100, lesson 6's section 3): what a float16 tile must reach per byte
WIDEST = (128, 256)
# the slabs (a BLOCK_M x BLOCK_K slab of A and a BLOCK_K x BLOCK_N slab of B) each program's
# ring holds on sm_90: its shared memory over one slab's bytes (num_stages there), all but one
# loading while tl.dot works on the last. In the stored sweep of lesson 6's solution
# (exercises_run.json, "faster_sweep", an H100, host time included), the 128x256 launches with
# 4 slabs reached 0.89 to 0.90 of torch.matmul, the sweep's fastest among them; with 3, 0.72 to
# 0.88; with 2, at most 0.54; deeper rings than 4 fell back to 0.80 to 0.83. The count, not the
# bytes: 96 KB of 32-deep slabs was as fast as 192 KB of 64-deep ones
MIN_SLABS = 4
Product = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

# the factor over lesson 4's kernel a launch must reach on each GPU, with where it comes from:
# an H100's below what the stored run (tmm_course/perf/data/exercises_run.json) measured of
# lesson 6's solution at 2.36 and of lesson 7's solution at 2.02; the others stated without a
# stored run of their own
CLOCK_FACTORS: dict[str, tuple[float, str]] = {
    "H100": (1.3, "the stored H100 run measured lesson 6's solution at 2.36"),
    "H200": (1.3, "as on an H100, its twin (no stored H200 run)"),
    "A100": (1.15, "no stored A100 run: a stated margin over noise"),
    "T4": (1.05, "no stored T4 run: a stated margin over noise"),
}
OTHER_GPU = (1.1, "no stored run for this GPU: a stated margin over noise")


@dataclass(frozen=True)
class Goal:
    """One goal: what it asks, whether it is met, what was seen, and the knob to turn."""

    asks: str
    met: bool
    seen: str
    knob: str = ""  # the knob a miss points at (empty when met)


def per_gpu_goals(
    gpu: str, c: Compiled, unit: str | None, per_thread: int, more_warps: str
) -> list[Goal]:
    """The goals one GPU's compiled figures judge in both knob exercises: it compiles, nothing
    spills (``per_thread``: the accumulator values each thread holds; ``more_warps``: the knob
    a spill names) and, given a ``unit``, ``tl.dot`` runs on it."""
    if not c.ok:
        return [Goal(f"compiles for {gpu}", False, f"refused: {c.error}",
                     "BLOCK_K or num_stages (shared memory)")]  # fmt: skip
    spilled = c.spilled_bytes or 0
    goals = [Goal(
        f"no spills on {gpu}",
        spilled == 0,
        f"{c.registers} registers per thread, {spilled} bytes spilled "
        f"({per_thread} accumulator values per thread)",
        "" if spilled == 0 else more_warps,
    )]  # fmt: skip
    if unit is not None:
        goals.append(Goal(
            f"tl.dot on {unit} on {gpu}",
            c.matrix_unit == unit,
            f"tl.dot on {c.matrix_unit}",
            "" if c.matrix_unit == unit else "num_warps (wgmma wants a multiple of 4) and BLOCK_M",
        ))  # fmt: skip
    return goals


def slab_bytes(block_m: int, block_n: int, block_k: int) -> int:
    """One float16 slab of the ring: a BLOCK_M x BLOCK_K slab of A and a BLOCK_K x BLOCK_N slab
    of B."""
    return (block_m + block_n) * block_k * 2


def ring_slabs(ring: int, block_m: int, block_n: int, block_k: int, num_stages: int) -> int:
    """The slabs a program's ring holds on sm_90: its shared memory (``ring`` bytes) over one
    slab's bytes, at most ``num_stages`` (a descriptor kernel's store of ``C`` passes through
    shared memory too: with one stage, that buffer can read as a second slab)."""
    return min(ring // slab_bytes(block_m, block_n, block_k), num_stages)


def ring_words(shared: int, block_m: int, block_n: int, block_k: int, num_stages: int) -> str:
    """The ring a program holds on sm_90, apart from the kernel's whole shared memory
    (``shared`` bytes, the compiler's figure): '4 slabs of 48 KB: a 192 KB ring, of 208 KB
    of shared memory'."""
    slab = slab_bytes(block_m, block_n, block_k)
    slabs = ring_slabs(shared, block_m, block_n, block_k, num_stages)
    return (
        f"{slabs} slab{'' if slabs == 1 else 's'} of {slab / 1024:.0f} KB: a "
        f"{slabs * slab / 1024:.0f} KB ring, of {shared / 1024:.0f} KB of shared memory"
    )


REUSE_WHY = "the reuse of the stored sweep's fastest tile"  # lesson 6's reuse goal, its reason


def reuse_wanted(tile: tuple[int, int], why: str) -> str:
    """A reuse goal in its words: at least the FLOPs per float16 byte loaded of ``tile``."""
    return f"at least {tile_intensity(*tile, element_bytes=2):.0f} FLOP per byte loaded ({why})"


def reuse_goal(knobs: Knobs, tile: tuple[int, int], why: str) -> Goal:
    """At least the FLOPs per float16 byte loaded of a ``tile`` (``why``: where it comes
    from, in the goal's words)."""
    least = tile_intensity(*tile, element_bytes=2)
    intensity = tile_intensity(knobs.block_m, knobs.block_n, element_bytes=2)
    return Goal(
        reuse_wanted(tile, why),
        intensity >= least,
        f"a {knobs.block_m}x{knobs.block_n} tile does {intensity:.1f}",
        "" if intensity >= least else "BLOCK_M and BLOCK_N (a wider tile)",
    )


def tiles_goal(dot: Launched, knobs: Knobs, m: int = SIZE, n: int = SIZE) -> Goal:
    """No more programs than ``C``'s tiles: a program more computes a tile another already
    does (a grid with a redundant axis, say), time a clock would count and a compiler never
    sees. Fewer is a persistent grid's way, each program looping over tiles."""
    tiles = -(-m // knobs.block_m) * -(-n // knobs.block_n)
    fits = dot.programs <= tiles
    return Goal(
        f"no more programs than tiles of C ({m}x{n} in {knobs.block_m}x{knobs.block_n} tiles)",
        fits,
        f"{dot.programs} programs (grid {' x '.join(map(str, dot.grid))}) for {tiles} tiles",
        "" if fits else "the grid (one program per tile: each extra one redoes a tile's work)",
    )


def ring_goal(knobs: Knobs, h200: Compiled, least: int, knob: str) -> Goal:
    """At least ``least`` slabs in the ring each program holds on sm_90 (:func:`ring_slabs`)."""
    k = knobs
    shared = h200.shared_bytes or 0
    deep = ring_slabs(shared, k.block_m, k.block_n, k.block_k, k.num_stages) >= least
    return Goal(
        f"a ring of at least {least} slabs per program on sm_90 ({least - 1} loading while "
        "tl.dot works on one)",
        deep,
        f"num_stages={k.num_stages} ({k.block_m}x{k.block_k} slabs of A, {k.block_k}x"
        f"{k.block_n} of B): {ring_words(shared, k.block_m, k.block_n, k.block_k, k.num_stages)}",
        "" if deep else knob,
    )


def shared_goal(figures: Mapping[str, Compiled], targets: Sequence[str] = FIT_ONLY) -> Goal:
    """A program fits the shared memory of each GPU of ``targets`` (compiled: ``figures``,
    refused over a GPU's limit as its launcher would refuse it)."""
    limits = [f"{gpus.label(t)} {gpus.for_target(t).shared_per_block // 1024} KB"
              for t in targets]  # fmt: skip
    seen = [f"{(c.shared_bytes or 0) / 1024:.0f} KB on {t}" if c.ok else f"{t} refused: {c.error}"
            for t, c in ((t, figures[t]) for t in targets)]  # fmt: skip
    met = all(figures[t].ok for t in targets)
    return Goal(
        f"fits each GPU's shared memory per program: {', '.join(limits)} ({', '.join(targets)})",
        met,
        "; ".join(seen),
        "" if met else "num_stages or BLOCK_K",
    )


def compiler_goals(knobs: Knobs, figures: Mapping[str, Compiled]) -> list[Goal]:
    """The goals the compiler judges: reuse (the sweep's fastest tile class), a ring deep
    enough on an H200, no spills, the tensor cores (the occupancy that follows said beside the
    H200's) and fitting a T4, a B200 and an RTX 50 (:func:`shared_goal`)."""
    # the tile left unnamed: which tiles reach it is the learner's to work out
    goals = [reuse_goal(knobs, WIDEST, REUSE_WHY)]
    h200 = figures["sm_90"]
    if h200.ok:  # before the spills: a one-slab ring spills on sm_80 (at 128x256x64 on 8 warps,
        # 8 bytes; 0 from 2 stages on), and the shallow ring is the cause to name first
        goals.append(ring_goal(knobs, h200, MIN_SLABS, "num_stages (a deeper ring; BLOCK_K "
                               "smaller if it then no longer fits an A100 or an RTX 50, where "
                               "this pointer kernel's ring holds num_stages - 1: ask the "
                               "compiler, tmm_course.compile_ahead.compile_for)"))  # fmt: skip
    per_thread = knobs.block_m * knobs.block_n // (32 * knobs.num_warps)
    for gpu, unit in (("sm_80", "mma"), ("sm_90", "wgmma")):
        goals += per_gpu_goals(
            gpu, figures[gpu], unit, per_thread, "num_warps (more warps share the accumulator)"
        )
    if h200.ok and h200.occupancy is not None:  # what the registers and the ring allow
        goals[-1] = replace(goals[-1], seen=f"{goals[-1].seen}; {h200.occupancy.summary()}")
    return [*goals, shared_goal(figures)]


def dot_launch(launched: Sequence[Launched]) -> Launched | None:
    """The launch that multiplies tiles (``tl.dot`` on tensor cores, the one with most
    programs if several), or None."""
    dots = [x for x in launched
            if any(c.matrix_unit in ("mma", "wgmma", "tcgen05")
                   for c in x.compiled.values())]  # fmt: skip
    return max(dots, key=lambda x: x.programs) if dots else None


def read_launches(
    launched: Sequence[Launched], targets: Sequence[str]
) -> tuple[Launched | None, list[Goal]]:
    """The launch with ``tl.dot`` a learner's function made at scale (:func:`dot_launch`),
    with the goals every launch answers first: a kernel calls ``tl.dot``, every other kernel
    of theirs compiles for ``targets``, and the dot kernel takes its tile as ``BLOCK_M``,
    ``BLOCK_N`` and ``BLOCK_K`` (None for the launch when a missed one leaves nothing to
    read)."""
    dot = dot_launch(launched)
    if dot is None:
        seen = ", ".join(x.kernel for x in launched) or "no kernel written in the notebook"
        missed = Goal("a kernel of yours multiplies tiles with tl.dot", False,
                      f"launched: {seen}", "the kernel (its K loop must call tl.dot)")  # fmt: skip
        return None, [missed]
    goals = []
    others = [x for x in launched if x is not dot]
    if others:
        refused = [f"{x.kernel} ({c.gpu}: {c.error})" for x in others
                   for c in x.compiled.values() if not c.ok]  # fmt: skip
        goals.append(Goal(f"your other kernels compile for {' and '.join(targets)}",
                          not refused, "; ".join(refused)[:300] or
                          ", ".join(sorted({x.kernel for x in others})) + ": they do",
                          "the kernel the compiler refused" if refused else ""))  # fmt: skip
    missing = [name for name in TILE_NAMES if name not in dot.constants]
    if missing:
        return None, [*goals, Goal(
            f"{dot.kernel} takes its tile as tl.constexpr BLOCK_M, BLOCK_N and BLOCK_K",
            False, f"no {', '.join(missing)} among its constexprs",
            "the kernel's signature (name its tile sizes as the skeleton does)")]  # fmt: skip
    return dot, goals


def knobs_of(dot: Launched) -> Knobs:
    """The knobs of a launch that has its tile constexprs (:func:`read_launches`)."""
    bm, bn, bk = (dot.constants[name] for name in TILE_NAMES)
    return Knobs(bm, bn, bk, dot.num_warps, dot.num_stages, dot.constants.get("GROUP_M"))


# lesson 7's descriptor kernel at float16 SIZE^3 (a @ w.T), compiled for an H200 alone (a T4
# and an A100 unpack descriptors into pointers): no spills, wgmma, and at least a 128x128
# tile's reuse. In the stored tile sweep (lessons_h100.json, "tiles"), the launches below it
# reached at most 1.17 times lesson 4's speed (128x64x32 on 4 warps), under the 1.3 an H100's
# clock asks; every one at or above it, but 128x256 on 4 warps (it spills), 1.6 times or more
DESCRIPTOR_TARGETS = ("sm_90",)
DESCRIPTOR_TILE = (128, 128)
# and a ring of at least 3 slabs: in the stored sweep of lesson 7's solution by depth of ring
# (exercises_run.json, "descriptor_sweep", on an H100, against lesson 4's kernel on the same
# w.T), 12 of the 13 launches with 3 or more slabs reached 1.3 times lesson 4's speed (not 8
# slabs of 32-deep 128x128 ones, one program per SM: 1.12); of those with 1 or 2, 2 of 7 did
DESCRIPTOR_SLABS = 3


def descriptor_goals(launched: Sequence[Launched]) -> list[Goal]:
    """The goals of a learner's descriptor kernel on float16 ``SIZE^3``, from the launches
    their function made there (noted, not run; compiled for an H200): the launch with
    ``tl.dot`` starts no more programs than tiles, reaches a 128x128 tile's reuse, spills
    nothing, runs ``tl.dot`` on ``wgmma`` and holds a ring of :data:`DESCRIPTOR_SLABS`."""
    dot, goals = read_launches(launched, DESCRIPTOR_TARGETS)
    if dot is None:
        return goals
    knobs = knobs_of(dot)
    per_thread = knobs.block_m * knobs.block_n // (32 * knobs.num_warps)
    why = "a 128x128 tile; below it the stored tile sweep stayed under 1.3 times lesson 4's speed"
    more_warps = "num_warps (more warps share the accumulator)"
    h200 = dot.compiled["sm_90"]
    goals = [
        *goals,
        tiles_goal(dot, knobs),
        reuse_goal(knobs, DESCRIPTOR_TILE, why),
        *per_gpu_goals("sm_90", h200, "wgmma", per_thread, more_warps),
    ]
    if h200.ok:
        goals.append(ring_goal(knobs, h200, DESCRIPTOR_SLABS, "num_stages (a deeper ring)"))
    return goals


def launch_goals(launched: Sequence[Launched]) -> list[Goal]:
    """The goals of a learner's fast matmul on float16 ``SIZE^3``, from the launches their
    function made there (noted, not run; each compiled for the five GPUs the course names): the
    launch with ``tl.dot`` is judged by :func:`tiles_goal` and :func:`compiler_goals`, its
    tile read from its ``BLOCK_M``, ``BLOCK_N`` and ``BLOCK_K``."""
    dot, goals = read_launches(launched, TARGETS)
    if dot is None:
        return goals
    knobs = knobs_of(dot)
    return [*goals, tiles_goal(dot, knobs), *compiler_goals(knobs, dot.compiled)]


Factors = Mapping[str, tuple[float, str]]


def factor_for(gpu_name: str, factors: Factors = CLOCK_FACTORS,
               other: tuple[float, str] = OTHER_GPU) -> tuple[float, str]:  # fmt: skip
    """The factor over lesson 4's kernel a GPU named ``gpu_name`` asks for, and its source."""
    for short, factor in factors.items():
        if short in gpu_name:
            return factor
    return other


def filled(fn: Callable[..., object], **knobs: object) -> Product:
    """``(a, b) -> a @ b`` through a learner's ``fn(a, b, c, **knobs)``, ``c`` made per call
    (as the course's ``matmul()`` makes its output)."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        fn(a, b, c, **knobs)
        return c

    return run


def race(
    contender: object,
    size: int = SIZE,
    rounds: int = 5,
    dtype: torch.dtype = torch.float16,
    shape: tuple[int, int, int] | None = None,
    timed: str = "with_host",
) -> dict[str, float]:
    """Median milliseconds per call of ``contender(a, b)`` (a :class:`Knobs` or a launcher
    ``(a, b) -> c``), lesson 4's ``matmul()`` and ``torch.matmul`` on float16 ``size^3`` (or
    ``shape``, M x N x K), interleaved, on this GPU, timed as ``timed`` (a name of
    :data:`tmm_course.timing.TIMINGS`; by default host time included)."""
    from tmm_course.timing import TIMERS, interleaved

    run = contender.launcher() if isinstance(contender, Knobs) else contender
    lesson_4 = BASELINE.launcher()
    m, n, k = shape or (size, size, size)
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=generator)
    b = torch.randn(k, n, device="cuda", dtype=dtype, generator=generator)
    return interleaved(
        {"yours": lambda: run(a, b), "lesson 4": lambda: lesson_4(a, b),
         "torch.matmul": lambda: torch.matmul(a, b)},
        rounds=rounds,
        timer=TIMERS[timed],
    )  # fmt: skip


# the knobs the stored sweep of lesson 6's solution races at float16 SIZE^3: the tile classes
# of its tile goal (128x256, 256x128) and the one below it (128x128), every depth of ring
# that compiles for an H200
KNOB_SETS = tuple(
    [{"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 8, "num_stages": stages}
     for bm, bn in ((128, 256), (256, 128))
     for bk, depths in ((32, (2, 3, 4, 5, 6, 7)), (64, (2, 3, 4)), (128, (2,)))
     for stages in depths]
    + [{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": bk, "num_warps": 8, "num_stages": stages}
       for bk, depths in ((32, (2, 3, 4, 5, 6)), (64, (2, 3, 4, 5, 6)), (128, (2, 3)))
       for stages in depths]
)  # fmt: skip


# lesson 7's descriptor solution at float16 SIZE^3 (a @ w.T), by depth of ring: 128x128 tiles
# (its own) and 128x256, on 8 warps, every ring from one slab up to what an H200 holds
DESCRIPTOR_KNOB_SETS = tuple(
    [{"tile": (128, 128, bk), "num_warps": 8, "num_stages": stages}
     for bk, depths in ((64, (1, 2, 3, 4, 5, 6)), (32, (1, 2, 3, 4, 6, 8)))
     for stages in depths]
    + [{"tile": (128, 256, bk), "num_warps": 8, "num_stages": stages}
       for bk, depths in ((64, (1, 2, 3, 4)), (32, (2, 3, 4, 6)))
       for stages in depths]
)  # fmt: skip


def sweep(
    fn: Callable[..., object],
    knob_sets: Sequence[Mapping[str, object]] = KNOB_SETS,
    shape: tuple[int, int, int] = (SIZE, SIZE, SIZE),
    rounds: int = 3,
    linear: bool = False,
    timed: str = "with_host",
) -> dict[str, object]:
    """``fn(a, b, c, **knobs)`` at every one of ``knob_sets``, raced with lesson 4's kernel and
    ``torch.matmul`` on float16 ``shape`` (M x N x K), interleaved, on this GPU: for each, its
    knobs and median milliseconds per call (timed as ``timed`` says, as :func:`race`). A
    launch that raises, or stores wrong values, is left out with its error. ``linear``:
    ``fn`` takes an N x K weight ``w`` for ``b`` and stores ``a @ w.T`` (lesson 7's exercise; a
    square ``shape``, so that :func:`filled` makes ``c`` as wide as ``w``); lesson 4's kernel
    and ``torch.matmul`` multiply the same ``w.T`` view."""
    import functools

    from tmm_course.timing import TIMERS, interleaved

    m, n, k = shape
    if linear and n != k:
        raise ValueError(f"a linear sweep needs N == K (w is N x K and c N wide), not {shape}")
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=generator)
    given = torch.randn(*((n, k) if linear else (k, n)), device="cuda", dtype=torch.float16,
                        generator=generator)  # fmt: skip
    b = given.T if linear else given  # what lesson 4's kernel and torch.matmul multiply
    exact = a.float() @ b.float()
    lesson_4 = BASELINE.launcher()
    runs = {"lesson 4": lambda: lesson_4(a, b), "torch.matmul": lambda: torch.matmul(a, b)}
    failed = []
    for i, knobs in enumerate(knob_sets):
        run = functools.partial(filled(fn, **knobs), a, given)
        try:
            wrong = float((run().float() - exact).abs().max() / exact.abs().max())
        except Exception as error:  # a launch the GPU refuses: noted, not raced
            failed.append(
                {"launch": dict(knobs), "error": f"{type(error).__name__}: {error}"[:300]}
            )
            continue
        if wrong > 1e-2:
            failed.append({"launch": dict(knobs), "error": f"wrong values: off by {wrong:.3g}"})
            continue
        runs[str(i)] = run
    ms = interleaved(runs, rounds=rounds, timer=TIMERS[timed])
    launches = [{"launch": dict(knobs), "ms": ms[str(i)]}
                for i, knobs in enumerate(knob_sets) if str(i) in ms]  # fmt: skip
    return {"problem": f"{m}x{n}x{k} float16", "lesson 4": ms["lesson 4"],
            "torch.matmul": ms["torch.matmul"], "launches": launches, "failed": failed}  # fmt: skip


def missed_knob(goals: list[Goal]) -> str:
    """The knob the first missed goal points at (empty when none does)."""
    return next((g.knob for g in goals if not g.met and g.knob), "")


def clock_goal(
    ms: Mapping[str, float],
    gpu_name: str,
    knob: str = "",
    factors: Factors = CLOCK_FACTORS,
    other: tuple[float, str] = OTHER_GPU,
    turn: str = "the tile, num_warps and num_stages",
    timed: str = "with_host",
) -> Goal:
    """Whether ``ms`` (from :func:`race`, timed as ``timed`` says) shows the learner's kernel
    ahead of lesson 4's by this GPU's factor (of ``factors``, else ``other``); ``knob``: what
    the compiler's goals point at, named on a miss (else ``turn``)."""
    factor, source = factor_for(gpu_name, factors, other)
    reached = ms["lesson 4"] / ms["yours"]
    met = reached >= factor
    return Goal(
        f"{factor:.2f} times as fast as lesson 4's kernel on {gpu_name} ({source})",
        met,
        f"{reached:.2f} times lesson 4's speed; {ms['torch.matmul'] / ms['yours']:.2f} of "
        f"torch.matmul's (medians of interleaved rounds, {TIMINGS[timed].short})",
        "" if met else knob or f"{turn} (see the compiler's figures)",
    )
