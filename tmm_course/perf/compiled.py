"""What the compiler made of a kernel on this GPU: registers and spills per thread, shared memory
per program, and whether the PTX uses Hopper's ``wgmma`` or the older ``mma`` tensor-core
instructions. Read from the compiled kernels Triton caches, after a launch.

On a GPU, ``python -m tmm_course.perf.compiled --out compiled_mine.json`` records these facts for
every step of lesson 6's journey (float16, 4096^3), with the device, versions, date and command.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import tmm_course
from tmm_course.backend import GPU
from tmm_course.capstone import kernels as fast
from tmm_course.capstone import plain_launches
from tmm_course.kernels.matmul import matmul_kernel
from tmm_course.perf import journey, results
from tmm_course.perf.sweeps import JOURNEY_PROBLEM

KERNELS = (
    matmul_kernel,
    fast.grouped_matmul_kernel,
    fast.persistent_tma_matmul_kernel,
)


@dataclass(frozen=True)
class CompiledFacts:
    """One compiled kernel: its name and what the compiler gave it."""

    kernel: str
    registers: int  # per thread
    spills: int  # registers spilled to local memory, per thread
    shared_bytes: int  # per program
    num_warps: int
    num_stages: int
    wgmma: bool  # Hopper's warpgroup matrix instructions
    mma: bool  # Ampere-style tensor-core instructions

    @classmethod
    def of(cls, compiled: object) -> CompiledFacts:
        ptx = compiled.asm.get("ptx", "") if hasattr(compiled, "asm") else ""
        meta = compiled.metadata
        return cls(
            kernel=getattr(meta, "name", "kernel"),
            registers=int(compiled.n_regs),
            spills=int(compiled.n_spills),
            shared_bytes=int(getattr(meta, "shared", 0)),
            num_warps=int(getattr(meta, "num_warps", 0)),
            num_stages=int(getattr(meta, "num_stages", 0)),
            wgmma="wgmma" in ptx,
            mma="mma.sync" in ptx,
        )


def _cached(kernel: object) -> dict:
    caches = getattr(kernel, "device_caches", {})
    found = {}
    for cache in caches.values():
        found.update(cache[0])
    return found


def compiled_by(run: Callable[[], object]) -> list[CompiledFacts]:
    """The facts of every course kernel ``run`` launches: the in-memory caches are emptied and
    the quick launches switched off first, so each kernel it launches goes through Triton's JIT
    (loaded again from its disk cache) and is seen."""
    for kernel in KERNELS:
        kernel.device_caches.clear()
    with plain_launches():  # the capstone's launches skip the JIT once warm: not in here
        run()
        torch.cuda.synchronize()
    facts = []
    for kernel in KERNELS:
        for compiled in _cached(kernel).values():
            compiled._init_handles()  # loads the binary: registers and spills are known
            facts.append(CompiledFacts.of(compiled))
    return facts


def journey_facts() -> dict[str, list[dict]]:
    """Every journey step's compiled kernels on float16 4096^3."""
    a, b = JOURNEY_PROBLEM.operands()
    return {
        step.name: [asdict(f) for f in compiled_by(lambda step=step: step.run(a, b))]
        for step in journey.runnable(a, b)
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record what the compiler made of each kernel.")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    if tmm_course.BACKEND != GPU:
        print("error: compiled kernels exist on a GPU only", file=sys.stderr)
        return 2
    data = {**results.provenance("tmm_course.perf.compiled", argv), "journey": journey_facts()}
    results.write(args.out, data)
    print(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
