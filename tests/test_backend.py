"""Backend choice: compiled Triton on a GPU, the interpreter otherwise, TMM_BACKEND wins."""

from __future__ import annotations

import pytest
from conftest import on_interpreter, run_python

from tmm_course import backend

YES = lambda: True
NO = lambda: False


def test_auto_picks_gpu_when_cuda_is_available():
    assert backend.choose({}, YES) == "gpu"


def test_auto_picks_interpreter_without_cuda():
    assert backend.choose({}, NO) == "interpreter"


def test_tmm_backend_interpreter_wins_over_a_gpu():
    assert backend.choose({"TMM_BACKEND": "interpreter"}, YES) == "interpreter"


def test_tmm_backend_is_case_and_space_insensitive():
    assert backend.choose({"TMM_BACKEND": " Interpreter "}, YES) == "interpreter"


def test_triton_interpret_already_set_is_honoured():
    assert backend.choose({"TRITON_INTERPRET": "1"}, YES) == "interpreter"


def test_tmm_backend_gpu_without_cuda_explains():
    with pytest.raises(backend.BackendError, match=r"sees no CUDA GPU.*Fix: unset TMM_BACKEND"):
        backend.choose({"TMM_BACKEND": "gpu"}, NO)


def test_unknown_tmm_backend_lists_the_choices():
    with pytest.raises(backend.BackendError, match=r"'cuda' is not a backend\. Expected 'gpu'"):
        backend.choose({"TMM_BACKEND": "cuda"}, YES)


def test_apply_sets_and_clears_triton_interpret():
    env: dict[str, str] = {}
    backend.apply("interpreter", env)
    assert env == {"TRITON_INTERPRET": "1"}
    backend.apply("gpu", env)
    assert env == {}


def test_device_follows_backend():
    assert (backend.device_for("gpu"), backend.device_for("interpreter")) == ("cuda", "cpu")


@on_interpreter
def test_import_reports_interpreter_on_a_cpu_machine():
    out = run_python(
        "import tmm_course as t, os; print(t.BACKEND, t.DEVICE, os.environ['TRITON_INTERPRET'])"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["interpreter", "cpu", "1"]


def test_forced_interpreter_runs_a_kernel_decorated_after_import():
    code = (
        "import tmm_course, torch\n"
        "from tmm_course.kernels import vector_add\n"
        "x = torch.arange(5.0)\n"
        "print(tmm_course.BACKEND, vector_add(x, x, block=4).tolist())\n"
    )
    out = run_python(code, TMM_BACKEND="interpreter")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "interpreter [0.0, 2.0, 4.0, 6.0, 8.0]"


@on_interpreter
def test_an_autotuned_kernel_runs_on_the_interpreter():
    import torch
    import triton

    from tmm_course.kernels.vector_add import vector_add_kernel

    configs = [triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 8})]
    tuned = triton.autotune(configs=configs, key=["n"])(vector_add_kernel)
    x, out = torch.arange(5.0), torch.empty(5)
    tuned[lambda meta: (triton.cdiv(5, meta["BLOCK"]),)](x, x, out, 5)  # both timed, one kept
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0] and len(tuned.cache) == 1


@on_interpreter
def test_the_interpreter_skips_its_dead_overflow_checks_and_still_wraps():
    import torch
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import interpreter_builder

    assert interpreter_builder.options.sanitize_overflow is False

    @triton.jit
    def times_big(x_ptr, out_ptr):
        offs = tl.arange(0, 4)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 1_073_741_824)  # 2**30, int32

    x, out = torch.arange(4, dtype=torch.int32), torch.empty(4, dtype=torch.int32)
    times_big[(1,)](x, out)
    wrapped = (torch.arange(4, dtype=torch.int64) * 2**30 + 2**31) % 2**32 - 2**31
    assert out.tolist() == wrapped.tolist() == [0, 2**30, -(2**31), -(2**30)]


def test_bad_tmm_backend_fails_import_with_the_message():
    out = run_python("import tmm_course", TMM_BACKEND="tpu")
    assert out.returncode != 0
    assert "TMM_BACKEND='tpu' is not a backend" in out.stderr


@on_interpreter
def test_triton_imported_first_is_refused_with_the_fix():
    out = run_python("import triton.language\nimport tmm_course\n")
    assert out.returncode != 0
    assert "triton was imported before tmm_course" in out.stderr
    assert "make `import tmm_course` the first import" in out.stderr


def test_triton_imported_after_a_forced_interpreter_is_fine():
    out = run_python(
        "import os\nos.environ['TRITON_INTERPRET'] = '1'\nimport triton\nimport tmm_course\n"
    )
    assert out.returncode == 0, out.stderr
