"""Lesson 9: every buggy kernel is caught with its code; its fixed twin passes."""

from __future__ import annotations

import json
import re

import pytest
import torch
from conftest import ROOT, on_gpu

import tmm_course
from tmm_course.check import check_fix, check_matmul
from tmm_course.kernels import pitfalls
from tmm_course.kernels.matmul import matmul_kernel
from tmm_course.kernels.pitfalls import launcher
from tmm_course.perf.pitfalls import accumulator_error_curve, loop_bound_timing
from tmm_course.source import diff, source_of


@pytest.mark.parametrize(
    ("kernel", "extra_programs", "code"),
    [
        (pitfalls.fp16_accumulator_kernel, 0, "precision"),
        (pitfalls.no_k_mask_kernel, 0, "out_of_bounds_read"),
        (pitfalls.swapped_strides_kernel, 0, "transposed"),
        (pitfalls.no_store_mask_kernel, 0, "out_of_bounds_write"),
        (pitfalls.no_store_mask_kernel, 2, "out_of_bounds_write"),
    ],
)
def test_each_pitfall_gets_its_code(kernel, extra_programs, code):
    result = check_matmul(
        launcher(kernel, extra_programs=extra_programs), allow_course_kernels=True
    )
    assert not result.passed and code in result.codes, str(result)


@pytest.mark.parametrize("extra_programs", [0, 2])
def test_the_fixed_twin_passes_even_with_extra_programs(extra_programs):
    assert check_matmul(
        launcher(pitfalls.correct_kernel, extra_programs=extra_programs), allow_course_kernels=True
    ).passed


def test_constexpr_k_twin_is_correct():
    assert check_matmul(launcher(pitfalls.static_k_kernel), allow_course_kernels=True).passed


def test_each_buggy_kernel_marks_its_bug_in_the_diff():
    for kernel in (
        pitfalls.fp16_accumulator_kernel,
        pitfalls.no_k_mask_kernel,
        pitfalls.swapped_strides_kernel,
        pitfalls.no_store_mask_kernel,
    ):
        added = [
            line
            for line in diff(pitfalls.correct_kernel, kernel).splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]
        assert any("BUG" in line for line in added), kernel


def test_block_size_that_is_not_constexpr_is_refused(device):
    with pytest.raises(Exception, match=r"arange's arguments must be of type tl\.constexpr"):
        pitfalls.runtime_block_kernel[(1,)](torch.zeros(16, device=device), 16)


def test_float16_accumulator_error_grows_with_k_and_float32_does_not():
    curve = accumulator_error_curve([16, 4096])
    fp16, fp32 = curve["float16 accumulator"], curve["float32 accumulator"]
    assert fp16[1] > 3 * fp16[0]
    assert fp32[1] < 1.5 * fp32[0] and fp32[1] < 4e-4


def test_missing_k_mask_reads_the_canary_past_k(device):
    k, pad = 70, 32
    a_buf = torch.full((32, k + pad), 1000.0, device=device)
    b_buf = torch.full((k + pad, 32), 1000.0, device=device)
    a_buf[:, :k] = 1.0
    b_buf[:k] = 1.0
    a, b = a_buf[:, :k], b_buf[:k]
    for kernel, expected in ((pitfalls.correct_kernel, k), (pitfalls.no_k_mask_kernel, None)):
        c = torch.empty(32, 32, device=device)
        launcher(kernel)(a, b, c)
        if expected is None:  # 26 lanes past K read canary times canary
            assert c.min() > 1e6
        else:
            assert torch.equal(c, torch.full_like(c, float(expected)))


@on_gpu
def test_loop_bound_timing_measures_both_kernels():
    timing = loop_bound_timing(1024)
    assert timing["runtime K"] > 0 and timing["constexpr K"] > 0


def test_interpreter_cannot_tell_tf32_from_ieee():
    if tmm_course.BACKEND != "interpreter":
        pytest.skip("on a GPU the two differ")
    from tmm_course.perf.pitfalls import precision_errors

    errors = precision_errors(64)
    assert errors["tf32"] == errors["ieee"]


