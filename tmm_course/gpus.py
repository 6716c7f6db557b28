"""The table of GPUs: every fact about a GPU the course uses, in one place, each with its source.

One row per GPU the course names (lesson 0's table, the faked GPUs of the tests, the targets the
compiler is asked about on a CPU: :mod:`tmm_course.compile_ahead`). Every other module reads
this table: :mod:`tmm_course.gpu` (what the GPU here can do, its tier), the compile-ahead targets
and their occupancy, the check's shared-memory limits, the lessons' figures. Adding a GPU is one
row here (and, for a new compile target, one entry in :data:`TARGETS`).

Per-SM figures come from NVIDIA's documents (:data:`SOURCES`); what ``tl.dot`` compiles to
(the matrix unit) is what Triton's compiler makes of lesson 4's kernel for that compute
capability, on a CPU (``tests/test_gpus.py`` compiles it on every Triton CI runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

KB = 1024

# where each figure comes from (a row's ``sources`` names these keys per figure)
SOURCES: dict[str, str] = {
    "guide": "NVIDIA CUDA C++ Programming Guide, 'Compute Capabilities': technical "
    "specifications per compute capability and the shared-memory section of each "
    "(docs.nvidia.com/cuda/cuda-c-programming-guide/#compute-capabilities)",
    "blackwell": "NVIDIA Blackwell Tuning Guide, 1.4.1.1 Occupancy "
    "(docs.nvidia.com/cuda/blackwell-tuning-guide/): 64 warps per SM on 10.0, 48 on 12.0, 32 "
    "blocks; 227 KB per block on 10.0",
    "ptx": "NVIDIA PTX ISA, 'Tensor Memory': 128 lanes x 512 columns of 32-bit cells per SM "
    "(tcgen05.alloc hands out columns in powers of two, at least 32); Triton's launcher "
    "refuses more than 512 columns (triton/compiler/compiler.py, 'tensor memory')",
    "triton": "Triton's compiler on a CPU (tmm_course.compile_ahead, lesson 4's kernel, float16): "
    "the instruction tl.dot becomes; Triton 3.6 and 3.9 agree (tests/test_gpus.py)",
    "triton-8182": "triton-lang/triton #8182 on an RTX 50: 'out of resource: shared memory, "
    "Required: 131072, Hardware limit: 101376'",
    "spec": "NVIDIA's product page or data sheet of the card (SM count)",
    "measured": "read on the card by torch.cuda.get_device_properties (tmm_course/perf/data)",
}

# the instruction tl.dot compiles to, in a learner's words
MATRIX_UNITS: dict[str, str] = {
    "fma": "plain FMA units (no tensor cores)",
    "mma": "tensor cores (mma.sync)",
    "wgmma": "Hopper's warp-group tensor-core instructions (wgmma)",
    "tcgen05": "Blackwell's tensor cores (tcgen05.mma, the accumulator in tensor memory)",
    "none": "nothing (the kernel has no tl.dot)",
}


@dataclass(frozen=True)
class Card:
    """One GPU: what it is called, what one SM of it holds, and what its tensor cores do.

    Shared memory is not a function of the compute capability's order: an RTX 50 (12.0) lets a
    program use 99 KB, an H100 (9.0) 227 KB. Read each figure from its row."""

    short: str  # what the course calls it ("H100")
    name: str  # what torch.cuda.get_device_name reports
    capability: tuple[int, int]
    sms: int
    shared_per_block: int  # bytes one program (block) may use
    shared_per_sm: int  # bytes all the programs on one SM share
    warps: int  # resident warps per SM
    programs: int  # resident blocks per SM
    matrix_unit: str  # what tl.dot compiles to (a key of MATRIX_UNITS)
    tma: bool  # tensor descriptors load through the TMA unit
    fp8: bool  # float8 tensor cores
    tensor_memory: int = 0  # columns (x 128 lanes of 32 bits) per SM, tcgen05's accumulators
    registers: int = 64 * KB  # 32-bit registers per SM
    reserved_shared: int = KB  # the driver keeps this much of each block's share (8.0 on)
    shared_unit: int = 128  # shared memory is handed out in steps of this many bytes
    sources: Mapping[str, str] = field(default_factory=dict)  # figure -> key of SOURCES

    @property
    def target(self) -> str:
        """The compile target: ``sm_90`` for compute capability 9.0."""
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def bfloat16(self) -> bool:
        return self.capability >= (8, 0)

    @property
    def tf32(self) -> bool:
        return self.capability >= (8, 0)

    @property
    def pipelining(self) -> bool:
        """Whether ``num_stages`` > 1 overlaps loads with math (``cp.async``, 8.0+)."""
        return self.capability >= (8, 0)

    def source(self, figure: str) -> str:
        """Where ``figure`` (a field's name) comes from."""
        return SOURCES[self.sources.get(figure, "guide")]


_GUIDE = {"sms": "spec", "matrix_unit": "triton"}
_BLACKWELL = {**_GUIDE, "warps": "blackwell", "programs": "blackwell", "tensor_memory": "ptx"}

CARDS: dict[str, Card] = {
    "T4": Card("T4", "Tesla T4", (7, 5), 40, 64 * KB, 64 * KB, warps=32, programs=16,
               matrix_unit="fma", tma=False, fp8=False, reserved_shared=0, shared_unit=256,
               sources=_GUIDE),
    "L4": Card("L4", "NVIDIA L4", (8, 9), 58, 99 * KB, 100 * KB, warps=48, programs=24,
               matrix_unit="mma", tma=False, fp8=True, sources=_GUIDE),
    "A100": Card("A100", "NVIDIA A100-SXM4-40GB", (8, 0), 108, 163 * KB, 164 * KB, warps=64,
                 programs=32, matrix_unit="mma", tma=False, fp8=False, sources=_GUIDE),
    "H100": Card("H100", "NVIDIA H100 80GB HBM3", (9, 0), 132, 227 * KB, 228 * KB, warps=64,
                 programs=32, matrix_unit="wgmma", tma=True, fp8=True,
                 sources={**_GUIDE, "sms": "measured"}),
    "H200": Card("H200", "NVIDIA H200", (9, 0), 132, 227 * KB, 228 * KB, warps=64, programs=32,
                 matrix_unit="wgmma", tma=True, fp8=True, sources={**_GUIDE, "sms": "measured"}),
    "B200": Card("B200", "NVIDIA B200", (10, 0), 148, 227 * KB, 228 * KB, warps=64, programs=32,
                 matrix_unit="tcgen05", tma=True, fp8=True, tensor_memory=512,
                 sources=_BLACKWELL),
    "RTX 5090": Card("RTX 5090", "NVIDIA GeForce RTX 5090", (12, 0), 170, 99 * KB, 100 * KB,
                     warps=48, programs=32, matrix_unit="mma", tma=True, fp8=True,
                     sources={**_BLACKWELL, "shared_per_block": "triton-8182"}),
}  # fmt: skip

# the GPUs the course compiles every kernel for on a CPU, one card named per target
TARGETS: dict[str, str] = {
    "sm_75": "T4",
    "sm_80": "A100",
    "sm_90": "H100",
    "sm_100": "B200",
    "sm_120": "RTX 5090",
}


def for_target(target: str) -> Card:
    """The card the course names for compile target ``target`` ("sm_90": an H100)."""
    if target not in TARGETS:
        raise ValueError(f"unknown GPU '{target}': expected one of {', '.join(TARGETS)}")
    return CARDS[TARGETS[target]]


def twins(target: str) -> list[str]:
    """The short names of every card of ``target``'s compute capability ("H100", "H200")."""
    capability = for_target(target).capability
    return [c.short for c in CARDS.values() if c.capability == capability]


def label(target: str) -> str:
    """What a table calls ``target``'s GPUs: "H100/H200", "RTX 5090"."""
    return "/".join(twins(target))


def described(target: str) -> str:
    """``target``'s GPUs in a sentence: "an H100 or H200 (compute capability 9.0, ...)"."""
    card = for_target(target)
    names = " or ".join(twins(target))
    article = "an" if names[0] in "AEFHILMNORSX" else "a"
    c = f"{card.capability[0]}.{card.capability[1]}"
    return f"{article} {names} (compute capability {c}, {tier_of(card.capability)})"


def by_capability(capability: tuple[int, int]) -> Card | None:
    """The first card of this compute capability in the table, or None."""
    return next((c for c in CARDS.values() if c.capability == tuple(capability)), None)


# the tiers, by compute capability major: what the course does differently on each
TIERS: dict[str, str] = {
    "before Ampere": "tl.dot without tensor cores (FMA); no bfloat16, TF32, pipelining or TMA",
    "Ampere or Ada": "tensor cores (mma.sync), bfloat16, TF32, pipelined loads; no TMA",
    "Hopper": "warp-group tensor cores (wgmma) and tensor descriptors (TMA)",
    "Blackwell": "tcgen05 tensor cores with the accumulator in tensor memory, TMA",
    "consumer Blackwell": "mma.sync tensor cores (no wgmma, no tcgen05), TMA, and 99 KB of shared "
    "memory per program (an H100 has 227 KB): lessons 7 and 8 pick tiles that fit it, and lessons "
    "6 and 7's checks compile your launches for it",
}


def tier_of(capability: tuple[int, int]) -> str:
    """The tier of a compute capability (a key of :data:`TIERS`)."""
    major = capability[0]
    if major >= 12:
        return "consumer Blackwell"
    if major >= 10:
        return "Blackwell"
    if major >= 9:
        return "Hopper"
    if major >= 8:
        return "Ampere or Ada"
    return "before Ampere"
