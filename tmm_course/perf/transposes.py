"""Lesson 5's three transposes timed on a GPU, for the notebook to show on machines without one.

``python -m tmm_course.perf.transposes --out transposes_<gpu>.json`` times ``x.t().contiguous()``
(torch), one row per program and lesson 3's tiled copy on a ``4096 x 4096`` float32 tensor
(interleaved do_bench medians) and records GB/s with the device, versions, date and command.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

import tmm_course
from tmm_course.backend import GPU
from tmm_course.kernels import coalescing
from tmm_course.perf import results

SIZE = 4096


def gpu_measurements(size: int = SIZE, rounds: int = 5) -> dict:
    """GB/s (bytes read plus bytes written per second) of each transpose, with provenance."""
    torch.manual_seed(0)
    x = torch.randn(size, size, device="cuda")
    return {
        **results.provenance("tmm_course.perf.transposes"),
        "shape": [size, size],
        "dtype": "float32",
        "rounds": rounds,
        "gbs": coalescing.bandwidth_gbs(x, rounds=rounds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time lesson 5's three transposes on a GPU.")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    if tmm_course.BACKEND != GPU:
        print("error: these figures need compiled Triton on a GPU", file=sys.stderr)
        return 2
    data = gpu_measurements()
    results.write(args.out, data)
    print(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
