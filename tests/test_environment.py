"""Known-bad combinations are found from faked versions and explained with a fix."""

from __future__ import annotations

import pytest
from conftest import on_interpreter, run_python

import tmm_course
from tmm_course.environment import Environment, find_problems, version_tuple


def codes(problems):
    return [p.code for p in problems]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.6.0", (3, 6, 0)),
        ("2.4.0rc1", (2, 4, 0)),
        ("3.7.0+git1a2b3c", (3, 7, 0)),
        ("2.11", (2, 11)),
    ],
)
def test_version_tuple(text, expected):
    assert version_tuple(text) == expected


def test_old_triton_with_new_numpy_on_interpreter_is_flagged():
    (problem,) = [
        p
        for p in find_problems("interpreter", "3.6.0", "2.4.1", None)
        if p.code == "interpreter_numpy"
    ]
    assert "only 0-dimensional arrays" in problem.message
    assert "numpy<2.4" in problem.fix
    assert problem.severity == "warning"


@pytest.mark.parametrize(
    ("triton", "numpy"), [("3.6.0", "2.3.5"), ("3.7.0", "2.4.0"), ("3.9.0", "2.4.6")]
)
def test_working_triton_numpy_pairs_are_not_flagged(triton, numpy):
    assert "interpreter_numpy" not in codes(find_problems("interpreter", triton, numpy, None))


def test_old_triton_with_new_numpy_is_fine_on_gpu():
    assert codes(find_problems("gpu", "3.6.0", "2.4.1", (9, 0), "NVIDIA H200")) == []


def test_bf16_note_on_interpreter_only():
    (note,) = [p for p in find_problems("interpreter", "3.9.0", "2.4.6", None)]
    assert note.code == "interpreter_bf16" and note.severity == "note"
    assert "float16" in note.fix


def test_gpu_before_ampere_is_noted_with_what_it_leaves_out():
    (problem,) = find_problems("gpu", "3.6.0", "2.3.0", (7, 5), "Tesla T4")
    assert problem.code == "before_ampere" and problem.severity == "note"
    assert "Tesla T4 has compute capability 7.5, before Ampere" in problem.message
    for skipped in ("bfloat16", "TF32", "pipelining", "TMA"):
        assert skipped in problem.message
    assert "Change runtime type" in problem.fix


def test_an_ampere_gpu_has_no_note():
    assert find_problems("gpu", "3.6.0", "2.3.0", (8, 0), "NVIDIA A100") == []


def test_report_lines_carry_message_and_fix():
    env = Environment(
        "gpu",
        "cuda",
        "Tesla T4",
        (7, 5),
        "3.12.0",
        "2.11.0",
        "3.6.0",
        "2.3.0",
        tuple(find_problems("gpu", "3.6.0", "2.3.0", (7, 5), "Tesla T4")),
    )
    text = str(env)
    assert "gpu       : Tesla T4 (compute capability 7.5)" in text
    assert "tier      : before Ampere" in text
    assert "note      : Tesla T4 has compute capability 7.5" in text and "Fix: nothing" in text


def test_report_prints_and_returns_this_machine(capsys):
    env = tmm_course.report()
    printed = capsys.readouterr().out
    assert env.backend == tmm_course.BACKEND
    for value in (env.backend, env.torch, env.triton, env.numpy, env.python):
        assert value in printed


@on_interpreter
def test_import_warns_for_old_triton_with_new_numpy():
    code = (
        "import triton, numpy\n"
        "triton.__version__ = '3.6.0'; numpy.__version__ = '2.4.1'\n"
        "import tmm_course\n"
    )
    out = run_python(code, TRITON_INTERPRET="1")  # interpreter chosen before triton's import
    assert out.returncode == 0, out.stderr
    assert "EnvironmentWarning: Triton 3.6.0's interpreter fails with numpy 2.4.1" in out.stderr
    assert "pip install 'numpy<2.4'" in out.stderr


def test_import_notes_a_gpu_before_ampere_without_warning():
    code = (
        "import torch\n"
        "torch.cuda.is_available = lambda: True\n"
        "torch.cuda.get_device_name = lambda i=0: 'Tesla T4'\n"
        "torch.cuda.get_device_capability = lambda i=0: (7, 5)\n"
        "import tmm_course\n"
        "print(tmm_course.BACKEND)\n"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "gpu"
    assert "EnvironmentWarning" not in out.stderr  # a T4 runs the course: a note, not a warning
