"""The launch record (tmm_course.check.record): plain data that survives a trip through JSON,
and a replay that launches the recorded kernels on tensors the judge owns, every buffer the
launcher made refilled (poison, a kept constant, a fresh copy of an input)."""

from __future__ import annotations

import json
import math

import tmm_course  # chooses the backend first

# isort: split
import pytest
import torch
import triton
import triton.language as tl

from tmm_course.check import launches, record
from tmm_course.check.record import Recorder, rebuild, replay
from tmm_course.check.verdict import course_kernel
from tmm_course.kernels.vector_add import vector_add_kernel

SCALE = tl.constexpr(2)


@triton.jit
def _twice(x):
    return x * SCALE


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside)
    y = tl.load(y_ptr + offs, mask=inside)
    tl.store(out_ptr + offs, _twice(x) + y, mask=inside)


@triton.jit
def accumulate_kernel(src_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    tl.atomic_add(acc_ptr + offs, tl.load(src_ptr + offs, mask=inside), mask=inside)


@triton.jit
def calls_the_course(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK)


def recorded(launcher, tensors: dict[str, torch.Tensor], host_work: bool = False) -> Recorder:
    recorder = Recorder(tensors, host_work=host_work)
    with launches.recording() as seen:
        seen.listeners.append(recorder.note)
        launcher(*tensors.values())
    assert recorder.problem is None
    return recorder


def vectors(n: int = 40) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(n), "y": torch.randn(n), "out": torch.full((n,), float("nan"))}


def plain(x, y, out):
    grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)
    axpy_kernel[grid](x, y, out, x.numel(), BLOCK=16)


def test_the_record_is_plain_data_with_the_grid_resolved_and_each_tensor_named():
    data = recorded(plain, vectors()).record()
    assert json.loads(json.dumps(data)) == data
    (launch,) = data["launches"]
    assert launch["grid"] == [3, 1, 1]
    assert [a["tensor"]["case"] for a in launch["args"][:3]] == ["x", "y", "out"]
    assert launch["args"][3] == {"int": 40} and launch["kwargs"] == {"BLOCK": {"int": 16}}


def test_the_record_carries_every_kernel_it_calls_and_the_constexprs_it_reads():
    kernels = recorded(plain, vectors()).record()["kernels"]
    assert kernels["axpy_kernel"]["calls"] == ["_twice"]
    assert kernels["_twice"]["globals"]["SCALE"] == {"constexpr": 2}
    assert kernels["_twice"]["source"].startswith("def _twice(x):")


def test_a_replay_from_the_rebuilt_source_computes_on_the_new_inputs():
    case = vectors()
    data = json.loads(json.dumps(record.recorded(lambda: plain(*case.values()), case)))
    fresh = vectors()
    replay(data, fresh, rebuild(data))  # what another process does
    assert torch.allclose(fresh["out"], 2 * fresh["x"] + fresh["y"])


def test_an_answer_handed_to_the_kernel_is_poison_at_replay():
    def cheat(x, y, out):
        answer = (2 * x + y).clone()
        axpy_kernel[(3,)](answer, torch.zeros_like(y), out, x.numel(), BLOCK=16)

    recorder = recorded(cheat, vectors())
    assert recorder.record()["buffers"][0]["fill"] == {"kind": "poison"}
    fresh = vectors()
    replay(recorder.record(), fresh, recorder.kernels)
    assert fresh["out"].isnan().all()


def test_a_zero_filled_buffer_keeps_its_zeros_at_replay():
    def split(x, y, out):
        acc = torch.zeros_like(out)
        for part in (x, y):
            accumulate_kernel[(3,)](part, acc, x.numel(), BLOCK=16)
        axpy_kernel[(3,)](torch.zeros_like(x), acc, out, x.numel(), BLOCK=16)

    recorder = recorded(split, vectors())
    assert recorder.record()["buffers"][0]["fill"] == {"kind": "constant", "value": 0.0}
    fresh = vectors()
    replay(recorder.record(), fresh, recorder.kernels)
    assert torch.allclose(fresh["out"], fresh["x"] + fresh["y"])


def test_a_host_copy_of_an_input_is_made_again_from_the_fresh_input():
    def copies(x, y, out):
        axpy_kernel[(3,)](x.clone(), y.double().float(), out, x.numel(), BLOCK=16)

    recorder = recorded(copies, vectors())
    assert [b["fill"]["of"] for b in recorder.record()["buffers"]] == ["x", "y"]
    fresh = vectors()
    replay(recorder.record(), fresh, recorder.kernels)
    assert torch.allclose(fresh["out"], 2 * fresh["x"] + fresh["y"])


def test_a_copy_is_that_input_only_in_its_layout():
    x = torch.randn(8, 6)
    sliced = torch.randn(8, 12)[:, ::2]
    assert record.layout(x.clone(), x) == record.layout(x.float(), x) == "same"
    assert record.layout(x.t().contiguous().t(), x) == "other"  # permuted
    assert record.layout(sliced.contiguous(), sliced) == "other"  # gathered
    assert record.layout(torch.randn(1, 6).t().contiguous().t(), torch.randn(1, 6)) == "same"


