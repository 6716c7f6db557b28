"""The capstone's plan: the kernel and configuration for the device, shape, dtype and layout,
from the fit on the nearest problems, else by rules; shrunk to the GPU's shared memory."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

import tmm_course
from tmm_course import gpu
from tmm_course.backend import GPU
from tmm_course.capstone.candidates import candidates_for, for_float32, size_class
from tmm_course.capstone.config import Config
from tmm_course.capstone.fitted import Card, Fitted, card_for, shipped
from tmm_course.capstone.kernels import rows_on_16_bytes, tma_problem
from tmm_course.capstone.launches import program_slots, slices_of_the_tail, tile_count


@dataclass(frozen=True)
class Plan:
    """What :func:`matmul_fast` will run, and why."""

    path: str  # "persistent_tma" or "grouped"
    config: Config
    reason: str
    stage: bool = False  # persistent_tma: A, B the TMA cannot read copied; such a C by pointer
    in_place: bool = False  # grouped: lines off 16-byte boundaries read as they are, not copied

    def __str__(self) -> str:
        return f"{self.path} kernel, {self.config}: {self.reason}"


PATHS = ("persistent_tma", "grouped")

# The rules used where no fit is available (the interpreter, or a package without one); chosen
# from the H200 sweep, tmm_course/perf/data/sweep_h200.json (python -m tmm_course.perf.bench sweep)
ON_INTERPRETER = Config(32, 32, 32, group_m=4)
LARGE_TMA = Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True)
LARGE_GROUPED = Config(128, 256, 64, num_warps=8, num_stages=4)


def plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> Plan:
    """Choose a kernel and a configuration for ``a @ b`` (into ``out``) on this backend: on a
    GPU, the best candidate on the nearest fitted problems (:func:`plan_by_fit`), else rules;
    the grouped kernel reading operands in place where copying them does not pay."""
    in_place = reads_in_place(a, b)
    (m, k), n = a.shape, b.shape[1]
    if in_place and 2 * m * n * k < TINY:
        why = f"a product under 2**{TINY.bit_length() - 1} FLOPs; {IN_PLACE}"
        chosen = Plan("grouped", SMALL.for_depth(k), why, in_place=True)
    else:
        chosen = plan_by_fit(a, b, out, in_place) if tmm_course.BACKEND == GPU else None
        chosen = chosen or _plan_by_shape(a, b, out, in_place)
    here, config = gpu.current(), chosen.config
    fitted = (
        config if here is None else fit_shared_memory(chosen.path, config, a.element_size(), here)
    )
    if fitted == config:
        return chosen
    reason = f"{chosen.reason}; shrunk to fit {here.shared_memory // 1024} KB of shared memory"
    return dataclasses.replace(chosen, config=fitted, reason=reason)


# 8 bytes a barrier: one per pipeline stage of the persistent kernel, and room for 4 more (for
# sm_100, Triton 3.9 compiled 2 or 3 of the kernel's own beside the stages'). With them,
# shared_memory_bytes is at least what the compiler allocates for each plan on each tier
# (tests/test_tiers_fit.py asks tmm_course.compile_ahead)
BARRIER = 8
KERNEL_BARRIERS = 4


def shared_memory_bytes(path: str, config: Config, itemsize: int, here: gpu.Gpu | None = None
                        ) -> int:  # fmt: skip
    """Shared memory a program of ``path``'s kernel takes on ``here`` (None: a GPU with tensor
    cores and pipelined loads), at most: one slab of A and B per pipeline stage (a single one
    where loads are not pipelined), each BLOCK_M x BLOCK_K of A and BLOCK_K x BLOCK_N of B, as
    float32 where ``tl.dot`` runs on FMA units (its operands pass through shared memory so);
    the persistent kernel adds the tile of C on its way to the TMA store (half of it, subtiled)
    and its barriers. At least what Triton's compiler allocates for each plan on each tier
    (``tests/test_tiers_fit.py`` asks it): on sm_90 and sm_100 the persistent kernel's figure
    to within its barriers, elsewhere fewer slabs."""
    stages = config.num_stages if here is None or here.pipelining else 1
    operand = itemsize if here is None or here.tensor_cores else max(itemsize, 4)
    used = stages * (config.block_m + config.block_n) * config.block_k * operand
    if path == "persistent_tma":
        staged = config.block_m * config.block_n * itemsize // (2 if config.subtile else 1)
        used += staged + BARRIER * (stages + KERNEL_BARRIERS)
    return used


def fit_shared_memory(path: str, config: Config, itemsize: int, here: gpu.Gpu) -> Config:
    """``config`` shrunk (:func:`smaller`) until a program of ``path``'s kernel fits ``here``'s
    shared memory (:func:`shared_memory_bytes`); 1 stage if unpipelined."""
    if not here.pipelining:
        config = dataclasses.replace(config, num_stages=1)
    used = lambda c: shared_memory_bytes(path, c, itemsize, here)
    while used(config) > here.shared_memory and (next_config := smaller(config)) is not None:
        config = next_config
    return config


_USED: list[Fitted] | None = None  # use_fit's table (None: the shipped fit of the GPU in hand)
_SHIPPED: dict[str, list[Fitted]] = {}  # each measured card's shipped fit, read once


def fit_card() -> Card | None:
    """Whose shipped fit the plan reads on the GPU in hand (None: :func:`use_fit`'s table)."""
    return None if _USED is not None else card_for(gpu.current())


def fit_table() -> list[Fitted]:
    """The fit the plan reads: :func:`use_fit`'s, else the shipped fit of this GPU
    (:func:`fitted.card_for`: measured on it, or derived from the nearest measured card)."""
    card = fit_card()
    if card is None:
        return _USED
    if card.name not in _SHIPPED:
        _SHIPPED[card.name] = shipped(card.name)
    return _SHIPPED[card.name]


def use_fit(fitted: Sequence[Fitted] | None) -> None:
    """Plan from ``fitted`` (None: the shipped fit); ``capstone.use_fit`` calls it, then resets."""
    global _USED
    _USED = None if fitted is None else list(fitted)


OTHER_DTYPE = 0.5  # how much further away a fitted problem of another 16-bit dtype counts
NEIGHBOURS = 6  # the fitted problems nearest a new one that score each configuration
NEARNESS = 2.0  # a neighbour one unit of distance further weighs e**-NEARNESS as much
FILLED = 0.5  # how much of the waves' fill (see filled) the scores take over: its square root


def _distance(fitted: Fitted, m: int, n: int, k: int, dtype: str, layouts: tuple[bool, bool],
              aligned: bool, in_place: bool = False) -> float:  # fmt: skip
    """How far apart two problems are: the sizes' log2 distances, and half a unit each for a
    different layout of A or of B (``layouts``: whether each is column-major) and the other
    16-bit dtype (the same bytes through the same kernels); infinitely far for an element of
    another size, a problem of another size class (its candidates differ: scores over different
    neighbours would not compare), or one whose lines are on 16-byte boundaries where these are
    not, or the other way round (``aligned``: :attr:`Problem.rows_on_16_bytes`). Off them, both
    kernels copy such operands first, which their neighbours on them never timed: on an H200 the
    aligned neighbours of 333x7777x2222 float16 planned the grouped kernel reading B 2 bytes a
    load, 0.45x torch where the persistent one ran at 1.74x. Likewise one whose operands the
    grouped kernel reads in place where these are copied (``in_place``), or the other way round."""
    p = fitted.problem
    if getattr(torch, p.dtype).itemsize != getattr(torch, dtype).itemsize:
        return math.inf
    if size_class(p.m, p.n) != size_class(m, n) or p.rows_on_16_bytes != aligned:
        return math.inf
    if in_place == copies_pay(p.m, p.n, p.k, p.odd_operands):
        return math.inf
    apart = sum(abs(math.log2(max(x, 1)) - math.log2(max(y, 1))) for x, y in
                ((m, p.m), (n, p.n), (k, p.k)))  # fmt: skip
    apart += 0.5 * sum(here != (there == "col") for here, there in
                       zip(layouts, (p.a_layout, p.b_layout), strict=True))  # fmt: skip
    return apart + (OTHER_DTYPE if p.dtype != dtype else 0.0)


def filled(path: str, config: Config, m: int, n: int, k: int, slots: int | None = None
            ) -> float:  # fmt: skip
    """How much of the work launched counts: the share of the tiles inside the product (rows
    and columns past its edges compute nothing), times, for the persistent kernel, how full its
    waves of tiles keep the ``slots`` SMs (a last wave of 24 tiles on 132 leaves most idle,
    unless ``split_tail`` cuts them into K-slices: a wave of slices takes a slice's share of a
    tile's time). The GPU schedules the grouped kernel's programs itself, but fewer programs
    than SMs leave the others idle."""
    slots = program_slots() if slots is None else slots
    tiles = tile_count(config, m, n)
    useful = m * n / (tiles * config.block_m * config.block_n)  # tiles past the edges
    if path != "persistent_tma":
        return useful * min(1.0, tiles * config.split_k / slots)
    splits = slices_of_the_tail(config, m, n, k, slots)
    full, tail = divmod(tiles, slots)
    waves = full + -(-tail * splits // slots) / splits
    return useful * tiles / (waves * slots)


def as_run(config: Config, m: int, n: int, k: int, slots: int) -> Config:
    """``config`` as run on m x n x k: its K-steps no deeper than K (:meth:`Config.for_depth`);
    a split tail that cuts nothing there is its whole twin."""
    config = config.for_depth(k)
    whole = config.split_tail and slices_of_the_tail(config, m, n, k, slots) == 1
    return dataclasses.replace(config, split_tail=False) if whole else config


def measured_as_run(fitted: Fitted, slots: int) -> dict[tuple[str, Config], float]:
    """``fitted.measured()``, where two candidates ran as one kernel (:func:`as_run`: a split
    tail that cut nothing, K-steps cut to K): each credited with the geometric mean of both (not
    the luckier of the two)."""
    p, ratios, alike = fitted.problem, fitted.measured(), {}
    runs = {key: (key[0], as_run(key[1], p.m, p.n, p.k, slots)) for key in ratios}
    for key, ratio in ratios.items():
        alike.setdefault(runs[key], []).append(ratio)
    return {key: statistics.geometric_mean(alike[runs[key]]) for key in ratios}


def _scores(table: list, apart: dict[int, float], candidates: list[tuple[str, Config]],
            m: int, n: int, k: int) -> dict[tuple[str, Config], tuple[float, object]]:  # fmt: skip
    """Each candidate's expected log-ratio to torch, and the nearest of ``table`` that timed it;
    a split tail that would cut nothing here only where its whole twin is no candidate."""
    slots = program_slots()
    twin = {(path, c): (path, as_run(c, m, n, k, slots)) for path, c in candidates}
    near: dict = {key: [] for key, run in twin.items() if run == key or run not in twin}
    for fitted in table:
        for key, ratio in measured_as_run(fitted, slots).items():
            if key in near and len(near[key]) < NEIGHBOURS:
                near[key].append((fitted, ratio))
    scores = {}
    for (path, config), timed in near.items():
        if not timed:
            continue
        here = filled(path, config, m, n, k, slots)
        there = [filled(path, config, f.problem.m, f.problem.n, f.problem.k, slots)
                 for f, _ in timed]  # fmt: skip
        logs = [math.log(r * (here / t) ** FILLED) for (_, r), t in zip(timed, there, strict=True)]
        weights = [math.exp(-NEARNESS * apart[id(f)]) for f, _ in timed]
        score = sum(w * x for w, x in zip(weights, logs, strict=True)) / sum(weights)
        scores[path, config] = (score, timed[0][0])
    return scores


# where copying the lines off 16-byte boundaries costs more than it saves (copies_pay), measured
# on an H100 on 2026-12-07 (code 44537e6), in place beside copied, raced against torch.matmul:
TINY = 1 << 26  # a product of fewer FLOPs is launch-bound: a copy's launch costs more than it saves
BIG_MN = 4 << 20  # bytes of an operand contiguous along M or N, off lines, that is copied
COPY_PAYS = 128.0  # FLOPs per byte copied (read and written) from which copies pay
SMALL = Config(32, 32, 64, num_warps=4, num_stages=2, group_m=4)  # a tiny product's tiles


def odd_operands(a: torch.Tensor, b: torch.Tensor) -> list[tuple[int, bool]]:
    """(bytes, contiguous along K) of each of A and B whose lines are off 16-byte boundaries."""
    return [(t.numel() * t.element_size(), t.stride(axis) == 1)
            for t, axis in ((a, 1), (b, 0)) if not rows_on_16_bytes(t)]  # fmt: skip


def copies_pay(m: int, n: int, k: int, odd: Sequence[tuple[int, bool]]) -> bool:
    """Whether to copy the ``odd`` operands (:func:`odd_operands`) onto 128-byte lines before an
    m x n x k product, or read them in place, 2 bytes a load and never asynchronously. Not for a
    product under :data:`TINY` FLOPs: on an H100, 63x65x67 float16 took 43 us a call copied,
    9 in place (torch.matmul 10.5). Always for an operand contiguous along M or N larger than
    :data:`BIG_MN` bytes: read in place, 64x4097x4093 ran at 0.51x torch at best, copied 0.63x.
    Else where the product has :data:`COPY_PAYS` FLOPs or more per byte copied: in place, 3000x30x
    4097 (15 FLOPs a byte) ran at 0.86x torch, copied 0.55x; copied, 4096x4096x4093 (2048) at
    4.0x."""
    if not odd:
        return True
    flops = 2 * m * n * k
    if flops < TINY:
        return False
    if any(not along_k and size > BIG_MN for size, along_k in odd):
        return True
    return flops >= COPY_PAYS * sum(2 * size for size, _ in odd)


def reads_in_place(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the grouped kernel reads ``a`` and ``b`` in place on this backend: on a GPU, where
    they have lines off 16-byte boundaries and :func:`copies_pay` says no."""
    (m, k), n = a.shape, b.shape[1]
    return tmm_course.BACKEND == GPU and not copies_pay(m, n, k, odd_operands(a, b))


def plan_by_fit(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None,
                in_place: bool = False) -> Plan | None:  # fmt: skip
    """Score every candidate by its log-ratio to torch on the NEIGHBOURS nearest fitted problems
    that timed it (weighed by e**-NEARNESS per unit of :func:`_distance`), each corrected for
    the square root of how full the kernel keeps the SMs here against there (:func:`filled`:
    whole, it over-corrects); run the best that can read the tensors."""
    dtype = str(a.dtype).removeprefix("torch.")
    (m, k), n = a.shape, b.shape[1]
    layouts = tuple(t.stride(0) == 1 and t.shape[0] > 1 for t in (a, b))  # column-major?
    new_c = min(m, n) <= 1 or n * a.element_size() % 16 == 0  # a new C: rows n apart
    aligned = (
        rows_on_16_bytes(a)
        and rows_on_16_bytes(b)
        and (new_c if out is None else rows_on_16_bytes(out))
    )
    apart = {id(f): _distance(f, m, n, k, dtype, layouts, aligned, in_place) for f in fit_table()}
    table = sorted((f for f in fit_table() if apart[id(f)] < math.inf), key=lambda f: apart[id(f)])
    if not table:
        return None
    scores = _scores(table, apart, candidates_for(m, n, k, dtype), m, n, k)
    readable = tma_problem(a, b, out) is None and not in_place
    stage = not readable and not in_place and tma_problem(a, b, out, stage=True) is None
    runnable = [key for key in scores if key[0] == "grouped" or readable or stage]
    if not runnable:  # nothing fitted at this size: what won on the nearest problem
        nearest = table[0]
        if nearest.path == "persistent_tma" and (readable or stage):
            key, ratio = (nearest.path, nearest.config), nearest.ratio
        else:
            key, ratio = ("grouped", nearest.grouped), nearest.grouped_ratio
        runnable, scores[key] = [key], (math.log(ratio), nearest)
    path, config = max(runnable, key=lambda key: scores[key][0])
    score, nearest = scores[path, config]
    config = as_run(config, m, n, k, program_slots())  # grouped: as it is
    card = fit_card()
    whose = "" if card is None else f", {card}"
    why = (f"fitted on {nearest.problem.label} and nearby{whose} "
           f"({math.exp(score):.2f}x torch expected)")  # fmt: skip
    if path == "persistent_tma" and not readable:
        return Plan(path, config, why + "; rows the TMA cannot read are copied", stage=True)
    if in_place:
        return Plan(path, config, f"{why}; {IN_PLACE}", in_place=True)
    return Plan(path, config, why)


IN_PLACE = "lines off 16-byte boundaries read in place: copies would cost more than they save"


def by_rules(path: str, dtype: torch.dtype) -> Config:
    """The configuration the rules give ``path`` where no fit decides: small tiles on the
    interpreter; on a GPU, large ones (BLOCK_K halved for float32)."""
    if tmm_course.BACKEND != GPU:
        return ON_INTERPRETER
    config = LARGE_TMA if path == "persistent_tma" else LARGE_GROUPED
    return for_float32(config) if dtype == torch.float32 else config


def _plan_by_shape(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None,
                   in_place: bool = False) -> Plan:  # fmt: skip
    """The rules' plan: on a GPU, the persistent kernel wherever the TMA can read the tensors
    or copies of them, else the grouped one. Where rows are off 16-byte lines both kernels copy,
    and the persistent one ran as fast or faster on an H200 (grid_h200.json's paths: in large
    tiles 1.71x torch against 1.72x at 333x7777x2222, 3.41x against 3.01x at 2048x2048x2047;
    float32 1999x1501x1003 0.66x grouped, 1.3x to 1.9x in every persistent candidate fitted)."""
    if tmm_course.BACKEND != GPU:
        return Plan(
            "grouped", by_rules("grouped", a.dtype), "the interpreter: small tiles run fastest"
        )
    if in_place:
        return Plan("grouped", by_rules("grouped", a.dtype), f"no fit; {IN_PLACE}", in_place=True)
    if (why_not := tma_problem(a, b, out)) is None:
        path, why = "persistent_tma", "no fit: large tiles, read by the TMA"
    elif tma_problem(a, b, out, stage=True) is None:
        why = f"no fit: large tiles, read by the TMA from copies ({why_not})"
        return Plan("persistent_tma", by_rules("persistent_tma", a.dtype), why, stage=True)
    else:
        path, why = "grouped", f"no fit, and no tensor descriptors: {why_not}"
    return Plan(path, by_rules(path, a.dtype), why)


def smaller(config: Config) -> Config | None:
    """The next configuration to try when ``config`` needs more shared memory than the GPU
    has: one pipeline stage fewer, then half the K depth, then half the larger tile side."""
    if config.num_stages > 2:
        return dataclasses.replace(config, num_stages=config.num_stages - 1)
    if config.block_k > 32:
        return dataclasses.replace(config, block_k=config.block_k // 2)
    if max(config.block_m, config.block_n) <= 16:  # tl.dot's smallest tile
        return None
    if config.block_m >= config.block_n:
        return dataclasses.replace(config, block_m=config.block_m // 2)
    return dataclasses.replace(config, block_n=config.block_n // 2)
