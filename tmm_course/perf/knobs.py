"""Lessons 6 and 7: lesson 4's kernel made fast one knob at a time.

Every variant is a launcher ``(a, b) -> a @ b`` that differs from :data:`BASELINE` (lesson 4's
own ``matmul()`` settings: 64x64x32 tiles, 4 warps, 3 stages, a 2-D grid) in the one knob its
name says. :data:`STEPS` are the stops the lessons measure with Nsight Compute and race against
``torch.matmul``; the sweeps change one knob over a range."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from tmm_course.kernels.autotuned import autotuned_matmul
from tmm_course.kernels.making_fast import ordered_matmul
from tmm_course.kernels.matmul import matmul
from tmm_course.kernels.persistent_tma import H200_CONFIG, persistent_matmul

Matmul = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Knobs:
    """The launch of lesson 4's kernel: tile, warps, stages and launch order (``group_m``
    None: lesson 4's 2-D grid, whose axis 0, pid_m, varies fastest; 1: row-major 1-D order)."""

    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 3
    group_m: int | None = None

    @property
    def label(self) -> str:
        order = "2-D grid" if self.group_m is None else f"GROUP_M={self.group_m}"
        return (
            f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} "
            f"s{self.num_stages} {order}"
        )

    def launcher(self) -> Matmul:
        """``(a, b) -> a @ b`` with these knobs."""
        blocks = dict(block_m=self.block_m, block_n=self.block_n, block_k=self.block_k,
                      num_warps=self.num_warps, num_stages=self.num_stages)  # fmt: skip
        if self.group_m is None:
            return lambda a, b: matmul(a, b, **blocks)
        return lambda a, b: ordered_matmul(a, b, group_m=self.group_m, **blocks)


BASELINE = Knobs()  # lesson 4's matmul() as it is


@dataclass(frozen=True)
class Step:
    """One stop: its name, the one thing it changes from the baseline, and its launcher."""

    name: str
    change: str
    run: Matmul
    tile: tuple[int, int]  # BLOCK_M, BLOCK_N
    needs_tma: bool = False


def _knob_step(name: str, change: str, knobs: Knobs) -> Step:
    return Step(name, change, knobs.launcher(), (knobs.block_m, knobs.block_n))


BIGGER_TILES = replace(BASELINE, block_m=128, block_n=128, block_k=64, num_warps=8)
FIVE_STAGES = replace(BASELINE, num_stages=5)
GROUPED = replace(BASELINE, group_m=8)
ALL_THREE = replace(BIGGER_TILES, num_stages=4, group_m=8)

STEPS = (
    _knob_step("lesson 4", "lesson 4's matmul(): 64x64x32, 4 warps, 3 stages, 2-D grid", BASELINE),
    _knob_step("bigger tiles", "128x128x64 tiles (8 warps to hold them)", BIGGER_TILES),
    _knob_step("5 stages", "num_stages 3 -> 5: more K-slabs in flight", FIVE_STAGES),
    _knob_step("grouped order", "1-D grid in groups of 8 rows of tiles", GROUPED),
    Step("autotuned", "@triton.autotune picks tile, warps and stages per (M, N, K)",
         autotuned_matmul, (128, 128)),
    _knob_step("all three", "bigger tiles, 4 stages and grouped order together", ALL_THREE),
    # the H200's tiles there; where a program has less shared memory, ones that fit (lesson 7)
    Step("persistent + TMA", "lesson 7: one program per SM, tiles moved by the TMA",
         lambda a, b: persistent_matmul(a, b), (H200_CONFIG.block_m, H200_CONFIG.block_n),
         needs_tma=True),
)  # fmt: skip

# the sweeps of lesson 6, each one knob over a range (the rest as in BASELINE)
TILES = tuple(
    replace(BASELINE, block_m=bm, block_n=bn, block_k=bk, num_warps=w)
    for bm, bn, bk in [(32, 32, 32), (64, 64, 32), (128, 64, 32), (128, 128, 32), (128, 128, 64),
                       (128, 256, 64)]
    for w in (4, 8)
)  # fmt: skip
STAGES = tuple(
    replace(base, num_stages=s) for base in (BASELINE, BIGGER_TILES) for s in (1, 2, 3, 4, 5)
)
GROUPS = tuple(
    replace(base, group_m=g)
    for base in (BASELINE, BIGGER_TILES)
    for g in (None, 1, 4, 8, 16, 32, 64)
)
