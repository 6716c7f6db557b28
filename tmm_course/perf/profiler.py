"""Profile kernels with Proton, the profiler that ships with Triton (``triton.profiler``), and
read its three numbers that matter: GPU time per call, and the FLOP/s and bytes/s that follow
from the FLOPs and bytes given to each scope.

    readings = profile({"lesson 4": lesson_4, "yours": yours}, a, b)   # on a GPU
    readings["yours"].ms, readings["yours"].tflops, readings["yours"].gbs

Proton measures time (through CUPTI); the FLOPs and bytes are what the scope is told: here the
product's ``2*M*N*K`` and its ideal traffic (A and B read once, C written once). The DRAM bytes
that really crossed the bus are Nsight Compute's to count (lesson 6's stored run has them)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from tmm_course.perf import intensity


@dataclass(frozen=True)
class Reading:
    """One scope: milliseconds per call on the GPU, and the rates they give."""

    ms: float
    tflops: float
    gbs: float  # ideal bytes per second, in GB/s
    kernels: tuple[str, ...]


def scopes(hatchet: object, names: tuple[str, ...]) -> dict[str, dict]:
    """Each named scope of a Proton profile (its ``.hatchet`` JSON): the GPU time of the
    kernels under it, the metrics it was given, and those kernels' names."""
    found: dict[str, dict] = {}

    def total(node: dict, key: str) -> float:
        own = float(node.get("metrics", {}).get(key, 0) or 0)
        return own + sum(total(child, key) for child in node.get("children", []))

    def walk(node: dict) -> None:
        name = node.get("frame", {}).get("name")
        if name in names:
            kernels = [c.get("frame", {}).get("name") for c in node.get("children", [])]
            found[name] = {"time_ns": total(node, "time (ns)"),
                           "metrics": node.get("metrics", {}), "kernels": kernels}  # fmt: skip
            return
        for child in node.get("children", []):
            walk(child)

    for root in hatchet if isinstance(hatchet, list) else [hatchet]:
        walk(root)
    return found


def readings(found: Mapping[str, dict], calls: int) -> dict[str, Reading]:
    """:class:`Reading` of each scope of :func:`scopes`, over ``calls`` calls."""
    out = {}
    for name, scope in found.items():
        seconds = scope["time_ns"] * 1e-9
        metrics = scope["metrics"]
        out[name] = Reading(
            ms=seconds * 1e3 / calls,
            tflops=float(metrics.get("flops16", 0)) / seconds / 1e12,
            gbs=float(metrics.get("bytes", 0)) / seconds / 1e9,
            kernels=tuple(k for k in scope["kernels"] if k),
        )
    return out


def profile(
    runs: Mapping[str, Callable[[torch.Tensor, torch.Tensor], object]],
    a: torch.Tensor,
    b: torch.Tensor,
    calls: int = 10,
) -> tuple[dict[str, Reading], dict]:
    """Proton over ``calls`` calls of each of ``runs`` on ``a @ b`` (compiled first, outside
    the profile): the readings, and the raw profile."""
    import triton.profiler as proton

    (m, k), n = a.shape, b.shape[1]
    metrics = {"flops16": intensity.flops(m, n, k),
               "bytes": intensity.ideal_traffic_bytes(m, n, k, a.element_size())}  # fmt: skip
    for run in runs.values():
        run(a, b)
    torch.cuda.synchronize()
    folder = Path(tempfile.mkdtemp())
    proton.start(str(folder / "profile"), context="shadow")
    for _ in range(calls):
        for name, run in runs.items():
            with proton.scope(name, metrics):
                run(a, b)
    torch.cuda.synchronize()
    proton.finalize()
    raw = json.loads((folder / "profile.hatchet").read_text())
    return readings(scopes(raw, tuple(runs)), calls), raw