def test_a_gathered_copy_is_host_work_poisoned_at_replay_and_named():
    from types import SimpleNamespace

    from tmm_course.check.verdict import copied_input

    def gathers(x, y, out):
        axpy_kernel[(3,)](x.contiguous(), y, out, out.numel(), BLOCK=16)

    case = {"x": torch.randn(80)[::2], "y": torch.randn(40), "out": torch.full((40,), math.nan)}
    data = recorded(gathers, case).record()
    assert data["buffers"][0]["fill"]["layout"] == "other"
    exercise = SimpleNamespace(tensors=tuple(case), converts=True)
    said = copied_input(exercise, SimpleNamespace(tensors=[case["x"], case["y"]]), data)
    assert said is not None and "x.contiguous()" in said
    replay(data, case, rebuild(data))
    assert case["out"].isnan().all()


def test_where_host_work_is_allowed_a_gathered_copy_is_made_again_at_replay():
    def gathers(x, y, out):  # the course's launchers stage inputs so (aligned for TMA)
        axpy_kernel[(3,)](x.contiguous(), y, out, out.numel(), BLOCK=16)

    case = {"x": torch.randn(80)[::2], "y": torch.randn(40), "out": torch.full((40,), math.nan)}
    data = recorded(gathers, case, host_work=True).record()
    assert data["host_work"] and data["buffers"][0]["fill"]["layout"] == "other"
    case["out"].fill_(math.nan)
    replay(data, case, rebuild(data))
    assert torch.allclose(case["out"], 2 * case["x"] + case["y"])


def test_a_copy_in_another_layout_or_a_forbidden_dtype_is_named_and_one_in_place_is_not():
    from types import SimpleNamespace

    from tmm_course.check.verdict import copied_input

    exercise = SimpleNamespace(tensors=("x", "out"), converts=True)  # any other layout named
    case = SimpleNamespace(tensors=[torch.randn(6, 6)])

    def copy(layout: str, dtype: str = "float32") -> dict:
        fill = {"kind": "copy", "of": "x", "layout": layout}
        return {"buffers": [{"dtype": dtype, "fill": fill}]}

    assert "x.t().contiguous()" in copied_input(exercise, case, copy("transposed"))
    assert "x.t().contiguous().t()" in copied_input(exercise, case, copy("other"))
    assert copied_input(exercise, case, copy("same")) is None
    assert copied_input(exercise, case, copy("same", "float16")) is None  # a conversion: kept
    exercise.converts = False  # lesson 10: the dtype is the exercise
    assert "x.to(torch.float16)" in copied_input(exercise, case, copy("same", "float16"))
    assert copied_input(exercise, case, copy("same")) is None


def test_a_view_of_an_input_is_replayed_at_the_same_offset():
    def halves(x, y, out):
        half = x.numel() // 2
        axpy_kernel[(2,)](x[half:], y[half:], out[half:], half, BLOCK=16)
        axpy_kernel[(2,)](x[:half], y[:half], out[:half], half, BLOCK=16)

    recorder = recorded(halves, vectors())
    assert recorder.record()["launches"][0]["args"][0]["tensor"]["byte_offset"] == 80
    fresh = vectors()
    replay(recorder.record(), fresh, recorder.kernels)
    assert torch.allclose(fresh["out"], 2 * fresh["x"] + fresh["y"])


def test_a_course_kernel_called_inside_a_learner_kernel_is_named():
    def inside(x, y, out):
        calls_the_course[(3,)](x, y, out, x.numel(), BLOCK=16)

    found = course_kernel(recorded(inside, vectors()).record(), by_source=False)
    assert found is not None
    assert "vector_add_kernel, called inside your kernel, is the course's" in found


def test_a_course_kernel_rebuilt_in_another_module_is_still_the_courses():
    import types

    fn = vector_add_kernel.fn
    rebuilt = types.FunctionType(fn.__code__, {**fn.__globals__, "__name__": "__main__"})
    assert rebuilt.__module__ == "__main__"
    mine = triton.jit(rebuilt)

    def launch(x, y, out):
        mine[(3,)](x, y, out, x.numel(), BLOCK=16)

    found = course_kernel(recorded(launch, vectors()).record(), by_source=False)
    assert "vector_add_kernel is the course's" in (found or "")


def test_a_tensor_descriptor_is_recorded_by_its_base_and_blocks():
    from triton.tools.tensor_descriptor import TensorDescriptor

    from tmm_course.check.record import Recorder as R

    a = torch.randn(32, 32)
    recorder = R({"a": a})
    value = recorder._value(TensorDescriptor.from_tensor(a, [16, 16]))
    assert value["descriptor"]["base"]["tensor"]["case"] == "a"
    assert value["descriptor"]["block_shape"] == [16, 16]


def test_an_argument_that_is_not_plain_data_is_refused_in_words():
    from tmm_course.check.record import Unrecordable

    with pytest.raises(Unrecordable, match="cannot be replayed"):
        Recorder({})._value(object())


