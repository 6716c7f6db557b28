"""Lesson 6: matmul_fast and both of its kernels pass lesson 4's battery; the plan picks a
path that can run; split-K, split tails, every layout of A and B, C stored by pointer and the
halved epilogue compute the same product; quick launches reuse compiled kernels only when Triton
would."""

from __future__ import annotations

import gc
import json
import weakref

import pytest
import torch
from test_matmul import DTYPES, SHAPES, operands, poisoned

import tmm_course
from tmm_course import capstone
from tmm_course.capstone import calls, kernels, launches, matmul_fast, plan, plans
from tmm_course.capstone.config import Config
from tmm_course.capstone.kernels import tma_problem
from tmm_course.check import check_matmul
from tmm_course.numerics import error, tolerance
from tmm_course.validate import KernelInputError

PATHS = ["grouped", "persistent_tma"]
ALIGNED = {"square": (64, 64, 64), "ragged M": (65, 64, 64), "ragged K": (64, 64, 72),
           "tall": (300, 8, 40), "all ragged": (100, 72, 88)}  # fmt: skip


@pytest.mark.parametrize(("dtype", "precision"), DTYPES)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_planned_path_matches_float64_reference(shape, dtype, precision):
    m, n, k = shape
    a, b = operands(m, n, k, dtype)
    c = matmul_fast(a, b, precision=precision, out=poisoned(m, n, dtype))
    assert error(c, a, b) <= tolerance(dtype, tmm_course.BACKEND, precision)


