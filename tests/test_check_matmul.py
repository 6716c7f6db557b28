"""check_matmul: a correct launcher passes; each classic matmul bug gets its diagnosis.

The bugs of lesson 9's kernels are covered in test_pitfalls.py; these are launcher bugs.
"""

from __future__ import annotations

import triton

from tmm_course.check import check_matmul
from tmm_course.kernels import pitfalls


def launch_correct(grid, strides=None):
    def launch(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        args = strides(a, b, c) if strides else (*a.stride(), *b.stride(), *c.stride())
        pitfalls.correct_kernel[grid(m, n)](
            a, b, c, m, n, k, *args, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32
        )

    return launch


def exact_grid(m, n):
    return triton.cdiv(m, 32), triton.cdiv(n, 32)


def test_correct_launcher_passes():
    result = check_matmul(launch_correct(exact_grid), allow_course_kernels=True)
    assert result.passed, str(result)


def test_untouched_exercise_is_not_implemented():
    def todo(a, b, c):
        raise NotImplementedError

    assert check_matmul(todo).codes == ["not_implemented"]


def test_contiguous_only_launcher_ignores_strides():
    def contiguous(a, b, c):
        k, n = a.shape[1], b.shape[1]
        return k, 1, n, 1, n, 1

    result = check_matmul(launch_correct(exact_grid, contiguous), allow_course_kernels=True)
    assert "ignores_strides" in result.codes or "out_of_bounds_write" in result.codes
    assert all(c.passed for c in result.cases if not c.strided and c.code != "skipped")


def test_floor_grid_leaves_cells_unwritten():
    floor = lambda m, n: (max(1, m // 32), max(1, n // 32))
    assert "unwritten" in check_matmul(launch_correct(floor), allow_course_kernels=True).codes


def test_swapped_strides_skip_the_long_k_probe():
    result = check_matmul(
        pitfalls.launcher(pitfalls.swapped_strides_kernel), allow_course_kernels=True
    )
    assert "transposed" in result.codes
    # the long-K probe would stray far outside A: it only runs once everything else passes
    assert result.cases[-2].code == "skipped"


def test_float16_accumulator_is_precision_even_when_a_gpu_refuses_float32():
    result = check_matmul(
        pitfalls.launcher(pitfalls.fp16_accumulator_kernel), allow_course_kernels=True
    )
    assert result.primary.code == "precision", str(result)
    refused = [c for c in result.cases if c.code in ("crashed", "gpu_would_reject")]
    assert all(c.label.endswith("float32") for c in refused)
    assert set(result.codes) <= {"precision", "crashed", "gpu_would_reject"}
