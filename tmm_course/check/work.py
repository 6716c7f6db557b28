"""Whether the learner's own kernel did the exercise's work, from the record of every launch and
every load and store lane (on the interpreter, or the GPU's replay through it).

A right answer is not enough: torch may have computed it and a decoy kernel been launched
beside it, torch may have written over what the kernel stored, a Triton kernel may have moved
torch's answer into the output, or the course's own kernel may have done the job. So once the
values are right, the check also asks:

- every cell of the output was stored by a learner kernel;
- the output did not change after the last learner launch returned;
- every cell of each input was loaded by a learner kernel (directly, or from a copy the
  launcher made on the host: one in another layout is named from the launch record,
  :func:`tmm_course.check.verdict.copied_input`);
- where the exercise says how the work is shared (split-K's slices of ``K``), that each
  launch's programs read their share (:func:`reads` hands the exercise's ``work`` judge what
  each program loaded, as plain data the grader's worker sends too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

from tmm_course.check.launches import Launch, arguments, grid_of
from tmm_course.check.memory_guard import Trace
from tmm_course.exercises.spec import Reads


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit equal values, NaN equal to NaN."""
    if a.shape != b.shape:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool((a == b).all())


def mine(launch: Launch, course_too: bool) -> bool:
    """Whether ``launch`` counts as the learner's (the course's kernels do where the lab checks
    them)."""
    return course_too or not launch.from_the_course


def _names(launches: Sequence[Launch]) -> str:
    return ", ".join(sorted({f"{x.module}.{x.kernel}" for x in launches}))


def _is_copy_of(tensor: torch.Tensor, view: torch.Tensor) -> bool:
    """``tensor`` holds ``view``'s values in memory of its own (``.contiguous()``, ``.float()``)."""
    if tuple(tensor.shape) != tuple(view.shape) or not view.numel():
        return False
    if tensor.untyped_storage().data_ptr() == view.untyped_storage().data_ptr():
        return False
    try:
        return same(tensor.detach().cpu().double(), view.detach().cpu().double())
    except RuntimeError:
        return False


def who_did_the_work(
    trace: Trace | None,
    views: Mapping[str, torch.Tensor],
    after_last_launch: torch.Tensor | None,
    *,
    course_too: bool,
) -> tuple[str, str] | None:
    """(code, sentence) when the learner's kernels did not do the work, else None.

    ``after_last_launch`` is the output as the last learner launch left it (None if none
    ran)."""
    names = list(views)
    output, inputs = names[-1], names[:-1]
    out = views[output]
    if after_last_launch is not None and not same(out.detach().cpu(), after_last_launch):
        changed = int((~_equal_cells(out.detach().cpu(), after_last_launch)).sum())
        return "no_triton_kernel", (
            f"{changed} of {out.numel()} cells of {output} changed after your kernel's last "
            "launch had finished: code outside a Triton kernel (torch, say) wrote over them. "
            f"The kernel must store the answer into {output} itself."
        )
    if trace is None:
        return None
    learner = {i for i, x in enumerate(trace.launches) if mine(x, course_too)}
    others = [x for i, x in enumerate(trace.launches) if i not in learner]
    theirs = set(range(len(trace.launches))) - learner
    stored = trace.cells("store", output, learner)
    if not bool(stored.all()):
        missing = int((~stored).sum())
        if theirs and bool(trace.cells("store", output, theirs).any()):
            return "course_kernel", (
                f"{missing} of {out.numel()} cells of {output} were not stored by your kernel "
                f"but by the course's {_names(others)}: the exercise is your own kernel."
            )
        return "no_triton_kernel", (
            f"only {out.numel() - missing} of {out.numel()} cells of {output} were stored by a "
            f"Triton kernel; the other {missing} were filled some other way (torch, say). The "
            f"kernel must store every cell of {output}."
        )
    for name in inputs:
        loaded = trace.cells("load", name, learner)
        if bool(loaded.all()):
            continue
        view = views[name]
        turned = view.t() if view.dim() == 2 else view
        if any(  # read whole through a copy (whether one in its layout: verdict.copied_input)
            (_is_copy_of(t, view) or (view.dim() == 2 and _is_copy_of(t, turned)))
            and trace.scratch_elements("load", t.untyped_storage().data_ptr(), learner) >= t.numel()
            for i in sorted(learner)
            for t in trace.launches[i].tensors
        ):
            continue
        missing = int((~loaded).sum())
        if theirs and bool(trace.cells("load", name, theirs).any()):
            return "course_kernel", (
                f"{name} was read by the course's {_names(others)}, not by your kernel: the "
                "exercise is your own kernel."
            )
        return "no_triton_kernel", (
            f"your kernel never loaded {missing} of {view.numel()} cells of {name}, yet "
            f"{output} holds the right answer: it was computed some other way (torch, say) "
            "and only moved by a kernel. The kernel must compute it from the inputs."
        )
    return None


def _equal_cells(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.is_floating_point():
        return (a == b) | (a.isnan() & b.isnan())
    return a == b


def _integers(launch: Launch) -> dict[str, int]:
    """The launch's integer arguments (constexprs included) by the kernel's parameter names."""
    try:
        given = arguments(launch)
    except (TypeError, ValueError):
        return {}
    return {name: int(value) for name, value in given.items()
            if isinstance(value, int) and not isinstance(value, bool)}  # fmt: skip


def reads(trace: Trace, inputs: Sequence[str]) -> list[Reads]:
    """What each launch that loaded any of ``inputs`` read of them, program by program, as
    plain data (:class:`~tmm_course.exercises.spec.Reads`, what an exercise's ``work`` judges),
    in launch order."""
    by_launch: dict[int, dict[str, dict[tuple[int, int, int], list[int]]]] = {}
    for access in trace.accesses:
        if access.kind == "load" and access.tensor in inputs and access.launch >= 0:
            programs = by_launch.setdefault(access.launch, {}).setdefault(access.tensor, {})
            programs.setdefault(access.program, []).extend(access.cells.tolist())
    shapes = {name: tuple(trace.views[name].shape) for name in inputs}
    found = []
    for index, cells in sorted(by_launch.items()):
        launch = trace.launches[index]
        try:
            grid = grid_of(launch)
        except (TypeError, ValueError):
            continue
        found.append(Reads(grid, _integers(launch), shapes, cells))
    return found


def shared_work(
    trace: Trace | None, inputs: Sequence[str], judge: Callable[[Reads], str | None] | None
) -> str | None:
    """The sentence of an exercise's ``work`` judge on the first launch it faults, or None."""
    if trace is None or judge is None:
        return None
    return next((said for r in reads(trace, inputs) if (said := judge(r))), None)
