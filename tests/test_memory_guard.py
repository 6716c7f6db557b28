"""The memory guard hooks this Triton's interpreter, and on one it does not know it warns
and steps aside instead of crashing every check."""

from __future__ import annotations

import pytest
from conftest import on_interpreter

from tmm_course.check import check_matmul, memory_guard
from tmm_course.kernels import pitfalls


def test_the_installed_triton_is_one_the_guard_knows():
    assert memory_guard.unsupported_reason() is None


@on_interpreter
def test_a_stray_store_is_stopped_and_named():
    result = check_matmul(
        pitfalls.launcher(pitfalls.no_store_mask_kernel), allow_course_kernels=True
    )
    assert "out_of_bounds_write" in result.codes


@on_interpreter
def test_a_correct_kernel_passes_under_the_guard():
    assert check_matmul(
        pitfalls.launcher(pitfalls.correct_kernel), allow_course_kernels=True
    ).passed


@on_interpreter
def test_an_unknown_interpreter_signature_warns_and_checks_still_run(monkeypatch):
    from triton.runtime import interpreter

    def create_masked_load(self, pointers, predicate, other, *rest):  # a renamed future API
        raise AssertionError("never called: the guard steps aside")

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_load", create_masked_load)
    memory_guard.warn_unguarded.cache_clear()
    assert "create_masked_load takes" in memory_guard.unsupported_reason()
    with (
        pytest.warns(RuntimeWarning, match="cannot hook this Triton"),
        memory_guard.only_these_tensors([]),
    ):
        pass
