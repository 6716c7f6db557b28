"""Lesson 10: the formats read off their bit patterns, block quantization, the block-scaled
float8 kernel and its exercise's diagnoses, what each GPU compiles tl.dot_scaled to, and the
stored H100 race."""

from __future__ import annotations

import json

import pytest
import torch
import triton
import triton.language as tl
from conftest import ROOT

import tmm_course
from tmm_course import numerics
from tmm_course.check import check_fp8_matmul
from tmm_course.kernels import low_precision as lp
from tmm_course.perf import low_precision as race
from tmm_course.perf import results
from tmm_course.viz.low_precision import race_figure


def test_each_format_is_read_off_its_bit_patterns():
    e4m3 = numerics.representable(torch.float8_e4m3fn)
    assert (len(e4m3), e4m3.max().item()) == (253, 448.0)  # 256 less two NaNs and -0
    u = numerics.unit_roundoff(e4m3)
    assert u == torch.finfo(torch.float8_e4m3fn).eps / 2 == 2.0**-4
    e5m2 = numerics.representable(torch.float8_e5m2)
    assert numerics.unit_roundoff(e5m2) == torch.finfo(torch.float8_e5m2).eps / 2
    # the rule minifloat decodes by gives e4m3 too, but for its NaN patterns (+-480)
    assert torch.equal(numerics.minifloat(4, 3, bias=7)[1:-1], e4m3)
    e2m1 = numerics.minifloat(2, 1, bias=1)
    assert e2m1[e2m1 >= 0].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    powers = numerics.representable(torch.float8_e8m0fnu)
    assert torch.equal(powers, torch.exp2(torch.log2(powers).round()))
    with pytest.raises(ValueError, match="8-bit"):
        numerics.representable(torch.float16)


def test_quantize_rounds_each_value_within_the_unit_roundoff():
    torch.manual_seed(0)
    x = torch.randn(5, 300)
    x[1, 130:140] *= 1e4
    u = numerics.unit_roundoff(numerics.representable(torch.float8_e4m3fn))
    q = lp.quantize(x, (1, lp.GROUP))
    assert q.scales.shape == (5, 3)
    assert torch.equal(q.scales, torch.exp2(torch.log2(q.scales).round()))  # powers of two
    normal = q.values.float().abs() >= torch.finfo(torch.float8_e4m3fn).tiny
    off = (q.dequantized() - x.double()).abs()
    assert (off[normal] <= u * x.double().abs()[normal]).all()
    assert normal[:, : lp.GROUP].all() and normal[[0, 2, 3, 4]].all()  # the outlier's block only
    down = lp.quantize(x, (1, lp.GROUP), round_scale="down")
    assert (down.values.float().abs().amax() == 448).item()  # the largest values saturate
    with pytest.raises(tmm_course.validate.KernelInputError, match="float8"):
        lp.quantize(x, dtype=torch.float16)


def test_the_course_kernel_stays_within_the_accumulation_bound():
    torch.manual_seed(1)
    a, b = torch.randn(40, 300), torch.randn(300, 24)
    aq, bq = lp.quantize(a, (1, lp.GROUP)), lp.quantize(b, (lp.GROUP, lp.GROUP))
    c = lp.fp8_matmul(aq.values, aq.scales, bq.values, bq.scales)
    kernel = numerics.error(c, aq.dequantized().float(), bq.dequantized().float())
    assert kernel <= numerics.accumulation_bound(300, lp.GROUP, tmm_course.BACKEND)
    u = numerics.unit_roundoff(numerics.representable(torch.float8_e4m3fn))
    assert numerics.error(c, a, b) <= numerics.quantized_product_bound(u)
    with pytest.raises(tmm_course.validate.KernelInputError, match="a_scale"):
        lp.fp8_matmul(aq.values, aq.scales.t(), bq.values, bq.scales)


