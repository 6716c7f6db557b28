"""tmm_course: the package behind the tiled-matmul-in-Triton notebooks.

Importing it chooses the backend before any kernel is decorated: compiled Triton on a CUDA
GPU, Triton's interpreter on the CPU otherwise (``TMM_BACKEND=interpreter`` forces it).
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TypeVar

import torch

from tmm_course import backend as _backend

BACKEND: str = _backend.choose(os.environ, torch.cuda.is_available)
_backend.apply(BACKEND)
_backend.remember(BACKEND)
_backend.require_fresh_triton(BACKEND, sys.modules)
_backend.autotune_by_the_clock(BACKEND)
_backend.skip_dead_overflow_checks()
DEVICE: torch.device = torch.device(_backend.device_for(BACKEND))

from tmm_course import environment as _environment  # noqa: E402
from tmm_course import hints as _hints  # noqa: E402
from tmm_course import ipython as _ipython  # noqa: E402
from tmm_course import sizes as _sizes  # noqa: E402

__all__ = ["BACKEND", "DEVICE", "EnvironmentWarning", "environment", "per_backend", "report"]
__version__ = "0.1.0"

T = TypeVar("T")


class EnvironmentWarning(UserWarning):
    """A known-bad library or hardware combination for this course."""


def environment() -> _environment.Environment:
    """Backend, device, GPU and versions of this machine, with known problems."""
    return _environment.collect(BACKEND, str(DEVICE))


def report() -> _environment.Environment:
    """Print the environment report and return it."""
    env = environment()
    print(env)
    return env


def per_backend(*, cpu: T, gpu: T) -> T:
    """Pick a size once per backend: ``n = per_backend(cpu=64, gpu=4096)``."""
    return _sizes.per_backend(BACKEND, cpu=cpu, gpu=gpu)


def _warn_known_problems() -> None:
    for problem in environment().problems:
        if problem.severity == "warning":
            warnings.warn(str(problem), EnvironmentWarning, stacklevel=3)


_warn_known_problems()
_hints.install_ipython_hint(BACKEND)
_hints.guard_gridless_calls(BACKEND)
_ipython.show_figures_inline()
