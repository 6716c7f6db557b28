"""Lesson 1 kernels: exact on every shape, every cell owned by exactly one program."""

from __future__ import annotations

import pytest
import torch

from tmm_course.kernels import tile_fill
from tmm_course.validate import KernelInputError

SHAPES = [(16, 16), (10, 13), (1, 1), (70, 3), (3, 70), (33, 17)]
BLOCKS = [(4, 8), (16, 16), (1, 32)]


def expected_owner(m, n, bm, bn):
    i = torch.arange(m)[:, None] // bm
    j = torch.arange(n)[None, :] // bn
    return (i * tile_fill.grid_shape(m, n, bm, bn)[1] + j).int()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("blocks", BLOCKS)
def test_fill_index_is_exact(shape, blocks):
    m, n = shape
    out = tile_fill.fill_index(m, n, *blocks).cpu()
    assert torch.equal(out, torch.arange(m * n, dtype=torch.int32).view(m, n))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("blocks", BLOCKS)
def test_every_cell_owned_by_exactly_the_program_of_its_tile(shape, blocks):
    m, n = shape
    owner = tile_fill.fill_owner(m, n, *blocks).cpu()
    assert torch.equal(owner, expected_owner(m, n, *blocks))
    gm, gn = tile_fill.grid_shape(m, n, *blocks)
    counts = torch.bincount(owner.flatten().long(), minlength=gm * gn)
    assert counts.sum() == m * n and (counts > 0).all()


@pytest.mark.parametrize("shape", SHAPES)
def test_lane_mask_marks_exactly_the_lanes_outside_c(shape):
    m, n = shape
    lanes = tile_fill.lane_mask(m, n, 8, 16).cpu()
    expected = torch.zeros_like(lanes)
    expected[:m, :n] = 1
    assert torch.equal(lanes, expected)


def test_grid_shape():
    assert tile_fill.grid_shape(10, 13, 4, 8) == (3, 2)
    assert tile_fill.grid_shape(1, 1, 64, 64) == (1, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 5, 4, 4), r"M=0: expected a positive int"),
        ((5, -1, 4, 4), r"N=-1: expected a positive int"),
        ((5, 5, 3, 4), r"block_m=3 is not a power of two"),
        ((5, 5, 4, 12), r"block_n=12 is not a power of two.*Fix: block_n=8 or 16"),
    ],
)
def test_bad_sizes_raise_clear_errors(args, message):
    with pytest.raises(KernelInputError, match=message):
        tile_fill.fill_index(*args)


def test_overlapping_tiles_are_counted_and_each_cell_keeps_one_of_its_writers():
    from tmm_course.kernels.tile_fill import overlapping_fill

    overlap = overlapping_fill(8, 10, block_m=4, block_n=4)  # tiles start 2 cells apart
    assert overlap.writers.sum() == (4 + 4 + 4 + 2) * (4 + 4 + 4 + 4 + 2)  # rows x columns inside
    assert overlap.cells_written(1) == 4 and overlap.cells_written(4) > 0
    for i in range(8):
        for j in range(10):
            pid_m, pid_n = divmod(int(overlap.owner[i, j]), 5)
            assert pid_m * 2 <= i < pid_m * 2 + 4 and pid_n * 2 <= j < pid_n * 2 + 4
