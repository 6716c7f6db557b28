"""The checks against cheats they were not written against, and honest launchers written in
unusual ways: a verdict is what the learner's kernels store when the check launches them
again itself on fresh inputs, every buffer the launcher made refilled with poison. So an answer
computed outside a kernel fails however it reaches the output, and honest code is judged on
its kernels' values whatever else the launcher does. Each test runs a few cases of an
exercise (the engine is the one every check runs)."""

from __future__ import annotations

import tmm_course  # chooses the backend first

# isort: split
import time
from dataclasses import replace

import bug_bank
import pytest
import torch
import triton
import triton.language as tl

from tmm_course.check import time_limit
from tmm_course.check.engine import run_exercise
from tmm_course.exercises import matmul, scaled_matmul, vector_add
from tmm_course.exercises.products import PRODUCTS
from tmm_course.kernels.matmul import matmul_kernel
from tmm_course.kernels.vector_add import vector_add_kernel


def few(exercise, count: int):
    """``exercise`` with only its first ``count`` cases (a quicker check, same engine)."""
    return replace(exercise, cases=lambda gen, backend, *_: exercise.cases(gen, backend)[:count])


VECTOR = few(vector_add.EXERCISE, 3)  # n = 1, 7, 128
MATMUL = few(matmul.EXERCISE, 2)  # 64x64x64 and 16x16x16, float16


def scaled_cases(gen, backend, *_):
    return [
        scaled_matmul.case(PRODUCTS[1], scaled_matmul.ALPHA, scaled_matmul.BETA, backend, gen),
        scaled_matmul.beta_zero(scaled_matmul.ALPHA, backend, gen),
    ]


SCALED = replace(scaled_matmul.EXERCISE, cases=scaled_cases)


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def checksum_then_copy(x_ptr, y_ptr, answer_ptr, sum_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside, other=0.0)
    y = tl.load(y_ptr + offs, mask=inside, other=0.0)
    tl.atomic_add(sum_ptr, tl.sum(x + y, axis=0))  # every input "touched"
    tl.store(out_ptr + offs, tl.load(answer_ptr + offs, mask=inside), mask=inside)


@triton.jit
def add_via_the_course(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK)


@triton.jit
def fixed_k_loop(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, 1):  # one K block, whatever K is
        here = k * BK + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * sam + here[None, :] * sak,
                    mask=(offs_m[:, None] < M) & (here[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(b_ptr + here[:, None] * sbk + offs_n[None, :] * sbn,
                    mask=(here[:, None] < K) & (offs_n[None, :] < N), other=0.0)  # fmt: skip
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))  # fmt: skip


def grid_1d(n: int) -> tuple[int]:
    return (triton.cdiv(n, 16),)


def answer_as_an_argument(x, y, out):
    copy_kernel[grid_1d(x.numel())](x + y, out, x.numel(), BLOCK=16)


def checksum_touch(x, y, out):
    total = torch.zeros(1, device=x.device)
    checksum_then_copy[grid_1d(x.numel())](x, y, x + y, total, out, x.numel(), BLOCK=16)


_CACHE: dict[tuple, torch.Tensor] = {}


def cached(x, y, out):
    kept = _CACHE.setdefault(tuple(x.shape), torch.empty_like(x))
    kept.copy_(x + y)  # refreshed on every call, so the values are right every time
    copy_kernel[grid_1d(x.numel())](kept, out, x.numel(), BLOCK=16)


def course_kernel_renamed(x, y, out):
    my_add = vector_add_kernel
    my_add[grid_1d(x.numel())](x, y, out, x.numel(), BLOCK=16)


def course_kernel_inside(x, y, out):
    add_via_the_course[grid_1d(x.numel())](x, y, out, x.numel(), BLOCK=16)


def course_matmul_renamed(a, b, c):
    (m, k), n = a.shape, b.shape[1]
    mine = matmul_kernel
    mine[(triton.cdiv(m, 32), triton.cdiv(n, 32))](
        a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), PRECISION="ieee", BLOCK_M=32,
        BLOCK_N=32, BLOCK_K=32,
    )  # fmt: skip


def matmul_answer_as_an_argument(a, b, c):
    bug_bank._move((a.float() @ b.float()).half(), c)


def one_k_block(a, b, c):
    (m, k), n = a.shape, b.shape[1]
    fixed_k_loop[(triton.cdiv(m, 32), triton.cdiv(n, 32))](
        a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), BM=32, BN=32, BK=32
    )


