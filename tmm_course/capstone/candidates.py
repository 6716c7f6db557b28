"""The configurations the capstone's fit races per problem, by the shape's size class."""

from __future__ import annotations

import dataclasses

from tmm_course.capstone.config import Config

# the configurations the fit races per problem (python -m tmm_course.perf.bench fit), among
# them Inductor's (torch/_inductor/template_heuristics/triton.py) and one wave of deep split-K
# slices for few rows. Each keeps its place by the shipped fit: the best of its kernel on some
# fitted problem, or what the plan chooses for a problem of the grid
CANDIDATES = {
    "few rows": {
        "grouped": (
            Config(16, 128, 256, num_warps=4, num_stages=3, split_k=4),  # up to 16 rows
            # few columns: the same shapes turned around
            Config(64, 32, 128, num_warps=4, num_stages=4, split_k=4),
            # one wave of deep slices (Inductor's small-M tile, and its 64x64x128 s5)
            Config(64, 64, 128, num_warps=4, num_stages=5, split_k=2),
            Config(64, 128, 128, num_warps=4, num_stages=4, split_k=2),  # few columns
            Config(64, 64, 128, num_warps=4, num_stages=5),  # Inductor's, whole K
            Config(64, 64, 128, num_warps=4, num_stages=4, split_k=2),  # 64 rows
            Config(64, 16, 128, num_warps=4, num_stages=4, split_k=2),  # one or a few columns
            Config(16, 64, 256, num_warps=4, num_stages=4),  # up to 16 rows, whole K
        ),
        "persistent_tma": (
            # a last partial wave shared out in K-slices
            Config(64, 64, 128, num_warps=4, num_stages=4, split_tail=True),
            Config(128, 64, 64, num_warps=4, num_stages=6, split_tail=True),
            Config(64, 128, 128, num_warps=4, num_stages=4, split_tail=True),
            Config(64, 128, 128, num_warps=4, num_stages=4),  # the same, a whole last wave
        ),
    },
    "middle": {
        "grouped": (
            Config(64, 128, 64, num_warps=4, num_stages=4),
            Config(128, 64, 64, num_warps=4, num_stages=4),
            Config(128, 128, 64, num_warps=8, num_stages=4),
            Config(128, 128, 64, num_warps=8, num_stages=4, split_k=2),
            Config(64, 128, 128, num_warps=4, num_stages=4),  # deep K (Inductor's)
            Config(64, 64, 64, num_warps=4, num_stages=6),  # one wave, deep pipeline
            Config(128, 128, 64, num_warps=8, num_stages=5),  # Inductor's
            Config(64, 64, 128, num_warps=4, num_stages=5),  # Inductor's
            Config(64, 128, 64, num_warps=4, num_stages=3),  # Inductor's, at 1536^3: 3 per SM
        ),
        "persistent_tma": (
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True),
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True, split_tail=True),
            Config(128, 64, 64, num_warps=4, num_stages=6),  # one wave, deep pipeline
            Config(64, 64, 64, num_warps=4, num_stages=6),
            Config(64, 128, 128, num_warps=4, num_stages=4, split_tail=True),  # deep K
            Config(64, 128, 128, num_warps=4, num_stages=4),  # the same, a whole last wave
            Config(128, 128, 64, num_warps=4, num_stages=5),  # Inductor's persistent
            Config(128, 128, 64, num_warps=4, num_stages=5, split_tail=True),
            Config(128, 64, 64, num_warps=4, num_stages=8),  # one wave, deeper still
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
            Config(128, 256, 64, num_warps=8, num_stages=3, subtile=True, split_tail=True),
            Config(128, 256, 64, num_warps=8, num_stages=4, subtile=True, split_tail=True),
            Config(128, 128, 64, num_warps=4, num_stages=5),  # Inductor's persistent
        ),
    },
}

# the candidates above that the shipped fit has not timed (``bench refit`` times them): none
NEW: frozenset[tuple[str, Config]] = frozenset()


def size_class(m: int, n: int) -> str:
    """Which family of CANDIDATES suits an m x n product (K does not choose)."""
    if min(m, n) <= 128:
        return "few rows"
    if min(m, n) <= 1024 or m * n <= 2048 * 2048:
        return "middle"
    return "large"


def for_float32(config: Config) -> Config:
    """float32 tiles take twice the shared memory per pipeline stage: halve BLOCK_K."""
    return dataclasses.replace(config, block_k=max(16, config.block_k // 2))


def candidates_for(m: int, n: int, k: int, dtype: str) -> list[tuple[str, Config]]:
    """The (path, config) pairs the fit tries on m x n x k of ``dtype``: its size class's."""
    return [(path, for_float32(c) if dtype == "float32" else c)
            for path, configs in CANDIDATES[size_class(m, n)].items() for c in configs]  # fmt: skip
