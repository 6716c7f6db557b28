"""What a check costs on the interpreter: each case runs the learner's kernels once (the launcher
is called with its launches noted and not run, and the check's replay is the only run), and a
correct kernel that is slow there still gets its verdict within the limits."""

from __future__ import annotations

import tmm_course  # chooses the backend first

# isort: split
import time
from dataclasses import replace
from pathlib import Path

import bug_bank
import pytest
import torch
import triton
import triton.language as tl

from tmm_course.check import time_limit
from tmm_course.check.engine import run_exercise
from tmm_course.exercises import vector_add

INTERPRETER = tmm_course.BACKEND == "interpreter"
VECTOR = replace(vector_add.EXERCISE, cases=lambda g, b, *_: vector_add.EXERCISE.cases(g, b)[:3])


@pytest.fixture
def launches_run(monkeypatch) -> list[int]:
    """How many launches the interpreter ran, counted where it runs every one."""
    from triton.runtime import interpreter

    count = [0]
    run = interpreter.GridExecutor.__call__

    def counted(self, *args, **kwargs):
        count[0] += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(interpreter.GridExecutor, "__call__", counted)
    return count


@pytest.mark.skipif(not INTERPRETER, reason="counts the interpreter's launches")
def test_a_correct_kernel_is_run_once_per_case(launches_run):
    result = run_exercise(VECTOR, bug_bank.add())
    assert result.passed, result
    assert launches_run[0] == len(result.cases) == 3


def doubled_between_launches(x, y, out):
    """A launcher that doubles, on the host, what its first kernel stored before its second
    kernel copies it out: its output is twice the sum, though the kernels alone are right."""
    n = out.numel()
    total = torch.empty_like(out)
    bug_bank.add_kernel[(triton.cdiv(n, 256),)](x, y, total, n, BLOCK=256)
    total.mul_(2)
    bug_bank.add_kernel[(triton.cdiv(n, 256),)](total, torch.zeros_like(out), out, n, BLOCK=256)


def test_host_work_between_two_launches_is_judged_as_the_launcher_did_it():
    result = run_exercise(VECTOR, doubled_between_launches)
    assert not result.passed, result


@triton.jit
def one_cell_kernel(x_ptr, y_ptr, out_ptr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i) + tl.load(y_ptr + i))


def one_program_per_cell(x, y, out):
    one_cell_kernel[(out.numel(),)](x, y, out)


@pytest.mark.skipif(not time_limit.can_limit(), reason="no timer signal here")
@pytest.mark.skipif(not INTERPRETER, reason="an interpreted kernel's limits")
def test_a_correct_kernel_passes_on_a_machine_a_hundred_times_slower(monkeypatch):
    """One program per cell: a thousand short programs, minutes of CPU time at a hundredth of
    this machine's speed (a clock that runs a hundred times faster), and still the verdict."""
    cpu = time.thread_time
    monkeypatch.setattr(time, "thread_time", lambda: 100 * cpu())
    many = replace(vector_add.EXERCISE, cases=lambda g, b, *_: [vector_add.case(1000, b, g)])
    result = run_exercise(many, one_program_per_cell)
    assert result.passed, result


def test_the_readme_states_the_limits():
    text = " ".join(Path(__file__).parents[1].joinpath("README.md").read_text().split())
    assert f"{time_limit.PROGRAM_SECONDS:g} s of CPU time" in text
    assert f"{time_limit.CASE_OPERATIONS:,} loads and stores" in text