def _code_lines(kernel) -> list[str]:
    """The kernel's body without comments or blank lines, and without lesson 4's PRECISION."""
    lines = []
    for line in source_of(kernel).splitlines():
        code = line.split("#")[0].rstrip().replace(", input_precision=PRECISION", "")
        if code.strip():
            lines.append(" ".join(code.split()))
    body = next(i for i, line in enumerate(lines) if line.endswith("):")) + 1
    return lines[body:]


def test_the_fixed_twin_is_lesson_4s_kernel_line_for_line():
    assert _code_lines(pitfalls.correct_kernel) == _code_lines(matmul_kernel)


# --- the exercise: find the bug -------------------------------------------------------------
FIXES = {
    "a": [("for _ in range(0, tl.cdiv(K, BLOCK_K)):", "for k in range(0, tl.cdiv(K, BLOCK_K)):"),
          ("(rk[None, :] < K)", "(rk[None, :] < K - k * BLOCK_K)"),
          ("(rk[:, None] < K)", "(rk[:, None] < K - k * BLOCK_K)")],
    "b": [("        total = tl.dot(a, b, total)\n",
           "        total = tl.dot(a, b, total)\n        a_tile += BLOCK_K * stride_ak\n")],
    "c": [("other=1.0)", "other=0.0)")],
    "d": [("m_idx[:, None] * BLOCK_N", "m_idx[:, None] * stride_cm")],
}  # fmt: skip


def _learner_copy(tmp_path, kernel, name, edits=(), renames=()):
    """``kernel``'s source, edited, as a learner's kernel called ``name`` in a module of its own
    (Triton reads a kernel's source from its file)."""
    import importlib
    import sys

    source = source_of(kernel).replace(f"def {kernel.fn.__name__}(", f"def {name}(")
    for pattern, new in renames:  # whole names, everywhere
        source = re.sub(pattern, new, source)
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n" + source)
    sys.path.insert(0, str(tmp_path))
    try:
        return getattr(importlib.import_module(name), name)
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize("which", sorted(pitfalls.MYSTERIES))
def test_a_mystery_fails_and_its_small_fix_passes(which, tmp_path):
    broken = pitfalls.MYSTERIES[which]
    assert "BUG" not in source_of(broken)
    copy = _learner_copy(tmp_path, broken, f"copied_{which}_kernel")
    assert not check_fix(launcher(copy), broken).passed
    fixed = _learner_copy(tmp_path, broken, f"fixed_{which}_kernel", FIXES[which])
    result = check_fix(launcher(fixed), broken)
    assert result.passed, str(result)
    assert result.cases[-1].label.endswith(f"is {broken.fn.__name__} with a small fix")


def test_lesson_4s_kernel_in_place_of_the_fix_is_not_the_fix(tmp_path):
    pasted = _learner_copy(tmp_path, pitfalls.correct_kernel, "pasted_kernel")
    result = check_fix(launcher(pasted), pitfalls.mystery_b_kernel)
    assert not result.passed and result.primary.code == "not_the_fix", str(result)
    assert "differs from mystery_b_kernel" in result.primary.message


def test_an_untouched_exercise_is_not_implemented():
    def untouched(a, b, c):
        raise NotImplementedError

    assert check_fix(untouched, pitfalls.mystery_a_kernel).codes == ["not_implemented"]


# mystery A repaired the way lesson 4 writes it: its names, its k_left, its store mask (renames
# and the loop variable cost nothing; five statements change)
LESSON_4_IDIOM_A = [
    ("rm", "offs_m"), ("rn", "offs_n"), ("rk", "offs_k"), ("pa", "a_ptrs"), ("pb", "b_ptrs"),
    ("for _ in range(0, tl.cdiv(K, BLOCK_K)):",
     "for k in range(0, tl.cdiv(K, BLOCK_K)):\n        k_left = K - k * BLOCK_K"),
    ("(offs_k[None, :] < K)", "(offs_k[None, :] < k_left)"),
    ("(offs_k[:, None] < K)", "(offs_k[:, None] < k_left)"),
    ("    tl.store(pc, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & "
     "(offs_n[None, :] < N))",
     "    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)\n"
     "    tl.store(pc, acc.to(c_ptr.dtype.element_ty), mask=c_mask)"),
]  # fmt: skip


