"""What this GPU can do, in one place: every choice the course makes per GPU (bfloat16, TF32,
tensor descriptors, pipelining, tile sizes that fit shared memory) reads :func:`current`, so a
test can fake a T4 or an A100 on a machine without one.

The tiers (compute capability):

- **no GPU**: Triton's interpreter on the CPU; float16 and float32 only.
- **before Ampere** (< 8.0, e.g. Colab's free T4, 7.5): ``tl.dot`` compiles without tensor cores
  (Triton 3.3+); no bfloat16, no TF32, no ``cp.async`` (``num_stages`` does nothing), no TMA,
  64 KB of shared memory per block.
- **Ampere and Ada** (8.x: A100, L4, RTX 30/40): tensor cores (``mma.sync``), bfloat16, TF32,
  pipelined loads; no TMA.
- **Hopper** (9.x: H100, H200): all of the above, warp-group tensor cores (``wgmma``), tensor
  descriptors (TMA), 227 KB of shared memory per block.
- **Blackwell** (10.x: B200): ``tl.dot`` on ``tcgen05.mma`` with its accumulator in tensor memory,
  TMA, 227 KB of shared memory per block.
- **consumer Blackwell** (12.x: RTX 50): ``mma.sync`` as on Ampere (no ``wgmma``, no
  ``tcgen05``), TMA, and 99 KB of shared memory per block: less than an A100's.

Each figure lives in one table, :mod:`tmm_course.gpus`; a choice that depends on shared memory
reads the GPU's own figure (:attr:`Gpu.shared_memory`), never its compute capability.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tmm_course import gpus

AMPERE = (8, 0)
HOPPER = (9, 0)


@dataclass(frozen=True)
class Gpu:
    """One GPU's name, compute capability, SM count and shared memory per block."""

    name: str
    capability: tuple[int, int]
    sms: int
    shared_memory: int  # bytes one program (block) may use

    @property
    def tier(self) -> str:
        """Its tier (a key of :data:`tmm_course.gpus.TIERS`)."""
        return gpus.tier_of(self.capability)

    @property
    def bfloat16(self) -> bool:
        return self.capability >= AMPERE

    @property
    def tf32(self) -> bool:
        return self.capability >= AMPERE

    @property
    def pipelining(self) -> bool:
        """Whether ``num_stages`` > 1 overlaps loads with math (``cp.async``, 8.0+)."""
        return self.capability >= AMPERE

    @property
    def tensor_cores(self) -> bool:
        """Whether ``tl.dot`` runs on tensor cores (8.0+; before, Triton 3.3+ compiles it for
        FMA units)."""
        return self.capability >= AMPERE

    @property
    def tma(self) -> bool:
        """Whether tensor descriptors load tiles through the TMA unit (9.0+, RTX 50 too)."""
        return self.capability >= HOPPER

    def skipped(self) -> list[str]:
        """What the course leaves out on this GPU, each with why."""
        c = f"{self.capability[0]}.{self.capability[1]}"
        out = []
        if not self.bfloat16:
            out.append(f"bfloat16 (needs compute capability 8.0; this GPU is {c})")
        if not self.tf32:
            out.append("TF32: float32 products are exact (input_precision='ieee') instead")
        if not self.pipelining:
            out.append("pipelining: num_stages has no effect without cp.async (8.0+)")
        if not self.tma:
            out.append(f"TMA copies: descriptors load with ordinary loads (9.0; this is {c})")
        if self.tier == "consumer Blackwell":
            out.append("wgmma and tcgen05: tl.dot runs on mma.sync, as on an A100")
        if 0 < self.shared_memory < gpus.CARDS["H200"].shared_per_block:
            out.append(
                f"the H200's largest tiles: {self.shared_memory // 1024} KB of shared memory per "
                "program here, so lessons 7 and 8 (the capstone) shrink their tiles to fit (the "
                "capstone counts its tile of C on the way out too)"
            )
        return out

    def describe(self) -> str:
        """One line: name, capability, tier, SMs and shared memory."""
        c = f"{self.capability[0]}.{self.capability[1]}"
        return (
            f"{self.name} (compute capability {c}, {self.tier}, {self.sms} SMs, "
            f"{self.shared_memory // 1024} KB shared memory per program)"
        )


# every GPU of the table (Colab's, the ones the course was measured on, Blackwell's two), for
# lesson 0's table and for tests that fake one
KNOWN = {
    short: Gpu(card.name, card.capability, card.sms, card.shared_per_block)
    for short, card in gpus.CARDS.items()
}


@functools.cache
def _read(index: int) -> Gpu:
    import torch
    import triton

    props = torch.cuda.get_device_properties(index)
    try:  # what Triton itself compiles against
        shared = triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]
    except Exception:  # an older or newer Triton without this helper
        shared = getattr(props, "shared_memory_per_block_optin", 48 * 1024)
    return Gpu(props.name, (props.major, props.minor), props.multi_processor_count, int(shared))


def current() -> Gpu | None:
    """The GPU kernels run on, or None on the interpreter."""
    from tmm_course.backend import GPU, chosen

    if chosen() != GPU:
        return None
    import torch

    return _read(torch.cuda.current_device())


def precision_for(precision: str) -> str:
    """The ``input_precision`` a float32 ``tl.dot`` can have here: TF32 falls back to exact
    float32 on a GPU without TF32 tensor cores."""
    gpu = current()
    if precision == "tf32" and gpu is not None and not gpu.tf32:
        return "ieee"
    return precision
