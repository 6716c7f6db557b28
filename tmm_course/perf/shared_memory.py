"""Shared memory per program, as Triton's compiler reports it for a named GPU: lesson 4's kernel
compiled ahead of time on this machine (:mod:`tmm_course.compile_ahead`), whatever GPU it has.

Measured so: for ``sm_90`` (Hopper) Triton allocates ``num_stages`` buffers of
``(BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N) * itemsize`` bytes; for ``sm_80`` (Ampere) ``num_stages - 1``
(and one at ``num_stages=1``)."""

from __future__ import annotations

import torch

from tmm_course import gpus

STAGES_TILE = (128, 128, 64)  # lesson 6's bigger tiles, float16, 8 warps
STAGES_WARPS = 8
SHARED_GPUS = {"sm_80": "an A100", "sm_90": "an H100 or H200"}
# bytes one program may use, by the GPU the course names for each target
SHARED_LIMITS = {target: gpus.for_target(target).shared_per_block for target in SHARED_GPUS}


def compiled_shared_bytes(
    gpu_name: str,
    num_stages: int,
    tile: tuple[int, int, int] = STAGES_TILE,
    num_warps: int = STAGES_WARPS,
    dtype: torch.dtype = torch.float16,
) -> int:
    """Shared memory (bytes) of lesson 4's kernel with ``tile`` and ``num_stages``, as Triton's
    compiler reports it for ``gpu_name`` ("sm_80", "sm_90"), compiled on this machine."""
    from tmm_course.compile_ahead import compile_for, specialize
    from tmm_course.kernels.matmul import matmul_kernel

    size = 4096
    a = torch.empty(16, 16, dtype=dtype)  # only its dtype and alignment reach the compiler
    launch = specialize(
        matmul_kernel,
        (a, a, a, size, size, size, size, 1, size, 1, size, 1),
        {"PRECISION": "tf32" if dtype == torch.float32 else None, "BLOCK_M": tile[0],
         "BLOCK_N": tile[1], "BLOCK_K": tile[2]},
    )  # fmt: skip
    compiled = compile_for(matmul_kernel, launch, gpu_name, num_warps=num_warps,
                           num_stages=num_stages)  # fmt: skip
    if not compiled.ok:
        raise RuntimeError(f"the compiler refused the kernel for {gpu_name}: {compiled.error}")
    return int(compiled.shared_bytes)