def test_a_repair_in_lesson_4s_idiom_is_the_fix(tmp_path):
    from tmm_course.check.fixes import MOST_LINES_CHANGED, lines_changed

    renames = [(rf"\b{old}\b", new) for old, new in LESSON_4_IDIOM_A[:5]]
    fixed = _learner_copy(tmp_path, pitfalls.mystery_a_kernel, "idiom_a_kernel",
                          LESSON_4_IDIOM_A[5:], renames)  # fmt: skip
    assert lines_changed(pitfalls.mystery_a_kernel, fixed) == MOST_LINES_CHANGED == 5
    result = check_fix(launcher(fixed), pitfalls.mystery_a_kernel)
    assert result.passed, str(result)


def test_lesson_4s_kernel_stays_further_from_every_mystery_than_a_fix():
    from tmm_course.check.fixes import MOST_LINES_CHANGED, lines_changed

    for name, broken in pitfalls.MYSTERIES.items():
        for kernel in (matmul_kernel, pitfalls.correct_kernel):
            assert lines_changed(broken, kernel) > MOST_LINES_CHANGED + 2, name


def test_lesson_9_states_the_repair_budget_before_the_first_mystery():
    from tmm_course.check.fixes import MOST_LINES_CHANGED

    notebook = json.loads((ROOT / "notebooks" / "09_pitfalls.ipynb").read_text())
    ids = [c.get("id") for c in notebook["cells"]]
    intro = " ".join("".join(notebook["cells"][ids.index("f7e00001")]["source"]).split())
    assert ids.index("f7e00001") < ids.index("f7ea0")  # the first mystery's cell
    assert f"a fix changes at most {MOST_LINES_CHANGED} statements" in intro
    assert "the loop variable" in intro and "a few lines" not in intro


def test_mystery_b_says_only_the_cases_with_one_k_step_pass():
    from tmm_course.check.fixes import symptoms

    result = symptoms(pitfalls.mystery_b_kernel)
    assert not result.passed and "only the cases with one K step" in result.primary.message
    for case in result.cases:  # what the sentence says, case by case
        if case.problem != "not run: fix the other cases first":
            assert case.passed == (case.shape[2] <= 32), case.label
    assert "formula" not in result.primary.message  # a pattern, not a repair


@pytest.mark.parametrize("which", ["a", "c"])
def test_symptoms_of_a_and_c_describe_the_pattern_not_the_repair(which):
    from tmm_course.check.fixes import PATTERNS, pattern
    from tmm_course.check.result import Case, CheckResult

    shapes = [(64, 64, 64), (16, 16, 16), (64, 64, 65), (64, 64, 7), (300, 4, 48)]
    fails = {"a": {(64, 64, 65), (300, 4, 48)}, "c": {(16, 16, 16), (64, 64, 65), (64, 64, 7),
                                                      (300, 4, 48)}}[which]  # fmt: skip
    cases = [Case(str(s), s, passed=s not in fails) for s in shapes]
    said = pattern(CheckResult("fix", False, cases), block_k=32)
    assert said in [sentence for sentence, _ in PATTERNS]
    assert "mask" not in said and "other=" not in said  # which cases, not which edit
    assert ("multiple of BLOCK_K pass" in said) == (which == "c")


def test_a_fix_that_fails_only_on_padded_rows_of_c_is_told_that_pattern():
    """Mystery d fixed halfway (C's row stride taken as N): only C's padded rows fail."""
    from tmm_course.check.fixes import pattern
    from tmm_course.check.result import Case, CheckResult

    layouts = [(), (), ("a", "b"), ("a", "b"), ("c",)]
    cases = [Case(f"case {i}", (64, 64, 64 + i), strided=s, passed=s != ("c",))
             for i, s in enumerate(layouts)]  # fmt: skip
    said = pattern(CheckResult("fix", False, cases), block_k=32)
    assert said.startswith("only the cases where C is not contiguous")
    assert "mask" not in said


