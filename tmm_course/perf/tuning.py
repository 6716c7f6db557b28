"""Autotuning by hand: try each configuration on one problem, keep the fastest that is right
(``python -m tmm_course.perf.bench sweep``, whose H200 run chose the capstone's rules)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import torch

from tmm_course.capstone import launches as fast
from tmm_course.capstone.config import Config
from tmm_course.numerics import error
from tmm_course.timing import device_ms

# A few sensible configurations for a large float16 product (the notebook's small sweep)
LARGE_CANDIDATES = (
    Config(64, 64, 32, num_warps=4, num_stages=2),
    Config(128, 128, 32, num_warps=4, num_stages=3),
    Config(128, 128, 64, num_warps=8, num_stages=3),
    Config(128, 128, 64, num_warps=4, num_stages=4),
    Config(128, 256, 64, num_warps=8, num_stages=3),
    Config(256, 128, 64, num_warps=8, num_stages=3),
)


Launcher = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _into_new_c(launch: Callable[..., torch.Tensor], config: Config) -> Launcher:
    """``launch(a, b, c, config)`` as ``(a, b) -> a @ b``, into a new C."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        return launch(a, b, c, config)

    return run


def grouped_launcher(config: Config) -> Launcher:
    """The grouped kernel launched with ``config``."""
    return _into_new_c(fast.launch_grouped, config)


def persistent_tma_launcher(config: Config) -> Launcher:
    """The persistent tensor-descriptor kernel launched with ``config``."""
    return _into_new_c(fast.launch_persistent_tma, config)


@dataclass(frozen=True)
class Timing:
    """One configuration's outcome: milliseconds (None if it failed) and its error."""

    config: Config
    ms: float | None
    error: float | None
    failure: str | None = None

    def as_dict(self) -> dict:
        return {**asdict(self.config), "ms": self.ms, "error": self.error, "failure": self.failure}


def sweep(
    launcher: Callable[[Config], Callable[[torch.Tensor, torch.Tensor], torch.Tensor]],
    configs: Iterable[Config],
    a: torch.Tensor,
    b: torch.Tensor,
    tolerance: float,
    progress: bool = True,
    timer: Callable[[Callable[[], object]], float | None] = device_ms,
) -> list[Timing]:
    """Time ``launcher(config)(a, b)`` for every config (with ``timer``, by default the GPU
    alone, :func:`tmm_course.timing.device_ms`), after checking its result against float64; a
    wrong or failing configuration is recorded, never timed."""
    from tqdm.auto import tqdm

    trials = []
    for config in tqdm(list(configs), desc="configurations", disable=not progress):
        run = launcher(config)
        try:
            err = error(run(a, b), a, b)
        except Exception as exc:  # e.g. too much shared memory for this tile
            trials.append(Timing(config, None, None, f"{type(exc).__name__}: {exc}"[:200]))
            continue
        if not err <= tolerance:
            trials.append(Timing(config, None, err, "wrong result"))
            continue
        trials.append(Timing(config, timer(lambda run=run: run(a, b)), err))
    return trials


def fastest(trials: list[Timing]) -> Timing:
    """The quickest trial that ran and was right."""
    timed = [t for t in trials if t.ms is not None]
    if not timed:
        raise ValueError("no configuration ran correctly")
    return min(timed, key=lambda t: t.ms)