@pytest.mark.parametrize(("dtype", "precision"), DTYPES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shape", list(ALIGNED.values()), ids=list(ALIGNED))
def test_each_path_matches_float64_reference(shape, path, dtype, precision):
    if path == "persistent_tma" and kernels.TensorDescriptor is None:
        pytest.skip("this triton has no tensor descriptors")
    a, b = operands(*shape[:1], shape[1], shape[2], dtype)
    out = poisoned(shape[0], shape[1], dtype)
    if tma_problem(a, b, out) and path == "persistent_tma":
        pytest.skip(tma_problem(a, b, out))
    c = matmul_fast(a, b, precision=precision, out=out, path=path)
    assert error(c, a, b) <= tolerance(dtype, tmm_course.BACKEND, precision)


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_any_strides(layout):
    a, b = operands(70, 50, 45, torch.float16, layout)
    c = matmul_fast(a, b, out=poisoned(70, 50, torch.float16))
    assert error(c, a, b) <= tolerance(torch.float16, tmm_course.BACKEND)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_column_major_b_is_read_through_its_transpose(dtype):
    if kernels.TensorDescriptor is None or (
        tmm_course.BACKEND == "gpu" and torch.cuda.get_device_capability()[0] < 9
    ):
        pytest.skip("needs tensor descriptors")
    a = torch.randn(64, 48, device=tmm_course.DEVICE).to(dtype)
    b = torch.randn(80, 48, device=tmm_course.DEVICE).to(dtype).t()  # 48 x 80, column-major
    assert kernels.reads_b_transposed(b)
    c = matmul_fast(a, b, path="persistent_tma")
    assert error(c, a, b) <= tolerance(dtype, tmm_course.BACKEND)


@pytest.mark.parametrize("split_k", [2, 3, 8])
def test_split_k_sums_every_slice_once(split_k):
    a, b = operands(40, 24, 200, torch.float32)
    config = Config(16, 16, 16, split_k=split_k)
    c = matmul_fast(
        a, b, precision="ieee", path="grouped", config=config, out=poisoned(40, 24, torch.float32)
    )
    assert error(c, a, b) <= tolerance(torch.float32, tmm_course.BACKEND, "ieee")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize(("m", "n", "k"), [(40, 24, 200), (24, 40, 72), (56, 104, 1000)])
def test_the_grouped_kernel_wraps_sizes_that_are_multiples_of_8_not_16(m, n, k, dtype):
    a, b = operands(m, n, k, dtype)  # tiles of 32 wrap mid-tile; K ends in a partial slab
    config = Config(32, 32, 32, split_k=2)
    for path_b in (b, b.t().contiguous().t()):  # B row- and column-major
        c = matmul_fast(a, path_b, path="grouped", config=config, out=poisoned(m, n, dtype))
        assert error(c, a, path_b) <= tolerance(dtype, tmm_course.BACKEND)


def test_alignment_is_the_largest_power_of_two_up_to_16_dividing_a_stride():
    assert [launches.alignment(s) for s in (0, 1, 6, 8, 24, 3000, 4096)] == [1, 1, 2, 8, 8, 8, 16]


def test_split_k_is_one_launch_and_leaves_its_tile_counters_at_zero():
    from tmm_course.check import launches as recorder

    a, b = operands(40, 24, 200, torch.float32)
    config = Config(16, 16, 16, split_k=4)
    with recorder.recording() as launched:
        c = matmul_fast(a, b, precision="ieee", path="grouped", config=config)
        c2 = matmul_fast(a, b, precision="ieee", path="grouped", config=config)  # counters reused
    assert launched.kernels == ["grouped_matmul_kernel"] * 2
    assert torch.equal(c, c2) and error(c, a, b) <= tolerance(
        torch.float32, tmm_course.BACKEND, "ieee"
    )
    counters = launches.tile_counters(a.device, 1)
    assert int(counters.count_nonzero()) == 0


def test_split_k_with_more_slices_than_slabs():
    a, b = operands(16, 16, 20, torch.float32)  # 2 slabs of 16, 4 slices: two slices are empty
    c = matmul_fast(a, b, precision="ieee", path="grouped", config=Config(16, 16, 16, split_k=4))
    assert error(c, a, b) <= tolerance(torch.float32, tmm_course.BACKEND, "ieee")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize(("m", "n", "k"), [(64, 64, 63), (33, 70, 45), (40, 37, 64)])
def test_rows_the_tma_cannot_read_go_through_aligned_copies(m, n, k, dtype):
    if kernels.TensorDescriptor is None:
        pytest.skip("this triton has no tensor descriptors")
    a, b = operands(m, n, k, dtype)
    assert tma_problem(a, b, poisoned(m, n, dtype)) is not None
    assert tma_problem(a, b, poisoned(m, n, dtype), stage=True) is None
    for b_here in (b, b.t().contiguous().t()):  # B row- and column-major
        out = poisoned(m, n, dtype)
        c = matmul_fast(a, b_here, path="persistent_tma", precision="ieee", out=out)
        assert c is out and error(c, a, b) <= tolerance(dtype, tmm_course.BACKEND, "ieee")
        again = matmul_fast(a, b_here, path="persistent_tma", precision="ieee", out=out)
        assert torch.equal(again, c)  # the prepared launch stages the same way


def test_aligned_like_rounds_the_row_pitch_up_to_128_bytes():
    for dtype, pitch in ((torch.float16, 128), (torch.float32, 96)):  # 64 or 32 per line
        x = torch.empty(3, 70, dtype=dtype)
        y = launches.aligned_like(x)
        assert y.shape == x.shape and y.stride() == (pitch, 1) and launches.readable(y)


def test_halved_epilogue_stores_both_halves():
    if kernels.TensorDescriptor is None:
        pytest.skip("this triton has no tensor descriptors")
    a, b = operands(64, 96, 32, torch.float16)
    config = Config(32, 64, 16, subtile=True)
    c = matmul_fast(a, b, path="persistent_tma", config=config, out=poisoned(64, 96, torch.float16))
    assert error(c, a, b) <= tolerance(torch.float16, tmm_course.BACKEND)


def test_passes_the_lesson_4_check():
    result = check_matmul(lambda a, b, c: matmul_fast(a, b, out=c), allow_course_kernels=True)
    assert result.passed, result.codes


def test_the_check_sees_a_broken_fast_kernel():
    def drops_the_last_slice(a, b, c):
        matmul_fast(a[:, : max(1, a.shape[1] // 2)], b[: max(1, a.shape[1] // 2)], out=c)

    result = check_matmul(drops_the_last_slice, allow_course_kernels=True)
    assert not result.passed


def test_plan_explains_unaligned_rows_on_a_gpu():
    a, b = (
        operands(4096, 4096, 4093, torch.float16) if tmm_course.BACKEND == "gpu" else (None, None)
    )
    if a is None:
        pytest.skip("the interpreter always plans small grouped tiles")
    chosen = plan(a, b)  # staged through aligned copies, or the grouped kernel, and why
    assert chosen.stage if chosen.path == "persistent_tma" else "16-byte" in chosen.reason


def test_plan_on_the_interpreter_uses_small_tiles():
    if tmm_course.BACKEND != "interpreter":
        pytest.skip("interpreter only")
    a, b = operands(64, 64, 64, torch.float16)
    assert plan(a, b) == plans.Plan("grouped", plans.ON_INTERPRETER, plan(a, b).reason)


@pytest.mark.parametrize(
    ("shape", "path", "message"),
    [
        ((64, 64, 64), "tiles", r"path='tiles': expected one of persistent_tma, grouped"),
    ],
)
def test_bad_paths_are_explained(shape, path, message):
    a, b = operands(*shape, torch.float16)
    with pytest.raises(KernelInputError, match=message):
        matmul_fast(a, b, path=path)


def test_bad_config_is_explained():
    a, b = operands(32, 32, 32, torch.float16)
    with pytest.raises(KernelInputError, match=r"block_k=24 is not a power of two"):
        matmul_fast(a, b, config=Config(32, 32, 24))


def test_the_launchers_are_importable_from_their_packages():
    import tmm_course.kernels as lesson_kernels
    from tmm_course.capstone.calls import matmul_fast as defined
    from tmm_course.kernels.matmul import matmul

    assert lesson_kernels.matmul is matmul and capstone.matmul_fast is defined
    assert not hasattr(lesson_kernels, "matmul_fast")  # the capstone lives in its own wing
    a, b = operands(20, 24, 16, torch.float16)
    assert error(lesson_kernels.matmul(a, b), a, b) <= tolerance(torch.float16, tmm_course.BACKEND)


def test_config_of_the_wrong_type_is_explained():
    a, b = operands(32, 32, 32, torch.float16)
    with pytest.raises(KernelInputError, match=r"config is a dict; expected a Config"):
        matmul_fast(a, b, config={"block_m": 64})


def test_a_remembered_call_signature_still_needs_the_same_shapes():
    a, b = operands(32, 48, 40, torch.float16)
    matmul_fast(a, b)
    with pytest.raises(KernelInputError, match=r"Inner dimensions differ"):
        matmul_fast(a, b[:32])
    c = matmul_fast(a[:, :32], b[:32])  # a new signature is checked and planned afresh
    assert error(c, a[:, :32], b[:32]) <= tolerance(torch.float16, tmm_course.BACKEND)


def test_tma_problem_names_the_offending_tensor():
    a, b = operands(64, 64, 64, torch.float16)
    assert tma_problem(a, b) is None or tmm_course.BACKEND == "gpu"
    assert "rows are not contiguous" in tma_problem(a[:, ::2], b[::2])
    assert tma_problem(a.t().contiguous().t(), b) is None or tmm_course.BACKEND == "gpu"  # A^T
    assert "is empty" in tma_problem(a[:, :0], b[:0])


def test_repeated_calls_give_the_same_result_through_quick_launches():
    a, b = operands(96, 80, 64, torch.float16)
    first = matmul_fast(a, b).clone()
    for _ in range(3):
        assert torch.equal(matmul_fast(a, b), first)
    a2, b2 = operands(97, 81, 65, torch.float16)  # new specialization: ragged, unaligned
    assert error(matmul_fast(a2, b2), a2, b2) <= tolerance(torch.float16, tmm_course.BACKEND)


def test_smaller_configs_shed_stages_then_depth_then_tile_size():
    chain = [Config(128, 64, 64, num_stages=3)]
    while (nxt := plans.smaller(chain[-1])) is not None:
        chain.append(nxt)
    assert [(c.block_m, c.block_n, c.block_k, c.num_stages) for c in chain[:5]] == [
        (128, 64, 64, 3), (128, 64, 64, 2), (128, 64, 32, 2), (64, 64, 32, 2), (32, 64, 32, 2)
    ]  # fmt: skip
    assert (chain[-1].block_m, chain[-1].block_n) == (16, 16)


def out_of_shared_memory_above(stages, real):
    from triton.runtime.errors import OutOfResources

    tried = []

    def launch(a, b, out, config, *rest, **options):
        tried.append(config)
        if config.num_stages > stages:
            raise OutOfResources(300_000, 232_448, "shared memory")
        return real(a, b, out, config, *rest, **options)

    return launch, tried


def test_a_planned_config_too_big_for_the_gpu_is_shrunk_and_remembered(monkeypatch):
    launch, tried = out_of_shared_memory_above(2, launches.prepare_grouped)
    capstone.reset()  # forget calls other tests made
    monkeypatch.setattr(calls, "prepare_grouped", launch)
    monkeypatch.setattr(plans, "ON_INTERPRETER", Config(32, 32, 32, num_stages=4))
    monkeypatch.setattr(plans, "plan_by_fit", lambda *args: None)  # a GPU: the rules' plan
    a, b = operands(40, 36, 24, torch.float16)
    c = matmul_fast(a, b)
    assert [t.num_stages for t in tried] == [4, 3, 2]
    assert error(c, a, b) <= tolerance(torch.float16, tmm_course.BACKEND)
    again = matmul_fast(a, b)  # the same call again goes straight to the launch that fitted
    assert [t.num_stages for t in tried] == [4, 3, 2]
    assert torch.equal(again, c)


def test_a_plan_shrunk_to_a_smaller_gpu_still_copies_what_the_tma_cannot_read(monkeypatch):
    from tmm_course import gpu

    staged = plans.Plan("persistent_tma", plans.LARGE_TMA, "fitted", stage=True)
    small = gpu.Gpu("a GPU with 100 KB", (12, 0), 84, 100 * 1024)  # TMA, less shared memory
    monkeypatch.setattr(plans, "plan_by_fit", lambda *args: staged)
    monkeypatch.setattr(plans.tmm_course, "BACKEND", "gpu")
    monkeypatch.setattr(plans.gpu, "current", lambda: small)
    a, b = torch.empty(512, 510).half(), torch.empty(510, 512).half()  # copies pay: A's rows
    shrunk = plans.plan(a, b)
    assert shrunk.config != staged.config and "shrunk to fit 100 KB" in shrunk.reason
    assert shrunk.stage and shrunk.path == "persistent_tma"


@pytest.mark.parametrize("path", PATHS)
def test_a_forced_config_steps_no_deeper_than_k(path, monkeypatch):
    if path == "persistent_tma" and kernels.TensorDescriptor is None:
        pytest.skip("this triton has no tensor descriptors")
    seen, prepare = [], getattr(calls, f"prepare_{path}")

    def spy(a, b, out, config, precision):
        seen.append(config)
        return prepare(a, b, out, config, precision)

    capstone.reset()
    monkeypatch.setattr(calls, f"prepare_{path}", spy)
    a, b = operands(40, 36, 8, torch.float16)
    c = matmul_fast(a, b, path=path, config=Config(32, 32, 64))
    assert seen == [Config(32, 32, 16)]  # 48 of 64 columns past K would be zeros
    assert error(c, a, b) <= tolerance(torch.float16, tmm_course.BACKEND, "tf32")


def test_an_explicit_config_too_big_for_the_gpu_is_explained(monkeypatch):
    launch, _ = out_of_shared_memory_above(2, launches.prepare_grouped)
    capstone.reset()
    monkeypatch.setattr(calls, "prepare_grouped", launch)
    a, b = operands(40, 36, 24, torch.float16)
    with pytest.raises(KernelInputError, match=r"needs more shared memory than this GPU has"):
        matmul_fast(a, b, path="grouped", config=Config(32, 32, 32, num_stages=3))


def test_the_plan_prefers_a_fitted_problem_whose_sizes_align_alike(use_fit):
    from tmm_course.capstone.fitted import Fitted
    from tmm_course.capstone.problems import Problem

    odd, even = Config(16, 16, 16, group_m=1), Config(32, 32, 32, group_m=2)
    table = [
        Fitted(Problem(1023, 1025, 1027), "grouped", odd, 1.0, odd, 1.0),
        Fitted(Problem(1088, 1088, 1088), "grouped", even, 1.0, even, 1.0),
    ]
    use_fit(table)
    for size, expected in [(1024, even), (1021, odd)]:  # 1024^3 is nearer 1023x1025x1027
        a, b = operands(size, size, size, torch.float16)
        assert plans.plan_by_fit(a, b, None).config == expected


def test_the_plan_learns_from_the_other_16_bit_dtype_but_not_from_float32(use_fit):
    from tmm_course.capstone.fitted import Fitted
    from tmm_course.capstone.problems import Problem

    near, far, wide = Config(16, 16, 16, group_m=1), Config(32, 32, 32), Config(64, 64, 64)
    table = [
        Fitted(Problem(256, 256, 256, "bfloat16"), "grouped", far, 1.0, far, 1.0),
        Fitted(Problem(64, 64, 64, "float16"), "grouped", near, 1.0, near, 1.0),
        Fitted(Problem(64, 64, 64, "float32"), "grouped", wide, 1.0, wide, 1.0),
    ]
    use_fit(table)
    a, b = operands(64, 64, 64, torch.float16)
    # a float16 problem of the same sizes is half a unit away, a bfloat16 one six units
    assert plans.plan_by_fit(a.to(torch.bfloat16), b.to(torch.bfloat16), None).config == near
    assert plans.plan_by_fit(a.float(), b.float(), None).config == wide
    use_fit(table[:2])
    assert plans.plan_by_fit(a.float(), b.float(), None) is None  # no float32 fit: rules


def test_a_workspace_grows_by_doubling_and_keeps_what_it_outgrew():
    device = torch.device(tmm_course.DEVICE)
    first = launches.partials(device, 1)  # whatever earlier launches left
    assert launches.partials(device, first.numel()) is first
    grown = launches.partials(device, first.numel() + 1)
    assert grown.numel() >= 2 * first.numel()
    kept = weakref.ref(first)
    del first
    gc.collect()
    assert kept() is not None  # the package keeps it: a captured CUDA graph may still use it


def test_a_partial_last_wave_is_shared_out_in_k_slices_that_add_up_once():
    if kernels.TensorDescriptor is None or tma_problem(*operands(48, 32, 512, torch.float32)):
        pytest.skip("needs tensor descriptors")
    a, b = operands(48, 32, 512, torch.float32)  # 6 tiles of 16 x 16: fewer than the SMs
    config = Config(16, 16, 16, split_tail=True)
    assert launches.tail_splits(6, launches.program_slots(), 512 // 16) > 1
    first = matmul_fast(a, b, precision="ieee", path="persistent_tma", config=config,
                        out=poisoned(48, 32, torch.float32))  # fmt: skip
    again = matmul_fast(a, b, precision="ieee", path="persistent_tma", config=config)
    assert error(first, a, b) <= tolerance(torch.float32, tmm_course.BACKEND, "ieee")
    assert torch.equal(first, again)  # the tile counters were left at zero
    assert int(launches.tile_counters(a.device, 6)[:6].count_nonzero()) == 0


def test_a_split_last_wave_also_works_through_aligned_copies():
    if kernels.TensorDescriptor is None or tma_problem(*operands(48, 32, 512, torch.float16)):
        pytest.skip("needs tensor descriptors")
    a, b = operands(48, 30, 510, torch.float16)  # 60- and 1020-byte rows: staged
    assert tma_problem(a, b) is not None and tma_problem(a, b, stage=True) is None
    config = Config(16, 16, 16, split_tail=True)
    c = matmul_fast(a, b, path="persistent_tma", config=config, out=poisoned(48, 30, torch.float16))
    assert error(c, a, b) <= tolerance(torch.float16, tmm_course.BACKEND)


def test_a_last_wave_is_split_only_when_it_leaves_most_sms_idle():
    assert launches.tail_splits(288, 132, 48) == 5  # 3072^3 in 128x256 tiles: 24 tiles left
    assert launches.tail_splits(264, 132, 48) == 1  # whole waves
    assert launches.tail_splits(250, 132, 48) == 1  # 118 tiles left: the wave is nearly full
    assert launches.tail_splits(133, 132, 48) == 6  # one tile left: one slice per 8 K-steps
    assert launches.tail_splits(133, 132, 96) == 8  # at most 8 slices
    assert launches.tail_splits(32, 132, 16) == 2  # at least 8 K-steps a slice
    assert launches.tail_splits(32, 132, 15) == 1
    split = Config(128, 256, 64, split_tail=True)
    assert launches.slices_of_the_tail(split, 3072, 3072, 3072, 132) == 5
    assert launches.slices_of_the_tail(Config(128, 256, 64), 3072, 3072, 3072, 132) == 1


def test_a_config_is_stored_and_read_back_as_data():
    from tmm_course.capstone.candidates import CANDIDATES
    from tmm_course.capstone.fitted import Fitted
    from tmm_course.capstone.problems import Problem

    configs = [c for paths in CANDIDATES.values() for cs in paths.values() for c in cs]
    configs.append(Config(32, 32, 32, subtile=True, split_k=3))
    for config in configs:  # the fit stores each candidate it timed as this dict
        assert Config.from_dict(config.as_dict()) == config
    tried = tuple(("grouped", c, 1.0 + i) for i, c in enumerate(configs))
    fitted = Fitted(Problem(64, 64, 64), "grouped", configs[0], 1.0, configs[0], 1.0, tried)
    again = Fitted.from_dict(json.loads(json.dumps(fitted.as_dict())))
    assert again == fitted and again.measured()[("grouped", configs[-1])] == len(configs)
    with pytest.raises(ValueError, match="block_m"):
        Config.from_dict({"block_m": 128})


def laid_out(m: int, n: int, k: int, dtype: torch.dtype, layout: str):
    """A (m x k) and B (k x n), each row-major ("r") or column-major ("c": the transpose of a
    row-major tensor), as ``layout`` says: "rc" is A row-major, B column-major."""
    new = lambda r, c: torch.randn(r, c, device=tmm_course.DEVICE).to(dtype)
    a = new(k, m).t() if layout[0] == "c" else new(m, k)
    return a, (new(n, k).t() if layout[1] == "c" else new(k, n))


LAYOUT_CONFIGS = (
    ("grouped", Config(16, 32, 16, split_k=2)),
    ("persistent_tma", Config(16, 32, 32)),
    ("persistent_tma", Config(32, 16, 16, subtile=True)),
    ("persistent_tma", Config(16, 32, 16, split_tail=True)),
)


@pytest.mark.parametrize("layout", ["rr", "rc", "cr", "cc"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize(("m", "n", "k"), [(5, 40, 72), (48, 33, 200)])
def test_every_layout_of_a_and_b_gives_the_product(m, n, k, dtype, layout):
    a, b = laid_out(m, n, k, dtype, layout)
    # 16-bit column-major A is read through its transpose where its columns are 16-byte
    # aligned (m = 48), else copied (m = 5); float32 column-major A always copied
    assert kernels.reads_a_transposed(a) == (layout[0] == "c" and dtype != torch.float32)
    tma = kernels.TensorDescriptor is not None and not (
        tmm_course.BACKEND == "gpu" and torch.cuda.get_device_capability()[0] < 9
    )
    for path, config in LAYOUT_CONFIGS:
        if path == "persistent_tma" and not tma:
            continue
        out = poisoned(m, n, dtype)
        c = matmul_fast(a, b, precision="ieee", path=path, config=config, out=out)
        assert error(c, a, b) <= tolerance(dtype, tmm_course.BACKEND, "ieee"), (path, config)


def test_a_column_major_a_is_read_in_place_where_its_columns_are_aligned():
    a, b = laid_out(48, 40, 64, torch.float16, "cr")
    assert kernels.reads_a_transposed(a) and tma_problem(a, b) is None
    a, b = laid_out(5, 40, 64, torch.float16, "cr")  # columns 10 bytes apart: copied
    assert "a's rows" in tma_problem(a, b) and tma_problem(a, b, stage=True) is None


def test_copies_are_made_again_on_every_call_into_the_same_workspaces():
    if kernels.TensorDescriptor is None:
        pytest.skip("needs tensor descriptors")
    a, b = operands(33, 70, 45, torch.float32)  # A and C staged (odd rows), B^T copied
    config = Config(16, 16, 16)
    first = matmul_fast(a, b, precision="ieee", path="persistent_tma", config=config)
    staged = (launches.aligned_like(a, "A copied").data_ptr(),
              launches.aligned_like(b.t(), "B copied").data_ptr())  # fmt: skip
    a.copy_(torch.randn_like(a))  # new values at the same addresses
    b.copy_(torch.randn_like(b))
    again = matmul_fast(a, b, precision="ieee", path="persistent_tma", config=config)
    assert error(again, a, b) <= tolerance(torch.float32, tmm_course.BACKEND, "ieee")
    assert not torch.equal(first, again)
    assert (launches.aligned_like(a, "A copied").data_ptr(),
            launches.aligned_like(b.t(), "B copied").data_ptr()) == staged  # fmt: skip


@pytest.mark.parametrize("layout", ["rr", "cc"])
def test_the_grouped_kernel_copies_rows_off_16_byte_lines_again_on_every_call(layout):
    a, b = laid_out(33, 37, 45, torch.float16, layout)  # every line an odd number of elements
    config = Config(16, 32, 16, split_k=2)
    first = matmul_fast(a, b, path="grouped", config=config)
    a.copy_(torch.randn_like(a))  # new values at the same addresses
    b.copy_(torch.randn_like(b))
    again = matmul_fast(a, b, path="grouped", config=config)
    assert error(again, a, b) <= tolerance(torch.float16, tmm_course.BACKEND, "tf32")
    assert not torch.equal(first, again)
    view = (lambda t: t) if layout == "rr" else (lambda t: t.t())
    assert torch.equal(view(launches.aligned_like(view(a), "A copied")), a)
    assert torch.equal(view(launches.aligned_like(view(b), "B copied")), b)


def test_the_kernel_turns_a_ragged_strided_float32_b_around_where_its_descriptor_reads():
    if kernels.TensorDescriptor is None:
        pytest.skip("needs tensor descriptors")
    a = torch.randn(33, 145, device=tmm_course.DEVICE)
    b = torch.randn(145, 200, device=tmm_course.DEVICE)[:, 3:73]  # 145 x 70, rows 200 apart
    c = matmul_fast(a, b, precision="ieee", path="persistent_tma", config=Config(16, 16, 16))
    assert error(c, a, b) <= tolerance(torch.float32, tmm_course.BACKEND, "ieee")
    assert torch.equal(launches.aligned_like(b.t(), "B copied"), b.t())


def test_float32_copies_of_2_to_the_22_elements_or_more_go_in_tiles_of_128():
    assert launches.copy_tile(torch.float32, 2048 * 2048) == 128
    assert launches.copy_tile(torch.float32, 2048 * 2047) == 64
    assert launches.copy_tile(torch.float16, 8192 * 8192) == 64


def test_copying_launches_in_turn_share_one_barrier_count_and_stay_correct():
    if kernels.TensorDescriptor is None:
        pytest.skip("needs tensor descriptors")
    for m in (64, 4096, 16, 1000, 64):  # 1 tile to many waves, one count
        a, b = operands(m, 192, 96, torch.float32)
        c = matmul_fast(a, b, precision="ieee", path="persistent_tma", config=Config(64, 64, 32))
        assert error(c, a, b) <= tolerance(torch.float32, tmm_course.BACKEND, "ieee"), m


def test_a_c_the_tma_cannot_write_is_stored_by_pointer_and_nothing_around_it():
    if kernels.TensorDescriptor is None or tma_problem(*operands(64, 64, 64, torch.float16)):
        pytest.skip("needs tensor descriptors")
    a, b = operands(40, 30, 64, torch.float16)
    memory = torch.full((33, 40), float("nan"), dtype=torch.float16, device=a.device)
    out = memory[:30].t()  # columns 40 apart: no tensor descriptor can write it
    assert tma_problem(a, b, out) is not None
    for config in (Config(16, 16, 16), Config(16, 16, 16, split_tail=True, subtile=True)):
        c = matmul_fast(a, b, path="persistent_tma", config=config, out=out)
        assert c is out and error(c, a, b) <= tolerance(torch.float16, tmm_course.BACKEND)
        assert memory[30:].isnan().all()  # the rows past C untouched


@pytest.mark.parametrize("copies", [False, True])
def test_the_grouped_kernel_reads_odd_rows_in_place_or_copied_alike(copies):
    a, b = operands(63, 65, 67, torch.float16)  # rows 134 and 130 bytes apart
    out = poisoned(63, 65, torch.float16)
    arguments, _, _, _, before = launches.grouped_setup(a, b, out, plans.SMALL, "tf32", copies)
    assert (before is None) != copies and (arguments(a, b, out)[0] is a) != copies
    launches.launch_grouped(a, b, out, plans.SMALL, copies=copies)
    assert error(out, a, b) <= tolerance(torch.float16, tmm_course.BACKEND)
