"""Lesson 6 groundwork: intensity arithmetic, the roofline, and launch order from the kernel."""

from __future__ import annotations

import numpy as np
import pytest

from tmm_course.kernels.launch_order import launch_order, tiles_fetched
from tmm_course.perf import intensity, roofline


def test_tile_intensity_for_float32_is_bm_bn_over_twice_their_sum():
    assert intensity.tile_intensity(64, 64) == 64 * 64 / (2 * 128) == 16
    assert intensity.tile_intensity(128, 64) == pytest.approx(128 * 64 / (2 * 192))


def test_ideal_traffic_counts_each_matrix_once():
    assert intensity.ideal_traffic_bytes(2, 3, 4, 4) == 4 * (2 * 4 + 4 * 3 + 2 * 3)
    assert intensity.ideal_traffic_bytes(2, 3, 4, 2, read_c=True) == 2 * (8 + 12 + 12)
    assert intensity.flops(2, 3, 4) == 48


@pytest.mark.parametrize(
    ("i", "b", "expected", "bound"),
    [(8, 80, 640, "memory"), (16, 80, 1000, "compute"), (12.5, 80, 1000, "compute")],
)
def test_roofline_lab_numbers(i, b, expected, bound):
    assert roofline.attainable(i, b) == expected
    assert roofline.bound(i, b) == bound


def test_ridge_of_the_lab():
    assert roofline.ridge(80) == 12.5


def test_row_major_order():
    assert np.array_equal(launch_order(3, 4), np.arange(12).reshape(3, 4))


def test_grouped_order_walks_groups_of_rows_column_by_column():
    order = launch_order(5, 3, group_m=2)
    assert order[:2].T.ravel().tolist() == list(range(6))  # first group, column by column
    assert order[4].tolist() == [12, 13, 14]  # the short last group
    assert sorted(order.ravel().tolist()) == list(range(15))  # every tile exactly once


def test_grouping_fetches_fewer_tiles_per_wave():
    assert tiles_fetched(launch_order(16, 16), 16) == (16, 256)
    assert tiles_fetched(launch_order(16, 16, group_m=4), 16) == (64, 64)


def test_tiled_traffic_counts_every_strip_each_program_reads():
    from tmm_course.perf.intensity import ideal_traffic_bytes, tiled_traffic_bytes

    # 2 x 2 programs of 64 x 64, K = 128, float32: each reads 64x128 of A and 128x64 of B
    assert tiled_traffic_bytes(128, 128, 128, 64, 64, 4) == 4 * (64 + 64) * 128 * 4 + 128 * 128 * 4
    # one program covering everything reads each element once: the ideal
    assert tiled_traffic_bytes(64, 64, 64, 64, 64, 2) == ideal_traffic_bytes(64, 64, 64, 2)
    # ragged edges still cost whole strips
    assert tiled_traffic_bytes(65, 64, 8, 64, 64, 2) == 2 * (64 + 64) * 8 * 2 + 65 * 64 * 2
