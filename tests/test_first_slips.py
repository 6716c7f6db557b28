"""The slips of a first launch get a sentence that names the slip and the fix, in a notebook
(tmm_course.hints) and inside a check alike; an out= that overlaps an input is refused."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from conftest import on_interpreter

import tmm_course
from tmm_course import hints
from tmm_course.backend import GPU, INTERPRETER
from tmm_course.capstone import matmul_fast
from tmm_course.check import check_matmul
from tmm_course.kernels import matmul
from tmm_course.kernels.making_fast import ordered_matmul
from tmm_course.kernels.pitfalls import correct_kernel, launcher
from tmm_course.validate import KernelInputError

TRITON = Path(triton.__file__).parent


@triton.jit
def _add_one(x_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def raised(launch) -> BaseException:
    with pytest.raises(Exception) as caught:
        launch()
    return caught.value


def triton_says(words: str) -> bool:
    """Whether this Triton's own source has these words (its messages are its sources')."""
    files = [*TRITON.glob("runtime/*.py"), *TRITON.glob("backends/nvidia/driver.*")]
    # a C message may be split over two literals: "... from Triton "\n "(cpu tensor?)"
    return any(words in re.sub(r'"\s*\n\s*"', "", f.read_text(errors="replace")) for f in files)


@on_interpreter
def test_a_launch_without_a_grid_is_named_on_the_interpreter(monkeypatch):
    from triton.runtime import interpreter

    x = torch.zeros(16)
    error = raised(lambda: _add_one(x, 16, B=16))
    assert hints.NO_GRID in str(error) and hints.explain(error, INTERPRETER) == hints.NO_GRID
    # the same before any kernel ran, when Triton's own words would be others ('grid_idx')
    monkeypatch.delattr(interpreter.interpreter_builder, "grid_idx", raising=False)
    assert hints.NO_GRID in str(raised(lambda: _add_one(x, 16, B=16)))
    assert "kernel[grid](...)" in hints.NO_GRID
    _add_one[(1,)](x, 16, B=16)  # with a grid, as ever
    assert x.tolist() == [1.0] * 16


def test_a_launch_without_a_grid_is_named_on_a_gpu():
    words = "Cannot call @triton.jit'd outside of the scope of a kernel"
    assert triton_says(words)
    assert hints.explain(RuntimeError(words), GPU) == hints.NO_GRID


@on_interpreter
def test_numpy_arrays_and_lists_given_to_a_kernel_are_named():
    x = np.zeros(16, dtype=np.float32)
    error = raised(lambda: _add_one[(1,)](x, 16, B=16))
    assert hints.explain(error, INTERPRETER) == hints.NUMPY_ARRAY
    assert "torch.from_numpy(x)" in hints.NUMPY_ARRAY
    error = raised(lambda: _add_one[(1,)]([0.0] * 16, 16, B=16))
    assert hints.explain(error, INTERPRETER) == hints.PYTHON_LIST
    with pytest.raises(KernelInputError, match=r"a is a ndarray, expected a torch\.Tensor"):
        matmul(x.reshape(4, 4), torch.zeros(4, 4))  # the course's launchers say it themselves


def test_a_cpu_tensor_given_to_a_gpu_kernel_is_named():
    words = "cannot be accessed from Triton (cpu tensor?)"
    assert triton_says(words)
    error = ValueError(f"Pointer argument (at 0) {words}")
    assert hints.explain(error, GPU) == hints.WRONG_DEVICE
    elsewhere = torch.zeros(4, 4, device="meta")
    with pytest.raises(KernelInputError, match=r"Fix: a = a.to\(tmm_course.DEVICE\)"):
        matmul(elsewhere, elsewhere)


def _no_grid(a, b, c):
    correct_kernel(a, b, c, a.shape[0], b.shape[1], a.shape[1], *a.stride(), *b.stride(),
                   *c.stride(), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)  # fmt: skip


def _numpy_a(a, b, c):
    launcher(correct_kernel)(a.cpu().numpy(), b, c)


@on_interpreter
@pytest.mark.parametrize(("fn", "sentence"), [(_no_grid, hints.NO_GRID),
                                              (_numpy_a, hints.NUMPY_ARRAY)])  # fmt: skip
def test_a_check_names_the_slip_too(fn, sentence):
    result = check_matmul(fn)
    assert not result.passed and result.cases[0].code == "crashed"
    assert sentence in result.cases[0].problem
    assert result.primary.message == sentence  # the slip heads the verdict, not "read the error"


def _square(n: int = 64) -> torch.Tensor:
    return torch.randn(n, n, device=tmm_course.DEVICE)


@pytest.mark.parametrize("launch", [matmul, ordered_matmul, matmul_fast])
def test_an_out_that_overlaps_an_input_is_refused(launch):
    a, b = _square(), _square()
    for out, name in ((a, "a"), (b, "b"), (a.t(), "a")):
        with pytest.raises(KernelInputError, match=f"out shares memory with {name}"):
            launch(a, b, out=out)
    out = torch.empty(64, 64, device=tmm_course.DEVICE)
    assert launch(a, b, out=out) is out  # an out of its own is fine
    if launch is matmul_fast:  # a call shaped like that one goes straight to the kernel
        with pytest.raises(KernelInputError, match="out shares memory with a"):
            launch(a, b, out=a)


def test_columns_of_one_buffer_side_by_side_do_not_overlap():
    from tmm_course import validate

    buf = torch.zeros(8, 16)
    validate.no_overlap(buf[:, 8:], a=buf[:, :8])  # interleaved rows, no shared element
    with pytest.raises(KernelInputError):
        validate.no_overlap(buf[:, 4:12], a=buf[:, :8])


@on_interpreter
def test_a_descriptor_over_a_transposed_view_is_named_in_a_notebook_and_a_check():
    from triton.tools.tensor_descriptor import TensorDescriptor

    from tmm_course.check import check_descriptor_matmul

    w = torch.randn(64, 32).half()
    error = raised(lambda: TensorDescriptor.from_tensor(w.t(), [32, 16]))
    assert "strides must be 16-byte aligned" in str(error)  # Triton's words: not the cause
    assert hints.explain(error, INTERPRETER) == hints.DESCRIPTOR_STRIDES
    lesson = (Path(__file__).parents[1] / "notebooks" / "07_persistent_tma.ipynb").read_text()
    assert "A transposed view will not do" in lesson  # what lesson 7 says before its exercise

    def over_a_view(a, w, c):  # w turned by a view rather than a copy
        TensorDescriptor.from_tensor(w.t(), [16, 16])

    result = check_descriptor_matmul(over_a_view)
    assert result.cases[0].code == "crashed"
    assert hints.DESCRIPTOR_STRIDES in result.cases[0].problem
    assert result.primary.message == hints.DESCRIPTOR_STRIDES


@triton.jit
def _untransposed_dot(x_ptr, out_ptr, B: tl.constexpr, C: tl.constexpr):
    rows, cols = tl.arange(0, B), tl.arange(0, C)
    tile = tl.load(x_ptr + rows[:, None] * C + cols[None, :])  # [B, C]
    tl.store(out_ptr + rows[:, None] * B + rows[None, :], tl.dot(tile, tile))  # [B, C] @ [B, C]


def test_a_dot_of_tiles_that_do_not_chain_is_named():
    x = torch.zeros(16, 32, device=tmm_course.DEVICE)
    out = torch.zeros(16, 16, device=tmm_course.DEVICE)
    with pytest.raises(Exception) as caught:  # Triton's kind of error differs by version
        _untransposed_dot[(1,)](x, out, B=16, C=32)
    assert hints.explain(caught.value, tmm_course.BACKEND) == hints.DOT_SHAPES
