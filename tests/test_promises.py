"""Every "break it on purpose" suggestion in the notebooks, made to the notebook's own solution,
gets the diagnosis the notebook promises."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from conftest import NOTEBOOKS, ROOT

import tmm_course
from tmm_course import check
from tmm_course.kernels import pitfalls
from tmm_course.teach.release import is_solution, typed_in

HEADER = (
    "import tmm_course\nimport torch\nimport triton\nimport triton.language as tl\n"
    "from tmm_course.check import *\n"
)
# the cells a solution relies on, by notebook (lesson 0's launcher launches the notebook's kernel)
SETUP = {
    "00_start_here.ipynb": "add_kernel",
}


def solution(notebook: str, defining: str = "") -> str:
    """The notebook's first solution (or the one defining ``solution_<defining>``) as typed in,
    after the code cell defining what it uses."""
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    setup = ""
    if notebook in SETUP:
        setup = next(
            "".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and f"def {SETUP[notebook]}(" in "".join(c["source"])
        ) + "\n\n"  # fmt: skip
    wanted = f"def solution_{defining}"
    found = next(c for c in cells if is_solution(c) and wanted in "".join(c["source"]))
    return setup + typed_in("".join(found["source"]))


def markdown(notebook: str) -> str:
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def load(source: str, tmp_path, name: str):
    """Import ``source`` from a file (Triton reads a kernel's source from its file)."""
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def edited(source: str, *pairs: str) -> str:
    """``source`` with each (old, new) pair of ``pairs`` replaced."""
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert old in source, f"the solution no longer contains {old!r}"
        source = source.replace(old, new)
    return source


# (notebook, the sentence that promises, the edit, the launcher, the check, promised codes)
PROMISES = [
    ("00_start_here.ipynb", "launch `n // 256` programs instead of `triton.cdiv(n, 256)`",
     ("triton.cdiv(n, 256)", "n // 256"), "add", check.check_vector_add, ["unwritten"]),
    ("01_tile_fill.ipynb", "drop the store's mask\n(`out_of_bounds_write`)", (", mask=mask)", ")"),
     "fill_owners", check.check_column_order_fill, ["out_of_bounds_write"]),
    ("01_tile_fill.ipynb", "build the grid from `M // 8` and `N // 4` (`unwritten`)",
     ("grid = (triton.cdiv(M, 8) * triton.cdiv(N, 4),)", "grid = (max(1, (M // 8) * (N // 4)),)"),
     "fill_owners", check.check_column_order_fill, ["unwritten"]),
    ("01_tile_fill.ipynb", "store\n`pid_m` instead of `pid` (`wrong_values`",
     ("+ pid  # the tile", "+ pid_m  # the tile"),
     "fill_owners", check.check_column_order_fill, ["wrong_values"]),
    ("02_broadcasting.ipynb", "reports `transposed`",
     ("x[:, None] * y[None, :]", "x[None, :] * y[:, None]"),
     "outer_product", check.check_outer_product, ["transposed"]),
    ("03_strides.ipynb",
     "it reports `ignores_strides` and, for the padded output, `out_of_bounds_write`",
     ("x.stride(0), x.stride(1), out.stride(0),\n                               out.stride(1)",
      "N, 1, N, 1"),
     "flip_rows", check.check_flip_rows, ["ignores_strides", "out_of_bounds_write"]),
    ("04_tiled_matmul.ipynb", "drop the `K` mask (`out_of_bounds_read`)",
     ("mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left)", "mask=offs_m[:, None] < M",
      "mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N)", "mask=offs_n[None, :] < N"),
     "linear_relu", check.check_linear_relu, ["out_of_bounds_read"]),
    ("04_tiled_matmul.ipynb", "swap\n`stride_x0` and `stride_x1` in `x`'s pointer tile",
     ("offs_m[:, None] * stride_x0 + offs_k[None, :] * stride_x1",
      "offs_m[:, None] * stride_x1 + offs_k[None, :] * stride_x0"),
     "linear_relu", check.check_linear_relu, ["transposed"]),
    ("04_tiled_matmul.ipynb", "or in the launch",
     ("x.stride(0), x.stride(1)", "x.stride(1), x.stride(0)"),
     "linear_relu", check.check_linear_relu, ["transposed"]),
    ("04_tiled_matmul.ipynb", "make `acc` float16",
     ("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
      "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)",
      "acc = tl.dot(x, w, acc)", "acc += tl.dot(x, w, out_dtype=tl.float16)"),
     "linear_relu", check.check_linear_relu, ["precision"]),
    ("04_tiled_matmul.ipynb", "pass `K, 1`\ninstead of `x`'s strides (`ignores_strides`)",
     ("x.stride(0), x.stride(1)", "K, 1"), "linear_relu", check.check_linear_relu,
     ["ignores_strides"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("notebook", "promise", "edit", "name", "check_fn", "codes"),
    PROMISES,
    ids=[f"{p[0][:2]}-{p[2][1][:24]}" for p in PROMISES],
)
def test_each_suggested_break_gets_the_promised_diagnosis(
    notebook, promise, edit, name, check_fn, codes, tmp_path
):
    assert promise in markdown(notebook), f"{notebook} no longer says {promise!r}"
    source = edited(solution(notebook), *edit)
    module = load(source, tmp_path, f"broken_{notebook[:2]}_{abs(hash(edit)) % 10**8}")
    if "precision" in codes and tmm_course.BACKEND == "gpu":
        codes = ["precision"]  # on a GPU the float32 case is refused too (the notebook says so)
    result = check_fn(getattr(module, name))
    assert result.primary.code == codes[0], str(result)
    assert set(codes) <= set(result.codes), str(result)


LINEAR = "The diagnoses name this exercise's own mistakes"
# (the mistake, the edit to lesson 4's linear-layer solution, the primary diagnosis)
LINEAR_PROMISES = [
    ("`w` read as if it were `K x N` (`transposed`)",
     ("offs_k[:, None] * stride_w1 + offs_n[None, :] * stride_w0",
      "offs_k[:, None] * stride_w0 + offs_n[None, :] * stride_w1"), "transposed"),
    ("the bias forgotten", ("acc + bias[None, :].to(tl.float32)", "acc"), "wrong_values"),
    ("added per row", ("bias_ptr + offs_n, mask=offs_n < N", "bias_ptr + offs_m, mask=offs_m < N",
                       "bias[None, :]", "bias[:, None]"), "wrong_values"),
    ("added after the ReLU", ("tl.maximum(acc + bias[None, :].to(tl.float32), 0.0)",
                              "tl.maximum(acc, 0.0) + bias[None, :].to(tl.float32)"),
     "wrong_values"),
    ("the ReLU left out", ("tl.maximum(acc + bias[None, :].to(tl.float32), 0.0)",
                           "acc + bias[None, :].to(tl.float32)"), "wrong_values"),
]  # fmt: skip


@pytest.mark.parametrize(("mistake", "edit", "code"), LINEAR_PROMISES, ids=lambda x: str(x)[:20])
def test_the_linear_layer_names_its_own_mistakes(mistake, edit, code, tmp_path):
    text = markdown("04_tiled_matmul.ipynb").replace("\n", " ")
    assert LINEAR in text and mistake in text[text.index(LINEAR) :]
    source = edited(solution("04_tiled_matmul.ipynb", "linear_relu"), *edit)
    module = load(source, tmp_path, f"broken_linear_{abs(hash(edit)) % 10**8}")
    result = check.check_linear_relu(module.linear_relu)
    assert result.primary.code == code, str(result)
    words = {"transposed": "w was read", "wrong_values": "matches"}[code]
    assert words in result.primary.message or "per row" in result.primary.message, str(result)


def test_lessons_0_to_4_each_have_their_promises_tested():
    with_exercises = [n.name for n in NOTEBOOKS if n.name[:2] in ("00", "01", "02", "03", "04")]
    assert sorted({p[0] for p in PROMISES}) == with_exercises


def test_lesson_7_says_the_stray_loads_are_reported():
    assert "reports the loads that stray outside `A`'s elements" in markdown("09_pitfalls.ipynb")
    launch = pitfalls.launcher(pitfalls.swapped_strides_kernel)
    result = check.check_matmul(launch, allow_course_kernels=True)
    assert result.primary.code == "transposed"
    if tmm_course.BACKEND == "interpreter":
        assert "out_of_bounds_read" in result.codes
