"""The capstone's tuning sweeps: the tile configurations tried per problem and kernel
(``python -m tmm_course.perf.bench sweep``; its H200 run chose the rules of
:mod:`tmm_course.capstone.plans`)."""

from __future__ import annotations

from tmm_course.capstone.config import Config
from tmm_course.capstone.problems import Problem

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
