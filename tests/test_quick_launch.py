"""Prepared launches: a call signature is prepared once; later calls go to the compiled
launcher, and on Triton 3.6's NVIDIA launcher reuse the flat arguments they passed before on
the same addresses; recorders, profilers' hooks and unknown launchers get Triton's own path."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from test_matmul import operands

from tmm_course import capstone
from tmm_course.capstone import calls, launches, matmul_fast
from tmm_course.capstone.quick_launch import PreparedLaunch, direct_launch, plain_launches

HEAD = 13  # Triton 3.6's launch function: grid, stream, function, options, scratch, metadata, hooks


class Launcher36:
    """Shaped like Triton 3.6's CudaLauncher (the signature direct_launch checks)."""

    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid = launch_pdl = False

    def __init__(self, launch):
        self.launch = launch

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        self.public = (gridX, gridY, gridZ, stream, function, *args)


def with_descriptors(raw, indices, metas, encode):
    """Triton 3.6's wrap_handle_tensordesc: a closure over the raw launch function."""
    launcher, tensordesc_indices, tensordesc_meta = raw, indices, metas

    def inner(*args):
        final, metas = list(args[:HEAD]), iter(tensordesc_meta)
        for i, arg in enumerate(args[HEAD:]):
            final.extend(encode(arg, next(metas)) if i in tensordesc_indices else [arg])
        return launcher(*final)

    return inner


@pytest.fixture
def triton_3_6(monkeypatch):
    """This Triton's NVIDIA driver made to look like 3.6's, encoding a descriptor as a name."""
    from triton.backends.nvidia import driver

    encoded = []

    def encode(arg, meta):
        encoded.append(arg)
        return [f"map of {arg} with {meta}"]

    monkeypatch.setattr(driver, "CudaLauncher", Launcher36)
    monkeypatch.setattr(driver, "make_tensordesc_arg", encode)
    return encoded


def compiled_with(launch):
    return type("Compiled", (), {"run": Launcher36(launch), "function": "function",
                                 "packed_metadata": "packed"})()  # fmt: skip


class Kernel:
    """A stand-in for a @triton.jit function: ``kernel[grid](*args, **constexprs)``."""

    def __init__(self, compiled):
        self.compiled, self.plain = compiled, []

    def __getitem__(self, grid):
        def run(*args, **constexprs):
            self.plain.append((grid, args))
            return self.compiled

        return run


@pytest.fixture
def one_stream(monkeypatch):
    from triton.runtime import driver as runtime

    active = type("Driver", (), {"get_current_device": lambda: 0,
                                 "get_current_stream": lambda device: "stream"})  # fmt: skip
    monkeypatch.setattr(runtime, "_active", active)


def test_direct_launch_encodes_each_tensor_descriptor_with_its_metadata(triton_3_6):
    raw, flatten = direct_launch(compiled_with(with_descriptors(print, {0, 2}, ["m0", "m2"], None)))
    assert raw is print
    assert flatten(["d0", 7, "d2"]) == ["map of d0 with m0", 7, "map of d2 with m2"]


def test_direct_launch_takes_a_builtin_launch_function_as_it_is(triton_3_6):
    raw, flatten = direct_launch(compiled_with(len))
    assert raw is len and flatten([3, None]) == [3, None]


def test_kept_arguments_hold_addresses_not_tensors(triton_3_6):
    import gc
    import weakref

    out = torch.empty(4)
    address, gone = out.data_ptr(), weakref.ref(out)
    for compiled in (compiled_with(len), compiled_with(with_descriptors(print, {1}, ["m"], None))):
        flat = direct_launch(compiled)[1]([out, "descriptor", 7])
        assert flat[0] == address and flat[2] == 7
    del out, flat
    gc.collect()
    assert gone() is None  # a kept launch does not keep the caller's output alive


def test_direct_launch_leaves_other_launchers_alone(triton_3_6, monkeypatch):
    from triton.backends.nvidia import driver

    assert direct_launch(compiled_with(lambda *args: None)) is None  # no closure it knows
    scratching = compiled_with(len)
    scratching.run.global_scratch_size = 64  # allocates per launch: the public call does that
    assert direct_launch(scratching) is None
    monkeypatch.setattr(driver.CudaLauncher, "__call__", lambda self, *args: None)
    assert direct_launch(compiled_with(len)) is None  # another signature


