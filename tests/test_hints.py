"""Cryptic Triton errors get a plain-words explanation."""

from __future__ import annotations

from conftest import on_interpreter, run_python

from tmm_course.hints import explain


@on_interpreter
def test_kernel_decorated_before_import_is_explained():
    code = (
        "import torch, triton, triton.language as tl\n"
        "@triton.jit\n"
        "def early(x_ptr, B: tl.constexpr):\n"
        "    tl.store(x_ptr + tl.arange(0, B), 1.0)\n"
        "import tmm_course\n"
        "from tmm_course.hints import explain\n"
        "try:\n"
        "    early[(1,)](torch.zeros(4), B=4)\n"
        "except RuntimeError as e:\n"
        "    print(explain(e, tmm_course.BACKEND))\n"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert "decorated before `import tmm_course`" in out.stdout
    assert "restart the kernel" in out.stdout


def test_numpy_scalar_error_is_explained_on_interpreter_only():
    error = TypeError("only 0-dimensional arrays can be converted to Python scalars")
    assert "numpy<2.4" in explain(error, "interpreter")
    assert explain(error, "gpu") is None


def test_unrelated_errors_get_no_hint():
    assert explain(RuntimeError("out of memory"), "interpreter") is None