def test_a_repair_beside_another_kernel_is_not_the_fix(tmp_path):
    """The repaired mystery runs on a 1x1x1 scratch problem, lesson 4's kernel on the real
    arrays: every kernel the launcher starts is judged, not the least changed one."""
    import torch

    fixed = _learner_copy(tmp_path, pitfalls.mystery_a_kernel, "scratch_a_kernel", FIXES["a"])
    pasted = _learner_copy(tmp_path, pitfalls.correct_kernel, "real_work_kernel")

    def both(a, b, c):
        one = torch.ones(1, 1, dtype=a.dtype, device=a.device)
        launcher(fixed)(one, one, torch.empty(1, 1, dtype=c.dtype, device=c.device))
        launcher(pasted)(a, b, c)

    result = check_fix(both, pitfalls.mystery_a_kernel)
    assert not result.passed and result.primary.code == "not_the_fix", str(result)
    assert "real_work_kernel differs from mystery_a_kernel" in result.primary.message


def test_a_repair_that_calls_a_whole_kernel_of_its_own_is_not_the_fix():
    """Mystery A repaired, plus one statement: a call to a correct @triton.jit function that
    stores every tile again. The output comes from that function, not from the repair alone
    (judged from the launch record, as check_fix and the grader both do)."""
    from tmm_course.check.verdict import not_the_fix
    from tmm_course.exercises import BY_NAME

    helper = source_of(pitfalls.correct_kernel).replace("def correct_kernel(", "def whole_tile(")
    call = ("    whole_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, "
            "stride_bn, stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K)\n")  # fmt: skip
    kernel = source_of(pitfalls.mystery_a_kernel).replace("mystery_a_kernel", "called_a_kernel")
    for old, new in FIXES["a"]:
        kernel = kernel.replace(old, new)

    def record(calls: list[str]) -> dict:
        entry = {"name": "called_a_kernel", "source": kernel.rstrip() + "\n" + call,
                 "course": False, "calls": calls}  # fmt: skip
        helper_entry = {"name": "whole_tile", "source": helper, "course": False, "calls": []}
        kernels = {"called_a_kernel": entry, "whole_tile": helper_entry}
        return {"kernels": kernels, "launches": [{"kernel": "called_a_kernel"}]}

    (exercise,) = [e for e in BY_NAME.values() if e.fix_of == "mystery_a_kernel"]
    said = not_the_fix(exercise, record(["whole_tile"]))
    assert said is not None and "with the @triton.jit functions it calls differs" in said
    assert not_the_fix(exercise, record([])) is None  # the same source, no helper: 3 statements


def test_mystery_a_with_a_mask_that_drops_the_last_slab_is_not_told_its_masks_are_fine(tmp_path):
    wrong_fix = [FIXES["a"][0]] + [
        (f"(rk[{i}] < K)", f"(rk[{i}] < (K - k * BLOCK_K) // BLOCK_K * BLOCK_K)")
        for i in ("None, :", ":, None")
    ]
    fixed = _learner_copy(tmp_path, pitfalls.mystery_a_kernel, "floored_a_kernel", wrong_fix)
    result = check_matmul(launcher(fixed))
    assert not result.passed and result.primary.code == "ragged_edge", str(result)
    assert "masks are fine" not in result.primary.message
    assert "switches off every lane" in result.primary.message


def test_the_grader_judges_every_kernel_a_repair_launches(tmp_path):
    """The one judge reads the record's kernels by their source, with the same rule as check_fix."""
    from tmm_course.check.verdict import not_the_fix as fix_problem
    from tmm_course.exercises import BY_NAME

    fixed = _learner_copy(tmp_path, pitfalls.mystery_a_kernel, "rec_fixed_a", FIXES["a"])
    other = _learner_copy(tmp_path, pitfalls.correct_kernel, "rec_other_kernel")

    def record(*kernels):
        entries = {k.fn.__name__: {"name": k.fn.__name__, "source": source_of(k), "course": False}
                   for k in kernels}  # fmt: skip
        return {"kernels": entries, "launches": [{"kernel": k} for k in entries]}

    (exercise,) = [e for e in BY_NAME.values() if e.fix_of == "mystery_a_kernel"]
    assert fix_problem(exercise, record(fixed)) is None
    said = fix_problem(exercise, record(fixed, other))
    assert said is not None and "rec_other_kernel differs from mystery_a_kernel" in said