def test_a_launch_on_the_same_addresses_passes_what_it_passed_before(triton_3_6, one_stream):
    launched = []
    compiled = compiled_with(with_descriptors(lambda *a: launched.append(a), {0}, ["m"], None))
    kernel = Kernel(compiled)
    launch = PreparedLaunch(kernel, (132,), ("first", 7), {"C": "constexpr", "num_warps": 4}, "gpu")
    made = []
    for address in (1, 1, 2, 1):
        launch(address, lambda address=address: made.append(address) or (f"desc{address}", 7))
    assert made == [1, 2]  # arguments made once per address
    head = (132, 1, 1, "stream", "function", False, False, None, None, "packed", None, None, None)
    assert [call[HEAD:] for call in launched] == [("map of desc1 with m", 7, "constexpr")] * 2 + [
        ("map of desc2 with m", 7, "constexpr"),
        ("map of desc1 with m", 7, "constexpr"),
    ]
    assert all(call[:HEAD] == head for call in launched)
    assert kernel.plain == [((132,), ("first", 7))]  # only the first launch took Triton's path


def test_recorders_and_profilers_see_every_launch_on_tritons_own_path(triton_3_6, one_stream,
                                                                       monkeypatch):  # fmt: skip
    from triton import knobs

    launched = []
    kernel = Kernel(compiled_with(lambda *a: launched.append(a)))
    launch = PreparedLaunch(kernel, (4,), ("x",), {}, "gpu")
    with plain_launches():
        launch(1, lambda: ("y",))
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", lambda metadata: None)
    launch(1, lambda: ("z",))
    assert [args for _, args in kernel.plain] == [("x",), ("y",), ("z",)] and launched == []


def test_an_unknown_launcher_gets_its_public_call(one_stream):
    compiled = compiled_with(lambda *a: None)  # a launch function direct_launch cannot take apart
    launch = PreparedLaunch(Kernel(compiled), (4,), ("x",), {"C": 1, "num_stages": 2}, "gpu")
    launch(1, lambda: ("y",))
    head = (4, 1, 1, "stream", "function", "packed", None, None, None)
    assert compiled.run.public == (*head, "y", 1)


def test_the_interpreter_always_takes_tritons_own_path():
    kernel = Kernel(None)
    launch = PreparedLaunch(kernel, (4,), ("x",), {}, "interpreter")
    launch(1, lambda: ("y",))
    assert [args for _, args in kernel.plain] == [("x",), ("y",)]


def test_a_call_shaped_alike_but_aligned_otherwise_is_prepared_anew(monkeypatch):
    prepared = []
    real = launches.prepare_grouped
    monkeypatch.setattr(calls, "prepare_grouped", lambda *a: prepared.append(a) or real(*a))
    capstone.reset()
    a, b = operands(32, 32, 32, torch.float16)
    shifted = torch.empty(32 * 32 + 1, dtype=a.dtype, device=a.device)[1:].view(32, 32)
    shifted.copy_(a)  # the same shape and strides, 2 bytes off a 16-byte boundary
    for x in (a, a, shifted, shifted):
        matmul_fast(x, b, path="grouped")
    assert len(prepared) == 2


class KeyRecorder:
    """A stand-in for PreparedLaunch that keeps the key of every later launch."""

    keys: ClassVar[list] = []

    def __init__(self, kernel, grid, args, constexprs, backend):
        KeyRecorder.keys = []

    def __call__(self, key, make_args, stream=None):
        self.keys.append(key)


@pytest.mark.parametrize(("split_k", "anew"), [(4, True), (1, False)])
def test_workspace_addresses_are_looked_up_again_once_a_workspace_grows(monkeypatch, split_k,
                                                                        anew):  # fmt: skip
    monkeypatch.setattr(launches, "PreparedLaunch", KeyRecorder)
    a, b = operands(64, 64, 256, torch.float16)
    out = torch.empty(64, 64, dtype=a.dtype, device=a.device)
    ready = launches.prepare_grouped(a, b, out, capstone.Config(32, 32, 32, split_k=split_k))
    ready(a, b, out)
    launches.partials(a.device, 2 * launches.partials(a.device, 1).numel() + 1)  # grows
    ready(a, b, out)
    assert (KeyRecorder.keys[0] != KeyRecorder.keys[1]) == anew


def test_a_hook_added_to_tritons_default_chain_is_heard_and_the_empty_chains_are_not():
    from triton import knobs

    from tmm_course.capstone.quick_launch import listening

    chain = knobs.runtime.launch_exit_hook
    assert type(chain) is knobs.HookChain and not listening(knobs.runtime)
    chain.add(print)
    try:
        assert listening(knobs.runtime)
    finally:
        chain.remove(print)
    assert not listening(knobs.runtime)
