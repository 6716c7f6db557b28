"""Lesson 4: the matmul kernel against a float64 reference on every shape, stride and dtype;
the K-loop frames add up the way the loop does; bad input raises clear errors."""

from __future__ import annotations

import pytest
import torch

import tmm_course
from tmm_course.kernels.matmul import matmul, matmul_kloop_frames
from tmm_course.numerics import error, tolerance
from tmm_course.validate import KernelInputError

SHAPES = {  # (M, N, K) with the default 64 x 64 x 32 blocks
    "square": (64, 64, 64),
    "ragged M": (65, 64, 64),
    "ragged N": (64, 65, 64),
    "ragged K": (64, 64, 65),
    "1x1x1": (1, 1, 1),
    "tall": (300, 3, 40),
    "skinny": (3, 300, 40),
    "K < BLOCK_K": (64, 64, 7),
    "all ragged": (100, 70, 90),
}
GPU_ONLY = pytest.mark.skipif(tmm_course.BACKEND != "gpu", reason="bfloat16 needs a GPU")
DTYPES = [
    pytest.param(torch.float32, "ieee", id="fp32-ieee"),
    pytest.param(torch.float32, "tf32", id="fp32-tf32"),
    pytest.param(torch.float16, "tf32", id="fp16"),
    pytest.param(torch.bfloat16, "tf32", id="bf16", marks=GPU_ONLY),
]


def operands(m, n, k, dtype, layout="contiguous"):
    device = tmm_course.DEVICE
    if layout == "transposed":
        a = torch.randn(k, m, device=device).to(dtype).t()
        b = torch.randn(n, k, device=device).to(dtype).t()
    elif layout == "sliced":
        a = torch.randn(2 * m, k + 5, device=device).to(dtype)[::2, 3 : k + 3]
        b = torch.randn(k, 2 * n + 1, device=device).to(dtype)[:, 1::2]
    else:
        a = torch.randn(m, k, device=device).to(dtype)
        b = torch.randn(k, n, device=device).to(dtype)
    return a, b


def poisoned(m, n, dtype):
    return torch.full((m, n), float("nan"), dtype=dtype, device=tmm_course.DEVICE)


@pytest.mark.parametrize(("dtype", "precision"), DTYPES)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_matches_float64_reference(shape, dtype, precision):
    m, n, k = shape
    a, b = operands(m, n, k, dtype)
    c = matmul(a, b, precision=precision, out=poisoned(m, n, dtype))
    assert error(c, a, b) <= tolerance(dtype, tmm_course.BACKEND, precision)


@pytest.mark.parametrize(("dtype", "precision"), DTYPES)
@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_any_strides(layout, dtype, precision):
    a, b = operands(70, 50, 45, dtype, layout)
    assert not a.is_contiguous() and not b.is_contiguous()
    c = matmul(a, b, precision=precision, out=poisoned(70, 50, dtype))
    assert error(c, a, b) <= tolerance(dtype, tmm_course.BACKEND, precision)


def test_writes_into_a_strided_output(device):
    a, b = operands(33, 40, 20, torch.float32)
    out = torch.full((40, 33), float("nan"), device=device).t()
    matmul(a, b, precision="ieee", out=out)
    assert error(out, a, b) <= tolerance(torch.float32, tmm_course.BACKEND, "ieee")


def test_float32_on_the_interpreter_is_exact_whatever_the_precision():
    if tmm_course.BACKEND != "interpreter":
        pytest.skip("the interpreter ignores input_precision; a GPU does not")
    a, b = operands(64, 64, 64, torch.float32)
    assert torch.equal(matmul(a, b, precision="tf32"), matmul(a, b, precision="ieee"))


@pytest.mark.parametrize(("m", "n", "k"), [(0, 5, 3), (5, 0, 3), (0, 0, 0)])
def test_empty_output_dimensions_give_an_empty_result(device, m, n, k):
    c = matmul(torch.randn(m, k, device=device), torch.randn(k, n, device=device))
    assert c.shape == (m, n)


def test_empty_inner_dimension_gives_zeros(device):
    c = matmul(torch.randn(4, 0, device=device), torch.randn(0, 3, device=device))
    assert torch.equal(c, torch.zeros(4, 3, device=device))


def test_frames_accumulate_exactly_as_the_loop_does(device):
    a, b = operands(48, 40, 75, torch.float32)
    frames = matmul_kloop_frames(a, b, (1, 2), precision="ieee")
    assert frames.steps == 5  # cdiv(75, 16)
    previous = torch.zeros(16, 16, device=device)
    for step in range(frames.steps):
        added = frames.a_slabs[step] @ frames.b_slabs[step]
        torch.testing.assert_close(frames.acc[step], previous + added, rtol=1e-5, atol=1e-5)
        previous = frames.acc[step]


def test_last_frame_equals_the_kernel_output(device):
    a, b = operands(48, 40, 75, torch.float32)
    frames = matmul_kloop_frames(a, b, (1, 2), precision="ieee")
    c = matmul(a, b, precision="ieee", block_m=16, block_n=16, block_k=16)
    tile = c[16:32, 32:40]
    torch.testing.assert_close(frames.acc[-1][:, :8], tile, rtol=1e-6, atol=1e-6)
    assert frames.acc[-1][:, 8:].abs().max() == 0  # masked columns past N stay zero