assert tmm_course.BACKEND  # the backend was chosen before the kernels above were decorated


# --- what the replay keeps and redoes, by the launcher's meaning ------------------------------
@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, s_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    s = tl.load(s_ptr)
    x = tl.load(x_ptr + offs, mask=inside)
    tl.store(out_ptr + offs, x * s + tl.load(y_ptr + offs, mask=inside), mask=inside)


@triton.jit
def tuple_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCKS: tl.constexpr, BLOCK: tl.constexpr = 64):
    offs = tl.program_id(0) * BLOCKS[0] + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside)
    tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=inside), mask=inside)


def timed_twice(fn, quantiles):
    """The autotuner's timing on the interpreter (which Triton's do_bench cannot time): two
    runs of each configuration, as a GPU's timing makes several."""
    fn()
    fn()
    return [1.0, 1.0, 1.0]


@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})],
    key=["n"],
    reset_to_zero=["out_ptr"],
    do_bench=timed_twice,
)
@triton.jit
def tuned_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Adds into out (tl.atomic_add): right only if out starts at zero, as reset_to_zero
    leaves it before every launch the autotuner times and before the one it keeps."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside)
    tl.atomic_add(out_ptr + offs, x + tl.load(y_ptr + offs, mask=inside), mask=inside)


def one_element_scale(x, y, out):
    scale = torch.ones(1, device=x.device)  # a one-element constant, as alpha = torch.ones(1)
    scaled_add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, scale, out, x.numel(), BLOCK=64)


def tuple_and_default(x, y, out):
    tuple_add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCKS=(64, 1))


def autotuned_with_reset(x, y, out):
    """Split-K's pattern: partial sums added into a buffer of zeros, which the autotuner zeroes
    again before each launch it times (without that, the timed launches' sums add up too)."""
    total = torch.zeros_like(out)
    tuned_add_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, total, x.numel())
    tuple_add_kernel[(triton.cdiv(x.numel(), 64),)](total, torch.zeros_like(out), out, x.numel(),
                                                    BLOCKS=(64, 1))  # fmt: skip


def from_a_thread(x, y, out):
    import threading

    worker = threading.Thread(target=tuple_and_default, args=(x, y, out))
    worker.start()
    worker.join()


@pytest.mark.parametrize(
    "launcher", [one_element_scale, tuple_and_default, autotuned_with_reset, from_a_thread]
)
def test_honest_launchers_pass_the_check_and_the_grader(launcher):
    from grade_parity import graded

    from tmm_course.check import check_vector_add

    torch.manual_seed(0)
    result = check_vector_add(launcher)
    assert result.passed, str(result)
    assert graded("vector_add", launcher) == ("pass", [])


def test_autotunes_resets_are_recorded_by_name():
    recorder = recorded(autotuned_with_reset, vectors(200))
    *timed, kept, copied = recorder.record()["launches"]
    assert len(timed) == 4  # two configurations, each timed twice
    assert all(x["hooks"] == {"zero": ["out_ptr"]} for x in [*timed, kept])
    assert "hooks" not in copied


# --- a course kernel is the course's under any names, unless it is the exercise's solution ------
def _renamed(kernel, renames: dict[str, str]) -> dict:
    """A record whose one kernel is ``kernel``'s source with whole names renamed."""
    import re

    from tmm_course.source import source_of

    source = source_of(kernel).replace(f"def {kernel.fn.__name__}(", "def my_kernel(")
    for old, new in renames.items():
        source = re.sub(rf"\b{old}\b", new, source)
    return {"kernels": {"my_kernel": {"name": "my_kernel", "source": source, "course": False}}}


def test_a_course_kernel_with_its_local_names_changed_is_still_the_courses():
    record = _renamed(vector_add_kernel, {"offsets": "where", "pid": "me", "x_ptr": "xs"})
    assert "tmm_course.kernels.vector_add.vector_add_kernel" in course_kernel(record)


def test_the_kernel_lesson_3s_exercise_starts_from_is_never_a_course_kernel():
    """Typed in for lesson 3, or reused for lesson 5's transpose: the learner's own work."""
    from tmm_course.kernels.strides import strided_copy_kernel, swapped_strides_copy_kernel

    assert course_kernel(_renamed(strided_copy_kernel, {"x_ptr": "src"})) is None
    assert course_kernel(_renamed(swapped_strides_copy_kernel, {})) is not None  # not printed


def test_restore_value_puts_back_what_a_timed_launch_changed():
    """As the autotuner's restore_value does around each launch it times."""
    case = vectors()
    data = json.loads(json.dumps(record.recorded(lambda: plain(*case.values()), case)))
    data["launches"][0]["hooks"] = {"restore": ["out_ptr"]}
    fresh = vectors()
    replay(data, fresh, rebuild(data))
    assert bool(fresh["out"].isnan().all())  # stored, then restored
    data["launches"][0]["hooks"] = {"zero": ["out_ptr"]}
    replay(data, fresh, rebuild(data))
    assert torch.allclose(fresh["out"], 2 * fresh["x"] + fresh["y"])
