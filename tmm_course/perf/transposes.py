"""Lesson 5's three transposes timed on a GPU, for the notebook to show on machines without one.

``python -m tmm_course.perf.transposes --out transposes_<gpu>.json`` times ``x.t().contiguous()``
(torch), one row per program and lesson 3's tiled copy on a ``4096 x 4096`` float32 tensor
(interleaved medians, L2 flushed before each call) and records GB/s with the device, versions,
date and command.
"""

from __future__ import annotations

import sys

import torch

from tmm_course.kernels import coalescing
from tmm_course.perf import results

SIZE = 4096


def gpu_measurements(size: int = SIZE, rounds: int = 5) -> dict:
    """GB/s (bytes read plus bytes written per second) of each transpose, with provenance."""
    torch.manual_seed(0)
    x = torch.randn(size, size, device="cuda")
    return {
        **results.provenance("tmm_course.perf.transposes", timed="cold_cache"),
        "shape": [size, size],
        "dtype": "float32",
        "rounds": rounds,
        "gbs": coalescing.bandwidth_gbs(x, rounds=rounds),
    }


def main(argv: list[str] | None = None) -> int:
    return results.measure_command(
        "Time lesson 5's three transposes on a GPU.", gpu_measurements, argv
    )


if __name__ == "__main__":
    sys.exit(main())
