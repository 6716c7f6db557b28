"""The problems the benchmark races and the configurations its sweeps try, as data.

A :class:`Problem` is one product C = A @ B; ``GOALS`` are ``matmul_fast``'s targets on an H200,
``SWEEPS`` the tile configurations tried per problem and kernel, ``FINALS`` the sweep's front
runners raced once more. ``GRID`` is the broad set of problems ``matmul_fast`` is judged on: its
plan is fitted on ``FITTED`` (every other problem) and reported apart on ``HELD_OUT``, with
``CANDIDATES`` the configurations the fit tries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

import tmm_course
from tmm_course.kernels.fast import Config
from tmm_course.numerics import tolerance


@dataclass(frozen=True)
class Problem:
    """C = A @ B with A (m, k) row-major and B (k, n) row-major, or column-major when
    ``b_layout == "col"`` (B is then the transpose of a row-major (n, k) tensor)."""

    m: int
    n: int
    k: int
    dtype: str = "float16"
    precision: str = "tf32"  # how float32 products are formed, on both sides
    b_layout: str = "row"

    @property
    def kind(self) -> str:
        """The dtype, and for float32 how products are formed: "float32 (tf32)"."""
        return f"float32 ({self.precision})" if self.dtype == "float32" else self.dtype

    @property
    def label(self) -> str:
        shape = f"{self.m}^3" if self.m == self.n == self.k else f"{self.m}x{self.n}x{self.k}"
        return f"{shape} {self.kind}" + (", B column-major" if self.b_layout == "col" else "")

    def as_dict(self) -> dict:
        return {**asdict(self), "kind": self.kind, "label": self.label}

    def tolerance(self) -> float:
        """The error bound its results must meet on this backend."""
        return tolerance(getattr(torch, self.dtype), tmm_course.BACKEND, self.precision)

    def operands(self, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator(device=tmm_course.DEVICE).manual_seed(seed)
        dtype = getattr(torch, self.dtype)
        new = lambda r, c: torch.randn(r, c, device=tmm_course.DEVICE, generator=gen).to(dtype)
        a = new(self.m, self.k)
        return a, (new(self.n, self.k).t() if self.b_layout == "col" else new(self.k, self.n))


# The goals on an H200: problem -> lowest acceptable ratio torch time / our time
GOALS = (
    *(
        (Problem(m, n, k, dtype), target)
        for (m, n, k, target) in [
            (4096, 4096, 4096, 1.0), (8192, 8192, 8192, 1.0), (1024, 1024, 1024, 0.8),
            (16, 4096, 4096, 0.8), (128, 4096, 4096, 0.8), (4096, 4096, 4093, 1.0),
        ]
        for dtype in ("float16", "bfloat16")
    ),
    (Problem(4096, 4096, 4096, "float32", "tf32"), 0.8),
)  # fmt: skip
JOURNEY_PROBLEM = Problem(4096, 4096, 4096)


_LARGE_TMA = (
    Config(128, 256, 64, num_warps=8, num_stages=3),
    Config(128, 256, 64, num_warps=8, num_stages=3, group_m=4),
    Config(128, 256, 64, num_warps=8, num_stages=3, group_m=16),
    Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True),
    Config(128, 256, 64, num_warps=8, num_stages=4, subtile=True),
    Config(256, 128, 64, num_warps=8, num_stages=3),
    Config(256, 128, 64, num_warps=8, num_stages=4, subtile=True),
    Config(128, 256, 32, num_warps=8, num_stages=6, subtile=True),
)
_LARGE_GROUPED = (
    Config(128, 256, 64, num_warps=8, num_stages=3),
    Config(128, 256, 64, num_warps=8, num_stages=4),
    Config(128, 256, 32, num_warps=8, num_stages=5),
    Config(256, 128, 64, num_warps=8, num_stages=3),
    Config(128, 128, 32, num_warps=4, num_stages=4),
)
_FEW_ROWS = (
    Config(64, 64, 128, num_warps=4, num_stages=4),
    Config(64, 64, 128, num_warps=4, num_stages=4, split_k=2),
    Config(64, 128, 128, num_warps=4, num_stages=4, split_k=4),
    Config(16, 64, 128, num_warps=4, num_stages=4, split_k=4),
    Config(32, 128, 128, num_warps=4, num_stages=4, split_k=4),
    Config(64, 128, 64, num_warps=4, num_stages=5, split_k=4),
    Config(64, 64, 256, num_warps=4, num_stages=3, split_k=4),
    Config(16, 32, 256, num_warps=4, num_stages=3),
    Config(32, 64, 256, num_warps=4, num_stages=3, split_k=2),
    Config(128, 128, 64, num_warps=8, num_stages=4, split_k=4),
    Config(64, 128, 128, num_warps=4, num_stages=3, split_k=2),
    Config(128, 64, 128, num_warps=4, num_stages=4, split_k=4),
    Config(128, 128, 64, num_warps=8, num_stages=4, split_k=2),
    Config(64, 64, 128, num_warps=4, num_stages=4, split_k=4),
    Config(128, 256, 64, num_warps=8, num_stages=3, split_k=4),
    Config(64, 128, 64, num_warps=4, num_stages=4, split_k=4),
    Config(128, 64, 64, num_warps=4, num_stages=4, split_k=8),
)
_MEDIUM = (
    Config(64, 64, 64, num_warps=4, num_stages=4, group_m=4),
    Config(128, 64, 64, num_warps=4, num_stages=4),
    Config(64, 128, 64, num_warps=4, num_stages=4),
    Config(128, 128, 64, num_warps=8, num_stages=4, split_k=2),
    Config(64, 64, 128, num_warps=4, num_stages=3),
    Config(128, 64, 64, num_warps=4, num_stages=3, split_k=2),
    Config(64, 64, 64, num_warps=4, num_stages=4, split_k=2),
    Config(128, 128, 64, num_warps=4, num_stages=3),
    Config(64, 128, 64, num_warps=4, num_stages=4, split_k=2),
    Config(128, 128, 32, num_warps=4, num_stages=4, split_k=2),
)
_FLOAT32_TMA = (
    Config(128, 128, 32, num_warps=8, num_stages=3),
    Config(128, 128, 32, num_warps=8, num_stages=4),
    Config(128, 256, 32, num_warps=8, num_stages=3, subtile=True),
    Config(128, 64, 32, num_warps=4, num_stages=4),
    Config(256, 128, 32, num_warps=8, num_stages=3, subtile=True),
    Config(128, 128, 32, num_warps=4, num_stages=4),
    Config(128, 256, 16, num_warps=8, num_stages=4, subtile=True),
    Config(128, 128, 64, num_warps=8, num_stages=2),
)
# problem -> kernel -> configurations tried (python -m tmm_course.perf.bench sweep)
SWEEPS = {
    Problem(4096, 4096, 4096): {"persistent_tma": _LARGE_TMA, "grouped": _LARGE_GROUPED},
    Problem(8192, 8192, 8192): {"persistent_tma": _LARGE_TMA, "grouped": _LARGE_GROUPED[:2]},
    Problem(1024, 1024, 1024): {"grouped": _MEDIUM, "persistent_tma": _MEDIUM[:4]},
    Problem(16, 4096, 4096): {"grouped": _FEW_ROWS},
    Problem(128, 4096, 4096): {"grouped": _FEW_ROWS},
    Problem(4096, 4096, 4093): {"grouped": _LARGE_GROUPED},
    Problem(4096, 4096, 4096, "float32"): {"persistent_tma": _FLOAT32_TMA},
}  # fmt: skip


# problem -> contenders raced interleaved: the sweep's front runners
FINALS = {
    Problem(4096, 4096, 4096): {"persistent_tma": (
        Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True),
        Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True, flatten=False),
        Config(128, 256, 64, num_warps=8, num_stages=3, group_m=16, subtile=True),
        Config(128, 256, 64, num_warps=8, num_stages=3, group_m=16),
        Config(128, 256, 64, num_warps=8, num_stages=4, subtile=True),
    )},
    Problem(1024, 1024, 1024): {"grouped": (
        Config(64, 128, 64, num_warps=4, num_stages=4),
        Config(64, 64, 64, num_warps=4, num_stages=4, group_m=4),
        Config(128, 64, 64, num_warps=4, num_stages=4),
    ), "persistent_tma": (Config(64, 128, 64, num_warps=4, num_stages=4),)},
    Problem(128, 4096, 4096): {"grouped": (
        Config(64, 64, 128, num_warps=4, num_stages=4),
        Config(64, 128, 64, num_warps=4, num_stages=4, split_k=4),
        Config(64, 64, 128, num_warps=4, num_stages=3),
        Config(64, 128, 128, num_warps=4, num_stages=3),
        Config(32, 128, 128, num_warps=4, num_stages=4),
    )},
    Problem(4096, 4096, 4096, "float32"): {"persistent_tma": (
        Config(128, 256, 32, num_warps=8, num_stages=3, subtile=True),
        Config(128, 256, 32, num_warps=8, num_stages=3, group_m=16, subtile=True),
        Config(128, 256, 32, num_warps=8, num_stages=3, subtile=True, flatten=False),
    )},
}  # fmt: skip


def _grid() -> tuple[Problem, ...]:
    """At least 60 problems across the shape space, families interleaved so that every other
    one (the fitted half) covers each family."""
    squares = [256, 384, 512, 768, 1000, 1024, 1536, 2048, 2500, 3072, 4096, 5000, 6144, 8192,
               12288, 16384]  # fmt: skip
    problems = [Problem(s, s, s) for s in squares]
    problems += [Problem(s, s, s, "bfloat16") for s in (512, 1024, 1536, 2048, 3000, 4096, 8192)]
    problems += [Problem(s, s, s, "float32") for s in (512, 1024, 2048, 3000, 4096, 8192)]
    problems += [Problem(m, 4096, 4096) for m in (1, 8, 16, 32, 64, 100, 128, 256, 384, 512)]
    problems += [Problem(m, 8192, 8192, "bfloat16") for m in (16, 128)]
    problems += [Problem(4096, n, 4096) for n in (1, 16, 64, 256)]
    problems += [Problem(4096, 4096, k) for k in (16, 64, 128, 256)]
    problems += [
        Problem(m, n, k)
        for m, n, k in [(4095, 4097, 4093), (1023, 1025, 1027), (3001, 2999, 4093),
                        (777, 1333, 2049), (4096, 4096, 4093), (2048, 2048, 2047)]
    ]  # fmt: skip
    problems += [
        Problem(m, n, k, dtype, b_layout="col")
        for m, n, k, dtype in [(1024, 1024, 1024, "float16"), (4096, 4096, 4096, "float16"),
                               (8192, 8192, 8192, "float16"), (128, 4096, 4096, "float16"),
                               (4096, 4096, 4096, "bfloat16"), (2048, 2048, 2048, "float32")]
    ]  # fmt: skip
    problems += [
        Problem(m, n, k)
        for m, n, k in [(8192, 1024, 1024), (1024, 8192, 1024), (1024, 1024, 8192),
                        (2048, 8192, 512), (16384, 4096, 256)]
    ]  # fmt: skip
    return tuple(problems)


GRID = _grid()
FITTED = GRID[0::2]  # the plan is fitted on these
HELD_OUT = GRID[1::2]  # and judged apart on these

# the configurations the fit races per problem (python -m tmm_course.perf.bench fit)
CANDIDATES = {
    "few rows": {
        "grouped": (
            Config(16, 64, 128, num_warps=4, num_stages=4, split_k=4),
            Config(16, 128, 128, num_warps=4, num_stages=4, split_k=2),
            Config(32, 64, 128, num_warps=4, num_stages=4, split_k=4),
            Config(64, 64, 128, num_warps=4, num_stages=4, split_k=2),
            Config(64, 64, 128, num_warps=4, num_stages=4),
            Config(64, 128, 64, num_warps=4, num_stages=4, split_k=4),
            Config(32, 128, 128, num_warps=4, num_stages=4),
            # few columns: the same shapes turned around
            Config(64, 16, 128, num_warps=4, num_stages=4, split_k=4),
            Config(128, 16, 128, num_warps=4, num_stages=4, split_k=2),
            Config(64, 32, 128, num_warps=4, num_stages=4, split_k=4),
            Config(128, 64, 64, num_warps=4, num_stages=4, split_k=4),
        ),
        "persistent_tma": (
            # the product turned around (C^T = B^T A^T): the few rows on the narrow side of
            # the tensor cores' instruction, a last partial wave shared out in K-slices
            Config(16, 64, 128, num_warps=4, num_stages=5, split_tail=True, swap_ab=True),
            Config(16, 128, 128, num_warps=4, num_stages=4, split_tail=True, swap_ab=True),
            Config(32, 128, 128, num_warps=4, num_stages=4, split_tail=True, swap_ab=True),
            Config(128, 128, 64, num_warps=8, num_stages=4, split_tail=True, swap_ab=True),
            # few columns, or a hundred rows and more, as they are
            Config(64, 64, 128, num_warps=4, num_stages=4, split_tail=True),
            Config(128, 64, 64, num_warps=4, num_stages=4, split_tail=True),
        ),
    },
    "middle": {
        "grouped": (
            Config(64, 64, 64, num_warps=4, num_stages=4, group_m=4),
            Config(64, 128, 64, num_warps=4, num_stages=4),
            Config(128, 64, 64, num_warps=4, num_stages=4),
            Config(128, 128, 64, num_warps=8, num_stages=4),
            Config(64, 64, 128, num_warps=4, num_stages=3, split_k=2),
            Config(128, 128, 64, num_warps=8, num_stages=4, split_k=2),
        ),
        "persistent_tma": (
            Config(64, 128, 64, num_warps=4, num_stages=4),
            Config(128, 128, 64, num_warps=8, num_stages=4),
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True),
            Config(256, 128, 64, num_warps=8, num_stages=3, subtile=True),
            # a last, partial wave of tiles shared out in K-slices
            Config(128, 128, 64, num_warps=8, num_stages=4, split_tail=True),
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True, split_tail=True),
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True, warp_specialize=True),
        ),
    },
    "large": {
        "grouped": (
            Config(128, 256, 64, num_warps=8, num_stages=4),
            Config(128, 128, 64, num_warps=8, num_stages=4),
            Config(128, 256, 32, num_warps=8, num_stages=5),
        ),
        "persistent_tma": (
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True),
            Config(128, 256, 64, num_warps=8, num_stages=4, subtile=True),
            Config(128, 128, 64, num_warps=8, num_stages=4),
            Config(256, 128, 64, num_warps=8, num_stages=3, subtile=True),
            Config(128, 128, 64, num_warps=8, num_stages=4, split_tail=True),
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True, split_tail=True),
            Config(128, 256, 64, num_warps=8, num_stages=4, subtile=True, split_tail=True),
            # warps that only load, beside warps that only compute
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True, warp_specialize=True),
            Config(
                128,
                256,
                64,
                num_warps=8,
                num_stages=3,
                subtile=True,
                split_tail=True,
                warp_specialize=True,
            ),
        ),
    },
}


def family(problem: Problem) -> str:
    """The part of the grid a problem stands for."""
    m, n, k = problem.m, problem.n, problem.k
    if problem.b_layout == "col":
        return "B column-major"
    if min(m, n) <= 512 and max(m, n) >= 4096:
        return "few rows or columns"
    if k <= 256 and min(m, n) >= 4096:
        return "small K"
    if m == n == k:
        return "square"
    if any(x % 8 for x in (m, n, k)):
        return "odd sizes"
    return "rectangular"


def size_class(m: int, n: int, k: int) -> str:
    """Which family of CANDIDATES suits a product's shape."""
    if min(m, n) <= 128:
        return "few rows"
    if min(m, n) <= 1024 or m * n <= 2048 * 2048:
        return "middle"
    return "large"