def test_frames_show_the_ragged_k_slab_zero_filled():
    a, b = operands(16, 16, 20, torch.float32)
    frames = matmul_kloop_frames(a, b)
    assert torch.equal(frames.a_slabs[1][:, :4], a[:, 16:20])
    assert frames.a_slabs[1][:, 4:].abs().max() == 0


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "kwargs", "message"),
    [
        ((4,), (4, 4), {}, r"a has 1 dimension\(s\).*expected 2"),
        ((4, 5), (4, 6), {}, r"Inner dimensions differ: a is \(4, 5\) and b is \(4, 6\)"),
        ((4, 4), (4, 4), {"precision": "fp64"}, r"precision='fp64': expected 'tf32'"),
        ((4, 4), (4, 4), {"block_k": 8}, r"block_k=8 is not a power of two >= 16"),
        ((4, 4), (4, 4), {"block_m": 48}, r"block_m=48 is not a power of two"),
    ],
)
def test_bad_input_is_explained(device, a_shape, b_shape, kwargs, message):
    a, b = torch.randn(*a_shape, device=device), torch.randn(*b_shape, device=device)
    with pytest.raises(KernelInputError, match=message):
        matmul(a, b, **kwargs)


def test_mixed_dtypes_are_refused(device):
    a = torch.randn(4, 4, device=device)
    with pytest.raises(KernelInputError, match=r"Mixed dtypes: a is float32, b is float16"):
        matmul(a, a.half())


def test_unsupported_dtype_is_refused(device):
    a = torch.randn(4, 4, device=device, dtype=torch.float64)
    with pytest.raises(KernelInputError, match=r"a has dtype float64, expected one of: float16"):
        matmul(a, a)


def test_bfloat16_on_the_interpreter_says_what_to_use():
    if tmm_course.BACKEND != "interpreter":
        pytest.skip("bfloat16 works on a GPU")
    a = torch.randn(4, 4).bfloat16()
    with pytest.raises(KernelInputError, match=r"bfloat16.*Fix: a.to\(torch.float16\)"):
        matmul(a, a)


def test_tensors_on_different_devices_are_refused(device):
    with pytest.raises(KernelInputError, match=r"a is on .* and b on meta"):
        matmul(torch.randn(4, 4, device=device), torch.randn(4, 4, device="meta"))


def test_wrong_output_shape_is_refused(device):
    a = torch.randn(4, 4, device=device)
    with pytest.raises(KernelInputError, match=r"out is \(3, 4\).*expected \(4, 4\)"):
        matmul(a, a, out=torch.empty(3, 4, device=device))


def test_tile_outside_the_grid_is_refused(device):
    a = torch.randn(20, 20, device=device)
    with pytest.raises(KernelInputError, match=r"tile=\(2, 0\) is outside the 2 x 2 grid"):
        matmul_kloop_frames(a, a, (2, 0))


def test_error_metric_sees_nan_and_wrong_cells(device):
    a, b = operands(8, 8, 8, torch.float32)
    c = a @ b
    assert error(c, a, b) < 1e-6
    c[3, 4] += 1.0
    assert error(c, a, b) > 1e-3
    c[0, 0] = float("nan")
    assert error(c, a, b) != error(c, a, b)  # NaN


def test_error_metric_passes_a_correctly_rounded_float16_product_below_the_normal_range():
    a = torch.tensor([[1e-3]], dtype=torch.float16)
    b = torch.tensor([[2e-3]], dtype=torch.float16)
    exact = (a.double() @ b.double()).half()  # about 2e-6: a float16 subnormal, 1.2% off
    assert error(exact, a, b) <= tolerance(torch.float16, tmm_course.BACKEND)
    assert error(torch.zeros_like(exact), a, b) > tolerance(torch.float16, tmm_course.BACKEND)


def test_checks_and_judge_allow_float16_rounding_below_the_normal_range():
    from tmm_course.exercises import BY_NAME
    from tmm_course.exercises.spec import generator
    from tmm_course.numerics import allowed

    a = torch.tensor([[1e-3]], dtype=torch.float16)
    b = torch.tensor([[2e-3]], dtype=torch.float16)
    exact, scale = a.double() @ b.double(), a.double().abs() @ b.double().abs()
    bound = allowed(scale, torch.float16, tmm_course.BACKEND)
    assert ((exact.half().double() - exact).abs() <= bound).all()  # correctly rounded: passes
    assert not (exact.abs() <= bound).all()  # a zero there still fails
    # the check and the grader's judge draw their cases from one spec, with this one bound
    for case in BY_NAME["matmul"].draw(generator(0), tmm_course.BACKEND, secret=True):
        a, b = (t.double() for t in case.inputs)
        bound = allowed(a.abs() @ b.abs(), case.output.dtype, tmm_course.BACKEND)
        torch.testing.assert_close(case.atol, bound)


def test_the_smallest_k_loop_adds_one_outer_product_per_step():

    a = torch.randn(2, 5, device=tmm_course.DEVICE)
    b = torch.randn(5, 2, device=tmm_course.DEVICE)
    frames = matmul_kloop_frames(a, b, block_m=2, block_n=2, block_k=1, precision="ieee")
    assert frames.steps == 5
    previous = torch.zeros(2, 2, device=a.device)
    for step in range(5):
        expected = previous + a[:, step : step + 1] @ b[step : step + 1, :]
        torch.testing.assert_close(frames.acc[step], expected)
        previous = frames.acc[step]
    torch.testing.assert_close(frames.acc[-1], a @ b)
