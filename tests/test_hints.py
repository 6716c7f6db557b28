"""Cryptic Triton errors get a plain-words explanation."""

from __future__ import annotations

from conftest import on_interpreter, run_python

from tmm_course.hints import explain


@on_interpreter
def test_kernel_compiled_on_a_cpu_machine_is_explained():
    # the real error of a kernel decorated without the interpreter, launched on this CPU machine
    code = (
        "import torch, triton, triton.language as tl\n"
        "@triton.jit\n"
        "def early(x_ptr, B: tl.constexpr):\n"
        "    tl.store(x_ptr + tl.arange(0, B), 1.0)\n"
        "try:\n"
        "    early[(1,)](torch.zeros(4), B=4)\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    out = run_python(code)
    assert "active drivers" in out.stdout, out.stderr
    hint = explain(RuntimeError(out.stdout.strip()), "interpreter")
    assert "decorated before `import tmm_course`" in hint and "restart the kernel" in hint


def test_triton_helpers_compiled_for_a_gpu_are_explained():
    error = RuntimeError("Cannot call @triton.jit'd outside of the scope of a kernel")
    assert "make `import tmm_course` the first import" in explain(error, "interpreter")


def test_numpy_scalar_error_is_explained_on_interpreter_only():
    error = TypeError("only 0-dimensional arrays can be converted to Python scalars")
    assert "numpy<2.4" in explain(error, "interpreter")
    assert explain(error, "gpu") is None


def test_unrelated_errors_get_no_hint():
    assert explain(RuntimeError("out of memory"), "interpreter") is None
