"""Lessons 2 and 3: broadcast tiles, offset tiles and the strided copy, against torch."""

from __future__ import annotations

import pytest
import torch

from tmm_course.kernels import broadcast, strides
from tmm_course.kernels.strides import layouts, stride_picture
from tmm_course.validate import KernelInputError


@pytest.mark.parametrize(("m", "n"), [(1, 1), (4, 6), (33, 17), (70, 3)])
def test_broadcast_tiles_match_torch(device, m, n):
    col, row = torch.randn(m, device=device), torch.randn(n, device=device)
    assert torch.equal(broadcast.broadcast(col, row, broadcast.SUM), col[:, None] + row[None, :])
    assert torch.equal(broadcast.broadcast(col, row, broadcast.COLUMN), col[:, None].expand(m, n))
    assert torch.equal(broadcast.broadcast(col, row, broadcast.ROW), row[None, :].expand(m, n))


@pytest.mark.parametrize(("s0", "s1"), [(6, 1), (1, 4), (14, 1), (0, 1), (7, 3)])
def test_offset_tiles_are_stride_arithmetic(s0, s1):
    out = broadcast.element_offsets(5, 9, s0, s1).cpu()
    i, j = torch.arange(5)[:, None], torch.arange(9)[None, :]
    assert torch.equal(out, (i * s0 + j * s1).int())


def test_broadcast_rejects_bad_input(device):
    col = torch.ones(3, device=device)
    with pytest.raises(KernelInputError, match=r"what=7: expected COLUMN, ROW or SUM"):
        broadcast.broadcast(col, col, what=7)
    with pytest.raises(KernelInputError, match=r"Mixed dtypes"):
        broadcast.broadcast(col, col.int())
    with pytest.raises(KernelInputError, match=r"stride_0=1.5: expected an int"):
        broadcast.element_offsets(2, 2, 1.5, 1)


@pytest.mark.parametrize("name", list(layouts(4, 6)))
def test_picture_addresses_equal_tensor_stride_arithmetic(name):
    view = layouts(4, 6)[name]
    pic = stride_picture(name, view)
    i, j = torch.arange(4)[:, None], torch.arange(6)[None, :]
    expected = view.storage_offset() + i * view.stride(0) + j * view.stride(1)
    assert torch.equal(torch.from_numpy(pic.addresses), expected)
    assert pic.strides == view.stride()


def test_layouts_include_contiguous_and_non_contiguous_views():
    views = layouts(4, 6)
    assert views["row-major"].is_contiguous()
    assert not views["column-major"].is_contiguous()
    assert views["sliced view x[1::2, 1:]"].storage_offset() > 0


def views(device):
    base = torch.randn(40, 50, device=device)
    return {
        "contiguous": base[:33, :17],
        "transposed": base.t()[:17, :33],
        "sliced": base[1::3, 2::2],
        "column-major": base[:20, :30].t().contiguous().t(),
    }


@pytest.mark.parametrize("name", ["contiguous", "transposed", "sliced", "column-major"])
def test_strided_copy_is_exact_for_any_view(device, name):
    x = views(device)[name]
    assert torch.equal(strides.strided_copy(x, 8, 16), x)


def test_swapped_strides_pass_symmetric_and_fail_random(device):
    x = torch.randn(20, 20, device=device)
    symmetric = x + x.T
    assert torch.equal(strides.swapped_strides_copy(symmetric), symmetric)
    assert torch.equal(strides.swapped_strides_copy(x), x.T)
    assert not torch.equal(strides.swapped_strides_copy(x), x)


def test_strided_copy_rejects_bad_input(device):
    with pytest.raises(KernelInputError, match=r"x has 1 dimension\(s\)"):
        strides.strided_copy(torch.ones(4, device=device))
    with pytest.raises(KernelInputError, match=r"x has dtype float64"):
        strides.strided_copy(torch.ones(2, 2, device=device, dtype=torch.float64))
    with pytest.raises(KernelInputError, match=r"x is on meta"):
        strides.strided_copy(torch.ones(2, 2, device="meta"))
    with pytest.raises(KernelInputError, match=r"unless x is square"):
        strides.swapped_strides_copy(torch.ones(2, 3, device=device))