def test_the_per_row_kernel_scales_the_finished_sum():
    torch.manual_seed(2)
    a, b = torch.randn(40, 200), torch.randn(200, 24)
    aq, bq = lp.quantize(a, (1, 200)), lp.quantize(b, (200, 1))  # a scale per row, per column
    c = lp.fp8_matmul_rowwise(aq.values, aq.scales, bq.values, bq.scales)
    kernel = numerics.error(c, aq.dequantized().float(), bq.dequantized().float())
    assert kernel <= numerics.accumulation_bound(200, 200, tmm_course.BACKEND)
    blocks = lp.quantize(a, (1, lp.GROUP))  # per-block scales need the K loop's kernel
    with pytest.raises(tmm_course.validate.KernelInputError, match=r"a_scale is \(40, 2\)"):
        lp.fp8_matmul_rowwise(blocks.values, blocks.scales, bq.values, bq.scales)


@triton.jit
def _attempt(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K,
             sam, sak, sasm, sask, sbk, sbn, sbsk, sbsn, scm, scn,
             SLIP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr):  # fmt: skip
    # the lesson's solution, or it with one slip
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if SLIP == "float16 sum":
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    first_a = tl.load(as_ptr + offs_m * sasm, mask=offs_m < M, other=0.0)
    first_b = tl.load(bs_ptr + (offs_n // 128) * sbsn, mask=offs_n < N, other=0.0)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(
            a_ptr + offs_m[:, None] * sam + (k * BLOCK_K + offs_k)[None, :] * sak,
            mask=(offs_m[:, None] < M) & (offs_k[None, :] < left),
            other=0.0,
        )
        b = tl.load(b_ptr + (k * BLOCK_K + offs_k)[:, None] * sbk + offs_n[None, :] * sbn,
                    mask=(offs_k[:, None] < left) & (offs_n[None, :] < N), other=0.0)  # fmt: skip
        if SLIP == "group is the step":  # noqa: SIM108 (a constexpr branch, as the others)
            group = k  # the K step, not the 128-wide K group it lies in
        else:
            group = k * BLOCK_K // 128
        sa = tl.load(as_ptr + offs_m * sasm + group * sask, mask=offs_m < M, other=0.0)
        if SLIP == "b_scale transposed":
            sb = tl.load(bs_ptr + group * sbsn + (offs_n // 128) * sbsk, mask=offs_n < N, other=0.0)
        elif SLIP == "b_scale column is offs_n":
            sb = tl.load(bs_ptr + group * sbsk + offs_n * sbsn, mask=offs_n < N, other=0.0)
        else:
            sb = tl.load(bs_ptr + group * sbsk + (offs_n // 128) * sbsn, mask=offs_n < N, other=0.0)
        if SLIP == "scales once per tile":
            acc += tl.dot(a, b) * first_a[:, None] * first_b[None, :]
        elif SLIP == "only a_scale":
            acc += tl.dot(a, b) * sa[:, None]
        elif SLIP == "float16 sum":
            acc += (tl.dot(a, b) * sa[:, None] * sb[None, :]).to(tl.float16)
        else:
            acc += tl.dot(a, b) * sa[:, None] * sb[None, :]
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc.to(tl.float32),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))  # fmt: skip


def attempt(slip: str):
    def fp8_matmul(a, a_scale, b, b_scale, c):
        (m, k), n = a.shape, b.shape[1]
        grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
        _attempt[grid](a, a_scale, b, b_scale, c, m, n, k, *a.stride(), *a_scale.stride(),
                       *b.stride(), *b_scale.stride(), *c.stride(), SLIP=slip,
                       BLOCK_M=32, BLOCK_N=32, BLOCK_K=64)  # fmt: skip

    return fp8_matmul


def test_untouched_exercise_is_not_implemented():
    def fp8_matmul(a, a_scale, b, b_scale, c):
        raise NotImplementedError

    assert check_fp8_matmul(fp8_matmul).codes == ["not_implemented"]


@pytest.mark.parametrize(
    ("slip", "code", "says"),
    [
        ("scales once per tile", "wrong_values", "loaded once per tile (before the K loop)"),
        ("b_scale transposed", "transposed", "b_scale read transposed"),
        ("float16 sum", "precision", "matches a float16 accumulator"),
        ("only a_scale", "wrong_values", "b_scale was never applied"),
        ("group is the step", "out_of_bounds_read", "index the scales with that group, not with k"),
        ("b_scale column is offs_n", "out_of_bounds_read", "Index it with offs_n // 128"),
    ],
)
def test_each_slip_gets_its_own_sentence(slip, code, says):
    result = check_fp8_matmul(attempt(slip))  # the slip-free kernel is the solution cell's
    assert not result.passed
    first = result.diagnoses[0]
    assert (first.code, says in first.message) == (code, True), str(result)


def test_each_gpu_compiles_dot_scaled_its_own_way():
    found = {gpu: lp.matrix_instructions(c.ptx) for gpu, c in lp.scaled_dot_compiled().items()}
    # an H100 has no block-scaled instruction: bfloat16 wgmma on the upcast tiles
    assert found["sm_90"] and all(".bf16.bf16" in i and "wgmma" in i for i in found["sm_90"])
    assert any("tcgen05.mma" in i and "block_scale" in i for i in found["sm_100"])
    assert any("mma.sync" in i and "block_scale" in i and "ue8m0" in i for i in found["sm_120"])
    assert not any("tcgen05" in i for i in found["sm_120"])


def test_the_stored_h100_race_holds_what_lesson_10_says_of_it():
    """A shipped run on an H100: 4096^3 and two model shapes, each contender's error against
    float64; cuBLASLt's float8 GEMM faster than bfloat16 there, the course's kernel slower."""
    stored = race.stored()
    assert stored is not None and "H100" in stored["device"] and stored["code"]
    assert [(r["m"], r["n"], r["k"]) for r in stored["shapes"]] == [s[1:] for s in race.SHAPES]
    for row in stored["shapes"]:
        assert set(row["error_vs_float64"]) == set(row["ms"]) >= {"torch._scaled_mm"}
        assert row["course_error_vs_dequantized"] <= row["course_bound_vs_dequantized"]
        assert (
            row["ratio_to_bf16"]["torch._scaled_mm"] > 1 > row["ratio_to_bf16"]["course fp8 kernel"]
        )
    notebook = json.loads((ROOT / "notebooks" / "10_low_precision.ipynb").read_text("utf-8"))
    said = next("".join(c["source"]) for c in notebook["cells"] if c.get("id") == "lp19")
    assert "faster than\nbfloat16 on every shape" in said and "kernel is slower" in said


def test_a_measured_race_is_read_with_where_and_how_and_drawn(tmp_path):
    names = ["course fp8 kernel", "torch.matmul bf16", "torch._scaled_mm"]
    ms = dict(zip(names, (1.0, 2.0, 1.0), strict=True))
    ratios = {name: ms["torch.matmul bf16"] / t for name, t in ms.items()}
    rows = [{"label": label, "m": m, "n": n, "k": k, "ms": ms, "ratio_to_bf16": ratios,
             "error_vs_float64": dict.fromkeys(names, 0.02)}
            for label, m, n, k in race.SHAPES]  # fmt: skip
    measured = {"device": "NVIDIA H100 80GB HBM3", "capability": [9, 0], "date": "2026-12-07",
                "versions": {"python": "3.12.3", "torch": "2.11.0", "triton": "3.6.0"},
                "command": "python -m tmm_course.perf.low_precision --out mine.json",
                "code": "abc1234", "shapes": rows}  # fmt: skip
    path = tmp_path / "mine.json"
    results.write(path, measured)
    stored = race.stored(str(path))
    assert race.where(stored) == (
        "NVIDIA H100 80GB HBM3, 2026-12-07, torch 2.11.0, triton 3.6.0, code abc1234"
    )
    figure = race_figure(stored["shapes"], race.where(stored))
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels == [s[0] for s in race.SHAPES]
    # the lesson says so where no run ships, rather than drawing nothing silently
    assert (race.stored() is None) == (race.FILE not in results.shipped())


@pytest.mark.parametrize("slip", ["none", "float16 sum"])
def test_the_grader_gives_the_checks_verdict(slip):
    # float8 buffers cross the grader's pipe as bytes; its compile gate is the exercise's GPUs
    import grade_parity

    result = check_fp8_matmul(attempt(slip))
    state, codes = grade_parity.graded("fp8_matmul", attempt(slip))
    assert (state == "pass", codes[:1]) == (result.passed, result.codes[:1])
