"""Lesson 6's optimization journey: one kernel or launch configuration per step, each a
function ``(a, b) -> a @ b`` that the benchmark times side by side with ``torch.matmul``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tmm_course.capstone import launches as fast
from tmm_course.capstone import plans as dispatch
from tmm_course.capstone.calls import matmul_fast
from tmm_course.capstone.config import Config
from tmm_course.capstone.kernels import tma_problem
from tmm_course.kernels.matmul import matmul


@dataclass(frozen=True)
class Step:
    """One stop on the journey: what changed, and a launcher that computes ``a @ b``."""

    name: str
    change: str
    run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    config: Config  # its launch at 4096^3 float16 on an H200 (matmul_fast: its plan's)
    needs_tma: bool = False  # Hopper or newer (or the interpreter), 16-byte aligned rows

    @property
    def tile(self) -> tuple[int, int]:
        """BLOCK_M, BLOCK_N."""
        return self.config.block_m, self.config.block_n


def lesson4_launcher(config: Config) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Lesson 4's kernel on its 2-D row-major grid, launched with ``config``."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return matmul(
            a, b, block_m=config.block_m, block_n=config.block_n, block_k=config.block_k,
            num_warps=config.num_warps, num_stages=config.num_stages,
        )  # fmt: skip

    return run


def grouped_launcher(config: Config) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The grouped kernel launched with ``config``."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        return fast.launch_grouped(a, b, c, config)

    return run


def persistent_tma_launcher(config: Config) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The persistent tensor-descriptor kernel launched with ``config``."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        return fast.launch_persistent_tma(a, b, c, config)

    return run


LESSON_4 = Config(64, 64, 32, num_warps=4, num_stages=2)
BIG = Config(128, 128, 32, num_warps=4, num_stages=2)
DEEP = Config(128, 128, 64, num_warps=8, num_stages=4)

STEPS = (
    Step("lesson 4", "the kernel of lesson 4: 64x64x32 tiles, 2-D grid",
         lesson4_launcher(LESSON_4), LESSON_4),
    Step("bigger tiles", "128x128 tiles: twice the FLOPs per byte loaded", lesson4_launcher(BIG),
         BIG),
    Step("pipelined", "BLOCK_K 64, 8 warps, num_stages=4: loads run ahead of tl.dot",
         lesson4_launcher(DEEP), DEEP),
    Step("grouped order", "1-D grid taken in groups of 8 rows: A and B tiles reused in L2",
         grouped_launcher(DEEP), DEEP),
    Step("autotuned", "the best of a sweep of configurations for this shape",
         grouped_launcher(dispatch.LARGE_GROUPED), dispatch.LARGE_GROUPED),
    Step("persistent + TMA", "one program per SM; tiles loaded by the TMA unit (Hopper)",
         persistent_tma_launcher(dispatch.LARGE_TMA), dispatch.LARGE_TMA, needs_tma=True),
    Step("matmul_fast", "the capstone: picks kernel and configuration per shape",
         matmul_fast, dispatch.LARGE_TMA),
)  # fmt: skip


def runnable(a: torch.Tensor, b: torch.Tensor) -> tuple[Step, ...]:
    """The steps that can run on ``a @ b`` here: the TMA step only where tensor descriptors
    work (a Hopper GPU or the interpreter, 16-byte aligned rows)."""
    tma = tma_problem(a, b) is None
    return tuple(step for step in STEPS if tma or not step.needs_tma)
