"""Replaying a compiled kernel's launch through the interpreter (how a GPU-side check sees
loads). Here the kernels are built as compiled ``JITFunction`` objects, as on a GPU; the
replay must route them, and the ``@triton.jit`` helpers they call, to the interpreter."""

from __future__ import annotations

import tmm_course  # chooses the backend first

# isort: split
import torch
import triton.language as tl
from triton.runtime.jit import JITFunction

from tmm_course.check.memory_guard import OutOfBoundsAccess, Trace
from tmm_course.check.replay import Replay, on_the_cpu


def _double(x):
    return x * 2


def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK_LOAD: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n if MASK_LOAD else None)
    tl.store(out_ptr + offs, double(x), mask=offs < n)


double = JITFunction(_double)
copy_kernel = JITFunction(_copy)


def _launcher(mask_load: bool):
    def launch(x: torch.Tensor, out: torch.Tensor) -> None:
        copy_kernel[(2,)](x, out, x.numel(), BLOCK=16, MASK_LOAD=mask_load)

    return launch


def _storage_with_room(n: int) -> torch.Tensor:
    return torch.arange(64.0)[8 : 8 + n]


def test_a_copy_on_the_cpu_keeps_offset_shape_and_strides():
    x = torch.arange(60.0).view(6, 10)[1:5:2, 3:9]
    copy = on_the_cpu(x)
    assert copy.storage_offset() == x.storage_offset() and copy.stride() == x.stride()
    assert torch.equal(copy, x)
    assert copy.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_the_replay_runs_a_compiled_kernel_and_its_helper_on_the_interpreter():
    x, out = _storage_with_room(20), torch.full((20,), float("nan"))
    replay = Replay.before([x], out)
    trace = replay.run(_launcher(mask_load=True), ["x", "out"])
    assert isinstance(trace, Trace)
    assert torch.equal(replay.out, 2 * x)
    assert trace.outside("load") == {} and trace.outside("store") == {}
    assert bool(trace.stored_cells("out").all())
    assert out.isnan().all()  # the copies were replayed, not the check's tensors


def test_the_replay_sees_a_load_past_the_edge_that_the_output_hides():
    x, out = _storage_with_room(20), torch.full((20,), float("nan"))
    trace = Replay.before([x], out).run(_launcher(mask_load=False), ["x", "out"])
    assert isinstance(trace, Trace)
    assert trace.outside("load") == {"x": 12}  # 32 lanes, 20 elements
    assert trace.outside("store") == {}


def test_a_lane_outside_every_tensor_is_returned_not_raised():
    def wild(x: torch.Tensor, out: torch.Tensor) -> None:
        copy_kernel[(2,)](x, out, 10**9, BLOCK=16, MASK_LOAD=True)

    x = torch.arange(20.0)  # no room around it
    found = Replay.before([x], torch.empty(20)).run(wild, ["x", "out"])
    assert isinstance(found, OutOfBoundsAccess)


def test_after_a_replay_kernels_are_compiled_kernels_again():
    before = (JITFunction.run, JITFunction.__call__)
    Replay.before([_storage_with_room(4)], torch.empty(4)).run(_launcher(True), ["x", "out"])
    assert (JITFunction.run, JITFunction.__call__) == before


def test_a_check_that_sees_only_values_still_names_unmasked_loads_by_replaying(monkeypatch):
    """The GPU's view of a check, played on the CPU: the launch is watched for kernels only
    (no guard), and each case is replayed through the interpreter for its memory."""
    import contextlib

    import bug_bank

    from tmm_course.check import engine, launches

    def values_only(views):
        stack = contextlib.ExitStack()
        return stack, stack.enter_context(launches.recording()), None

    monkeypatch.setattr(engine, "watch", values_only)
    monkeypatch.setattr(engine, "replays", lambda: True)
    names = {
        "loads without masks",
        "store masked, load not",
        "no M/N masks on the loads",
        "no store mask",
        "correct",
        "correct, through a scratch output",
    }
    outcomes = bug_bank.run([e for e in bug_bank.BANK if e.name in names])
    assert len(outcomes) >= 8
    assert all(o.right for o in outcomes), bug_bank.table(outcomes)


def test_the_replay_hands_launchers_the_cpu_as_the_course_device(monkeypatch):
    """On a GPU, a launcher that calls a course launcher (which checks tmm_course.DEVICE) or
    allocates there must still replay on the CPU copies, or the replay judges nothing."""
    from tmm_course.check.replay import interpreted

    monkeypatch.setattr(tmm_course, "DEVICE", torch.device("cuda"))
    with interpreted():
        assert tmm_course.DEVICE.type == "cpu"
    assert tmm_course.DEVICE.type == "cuda"
