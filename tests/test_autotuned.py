"""Lesson 6's autotuned kernel: right on any shape, tuned once per (M, N, K)."""

from __future__ import annotations

import torch

import tmm_course
from tmm_course.kernels import autotuned
from tmm_course.numerics import error, tolerance


def _operands(m: int, n: int, k: int):
    a = torch.randn(m, k, device=tmm_course.DEVICE, dtype=torch.float16)
    return a, torch.randn(k, n, device=tmm_course.DEVICE, dtype=torch.float16)


def test_the_autotuned_kernel_is_right_on_ragged_shapes():
    a, b = _operands(37, 53, 29)
    assert error(autotuned.autotuned_matmul(a, b), a, b) <= tolerance(
        torch.float16, tmm_course.BACKEND
    )


def test_a_key_is_tuned_once_and_a_new_key_again():
    a, b = _operands(40, 24, 56)
    start = autotuned.TIMED["configurations"]
    autotuned.autotuned_matmul(a, b)
    first = autotuned.TIMED["configurations"] - start
    autotuned.autotuned_matmul(a, b)
    assert autotuned.TIMED["configurations"] - start == first == len(autotuned.CONFIGS)
    autotuned.autotuned_matmul(*_operands(41, 24, 56))
    assert autotuned.TIMED["configurations"] - start == 2 * len(autotuned.CONFIGS)
    assert (40, 24, 56) in autotuned.tuned() and (41, 24, 56) in autotuned.tuned()