@pytest.mark.parametrize(
    ("launcher", "code"),
    [
        (answer_as_an_argument, "no_triton_kernel"),
        (checksum_touch, "no_triton_kernel"),
        (cached, "no_triton_kernel"),
        (course_kernel_renamed, "course_kernel"),
        (course_kernel_inside, "course_kernel"),
    ],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_a_vector_add_cheat_fails_with_its_cause(launcher, code):
    result = run_exercise(VECTOR, launcher)
    assert not result.passed and result.codes[0] == code, result


def test_a_copy_after_a_checksum_of_every_input_is_named_as_not_computed_by_the_kernel():
    result = run_exercise(VECTOR, checksum_touch)
    assert "launched your kernels again itself, on fresh inputs" in result.primary.message


@pytest.mark.parametrize(
    ("launcher", "code"),
    [
        (course_matmul_renamed, "course_kernel"),
        (matmul_answer_as_an_argument, "no_triton_kernel"),
    ],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_a_matmul_cheat_fails_with_its_cause(launcher, code):
    result = run_exercise(MATMUL, launcher)
    assert not result.passed and result.codes[0] == code, result


def test_the_courses_matmul_kernel_pasted_with_its_names_changed_is_the_courses(tmp_path):
    import importlib
    import re
    import sys

    from tmm_course.source import source_of

    source = source_of(matmul_kernel).replace("def matmul_kernel(", "def my_kernel(")
    for old, new in {"a_ptr": "x", "b_ptr": "y", "c_ptr": "z", "acc": "total"}.items():
        source = re.sub(rf"\b{old}\b", new, source)
    (tmp_path / "pasted.py").write_text("import triton\nimport triton.language as tl\n\n" + source)
    sys.path.insert(0, str(tmp_path))
    try:
        pasted = importlib.import_module("pasted").my_kernel
    finally:
        sys.path.remove(str(tmp_path))

    def launcher(a, b, c):
        (m, k), n = a.shape, b.shape[1]
        pasted[(triton.cdiv(m, 32), triton.cdiv(n, 32))](
            a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), PRECISION="ieee",
            BLOCK_M=32, BLOCK_N=32, BLOCK_K=32,
        )  # fmt: skip

    result = run_exercise(few(matmul.EXERCISE, 1), launcher)
    assert result.codes[:1] == ["course_kernel"], result
    assert "my_kernel is the course's tmm_course.kernels" in result.primary.message


def test_a_k_loop_of_fixed_length_fails_on_values():
    result = run_exercise(MATMUL, one_k_block)  # K = 64 needs two blocks of 32
    assert not result.passed and result.codes[0] == "wrong_values", result


def honest_scaled(a, b, c, alpha, beta):
    """float(alpha), a branch on beta == 0, a grid helper, no_grad, an assert, a print."""
    assert a.shape[1] == b.shape[0], "inner sizes differ"
    inner = bug_bank.mm(scaled=True)
    with torch.no_grad():
        if beta == 0:
            inner(a, b, c, float(alpha), 0.0)
        else:
            inner(a, b, c, float(alpha), float(beta))
    print(c[:2, :2])


def test_an_honest_but_unusual_scaled_launcher_passes_on_its_values(capsys):
    result = run_exercise(SCALED, honest_scaled)
    assert result.passed, result
    assert "tensor(" in capsys.readouterr().out  # the print ran, on the check's output


def test_an_honest_launcher_with_a_grid_helper_and_a_copy_in_place_passes():
    def launcher(a, b, c):
        bug_bank.mm(copies=bug_bank.in_place_copy)(a, b, c)

    assert run_exercise(MATMUL, launcher).passed


@triton.jit
def spin_kernel(out_ptr, n, BLOCK: tl.constexpr):
    left = n
    while left > 0:
        left - BLOCK  # never assigned: the loop never ends
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


@triton.jit
def cell_kernel(x_ptr, y_ptr, out_ptr, n):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i) + tl.load(y_ptr + i))


def spinning(x, y, out):
    spin_kernel[(1,)](out, x.numel(), BLOCK=16)


def one_program_per_cell(x, y, out):
    cell_kernel[(x.numel(),)](x, y, out, x.numel())


def a_fixed_grid(x, y, out):
    copy_kernel[(400,)](x, out, x.numel(), BLOCK=16)  # 20x20 programs whatever the size


@pytest.mark.parametrize(
    "launcher",
    [spinning, one_program_per_cell, a_fixed_grid],
    ids=["a subtraction never assigned", "one program per cell", "a fixed 20x20 grid"],
)
def test_a_launch_that_runs_past_the_limit_times_out(launcher, monkeypatch):
    monkeypatch.setattr(time_limit, "PROGRAM_SECONDS", 1.0)
    monkeypatch.setattr(time_limit, "CASE_OPERATIONS", 1000)
    slow = replace(vector_add.EXERCISE, cases=lambda g, b, *_: [vector_add.case(100_000, b, g)])
    start = time.monotonic()
    result = run_exercise(slow, launcher)
    assert time.monotonic() - start < 60, "the check ran far past its limits"
    # the case limit counts loads and stores: 400 programs of one load and one store finish
    # inside 1000 on any machine, and the check names what they left (6,400 of 100,000 cells)
    expected = ["unwritten"] if launcher is a_fixed_grid else ["timed_out"]
    assert result.codes == expected, result


assert tmm_course.BACKEND


@triton.jit
def refused_when_n_is_one(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    steps = n // (n - 1)  # n == 1 is a constant to the compiler: it divides by zero
    inside = offs < n
    total = tl.load(x_ptr + offs, mask=inside) + tl.load(y_ptr + offs, mask=inside)
    tl.store(out_ptr + offs, total + 0 * steps, mask=inside)


def test_a_kernel_that_only_a_size_one_constant_breaks_is_refused(recwarn):
    def launcher(x, y, out):
        refused_when_n_is_one[grid_1d(x.numel())](x, y, out, x.numel(), BLOCK=16)

    seven_then_one = replace(
        vector_add.EXERCISE, cases=lambda g, b, *_: [vector_add.case(n, b, g) for n in (7, 1)]
    )
    result = run_exercise(seven_then_one, launcher)
    assert result.codes == ["gpu_would_reject"], result
    assert [c.passed for c in result.cases] == [True, False]
    assert "n = 1 (constants)" in result.primary.message
