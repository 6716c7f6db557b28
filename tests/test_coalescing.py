"""Lesson 5's coalescing demonstration: sector counts, and three transposes that agree."""

from __future__ import annotations

import pytest
import torch

import tmm_course
from tmm_course.kernels import coalescing
from tmm_course.validate import KernelInputError


def test_neighbours_share_sectors_and_a_column_needs_one_each():
    assert coalescing.sectors_per_warp(1, itemsize=4) == 4  # 128 bytes
    assert coalescing.sectors_per_warp(1, itemsize=2) == 2
    assert coalescing.sectors_per_warp(4096, itemsize=4) == 32
    assert coalescing.sectors_per_warp(2, itemsize=4) == 8


@pytest.mark.parametrize("shape", [(1, 1), (33, 70), (64, 64), (70, 3)])
def test_every_transpose_is_the_transpose(shape):
    x = torch.randn(*shape, device=tmm_course.DEVICE)
    for name, transpose in coalescing.TRANSPOSES.items():
        assert torch.equal(transpose(x), x.t()), name


def test_the_row_kernel_refuses_a_view_and_says_how_to_fix_it():
    x = torch.randn(8, 6, device=tmm_course.DEVICE)
    with pytest.raises(KernelInputError, match=r"expects a contiguous x. Fix: x.contiguous"):
        coalescing.row_transpose(x.t())
