"""The first kernel: exact on every length, and its launcher refuses bad input clearly."""

from __future__ import annotations

import pytest
import torch

from tmm_course.kernels import vector_add
from tmm_course.validate import KernelInputError


@pytest.mark.parametrize(("n", "block"), [(1, 16), (7, 4), (128, 128), (1000, 256), (0, 64)])
def test_matches_torch_on_ragged_and_aligned_lengths(device, n, block):
    x = torch.randn(n, device=device)
    y = torch.randn(n, device=device)
    assert torch.equal(vector_add(x, y, block=block), x + y)


def test_float16(device):
    x = torch.randn(300, device=device, dtype=torch.float16)
    assert torch.equal(vector_add(x, x, block=64), x + x)


def test_non_contiguous_input(device):
    x = torch.randn(200, device=device)[::2]
    assert torch.equal(vector_add(x, x), x + x)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block": 100}, r"block=100 is not a power of two.*Fix: block=64 or 128"),
        ({"block": 0}, r"block=0 is not a power of two"),
        ({"block": 64.0}, r"block=64.0 is not an int"),
    ],
)
def test_bad_block_sizes(device, kwargs, message):
    x = torch.ones(8, device=device)
    with pytest.raises(KernelInputError, match=message):
        vector_add(x, x, **kwargs)


def test_not_a_tensor(device):
    with pytest.raises(KernelInputError, match=r"x is a list, expected a torch.Tensor"):
        vector_add([1.0, 2.0], torch.ones(2, device=device))


def test_wrong_number_of_dimensions(device):
    with pytest.raises(
        KernelInputError, match=r"x has 2 dimension\(s\) \(shape \(2, 2\)\), expected 1"
    ):
        vector_add(torch.ones(2, 2, device=device), torch.ones(2, device=device))


def test_wrong_device():
    x = torch.ones(4, device="meta")
    with pytest.raises(KernelInputError, match=r"x is on meta.*Fix: x = x.to\(tmm_course.DEVICE\)"):
        vector_add(x, x)


def test_mixed_dtypes(device):
    x = torch.ones(4, device=device)
    with pytest.raises(KernelInputError, match=r"Mixed dtypes: x is float32, y is float16"):
        vector_add(x, x.half())


def test_shape_mismatch(device):
    with pytest.raises(KernelInputError, match=r"Shapes differ: x \(4,\), y \(5,\)"):
        vector_add(torch.ones(4, device=device), torch.ones(5, device=device))


def test_integer_dtype(device):
    x = torch.ones(4, device=device, dtype=torch.int64)
    with pytest.raises(KernelInputError, match=r"x has dtype int64, expected one of: float32"):
        vector_add(x, x)
