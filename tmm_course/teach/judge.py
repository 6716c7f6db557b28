"""The grader's side of a case: the frames that hand it to the workers and the reduction of
their answers to what the one judge decides from (:mod:`tmm_course.check.verdict`).

The judge never runs student Python. For each exercise it draws the exercise's cases
(:mod:`tmm_course.exercises`: the one spec the learner's check runs too) from a secret seed, and
for each case:

1. has the recording worker call the learner's function on the same case drawn again with other
   values (:meth:`~tmm_course.exercises.spec.Case.again`), only to record which kernels it
   launches (:mod:`tmm_course.check.record`); what that call computed never comes back;
2. reads the record as untrusted data (:func:`read_record`: the kernels must be Triton,
   :mod:`.triton_only`) and asks the judge whether it decides the case alone
   (:func:`~tmm_course.check.verdict.from_record`: no kernel, a course kernel, a host copy);
3. has a replay worker, a process that ran no cell, launch those kernels on the secret case:
   inputs and output framed as the check frames them (:mod:`tmm_course.check.buffers`), every
   buffer the launcher made refilled with poison (a constant fill kept);
4. reduces the storages and the facts that come back to a
   :class:`~tmm_course.check.verdict.Stored` and lets the judge decide
   (:func:`~tmm_course.check.verdict.judge_stored`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tmm_course.check import verdict
from tmm_course.check.buffers import Framed, as_bytes, framed, guarded_output, same_bits
from tmm_course.check.result import Case as Result
from tmm_course.exercises.spec import Case, Exercise
from tmm_course.teach import triton_only

RECORD_BYTES = 4 * 2**20  # the most a launch record may be
Replied = tuple[dict, list[bytes] | None]  # a replay worker's reply and the storages it sent


def output_frame(case: Case, nan: bool = True, gen: torch.Generator | None = None) -> Framed:
    """The case's output as the check frames it, holding poison (NaN, or with ``nan`` False
    random numbers, so that no kernel can tell the judge's output by its NaN) or, for an update
    such as C = alpha*A@B + beta*C, C."""
    fill = case.initial
    if fill is None and not nan and case.output.dtype.is_floating_point:
        fill = torch.randn(tuple(case.output.shape), generator=gen)
    out = case.output
    return guarded_output(out.shape, out.dtype, out.row_gap, device="cpu", fill=fill).frame


@dataclass
class Trial:
    """One case as the judge sends it: the tensors' frames (inputs, then the output) and the
    function's arguments."""

    exercise: Exercise
    case: Case
    buffers: list[Framed]
    poison: torch.Tensor | None = None  # what the output held before the launches

    @classmethod
    def of(cls, exercise: Exercise, case: Case, nan: bool = True, gen=None) -> Trial:
        out = output_frame(case, nan, gen)
        poison = out.view().clone() if case.initial is None else None
        return cls(exercise, case, [framed(t, "cpu") for t in case.tensors] + [out], poison)

    def request(self, op: str, extra_blobs: Sequence[bytes] = (),
                values: bool = True) -> tuple[dict, list[bytes]]:  # fmt: skip
        """The frame that hands this case to a worker: every tensor's storage (after
        ``extra_blobs``; with ``values`` False its size alone, for a call whose launches never
        run), the scalars, and the order the function takes them in."""
        args: list[dict] = []
        tensors = iter(range(len(self.buffers)))
        for value in [*self.case.inputs, None]:
            if isinstance(value, torch.Tensor) or value is None:
                index = next(tensors)
                args.append(spec(self.buffers[index], len(extra_blobs) + index))
                if not values:
                    args[-1]["numel"] = self.buffers[index].storage.numel()
            else:
                args.append({"kind": "scalar", "value": value})
        order = self.exercise.arguments(list(range(len(args) - 1)), len(args) - 1)
        blobs = [*extra_blobs, *(as_bytes(b.storage) if values else b""
                                 for b in self.buffers)]  # fmt: skip
        header = {"op": op, "exercise": self.exercise.name, "name": self.exercise.function,
                  "args": args, "order": order, "tensors": list(self.exercise.tensors)}  # fmt: skip
        return header, blobs

    def sizes(self) -> list[int]:
        return [b.storage.numel() * b.storage.element_size() for b in self.buffers]


def spec(buffer: Framed, blob: int) -> dict:
    return {
        "kind": "tensor",
        "dtype": str(buffer.storage.dtype).removeprefix("torch."),
        "size": list(buffer.size),
        "stride": list(buffer.stride),
        "offset": buffer.offset,
        "blob": blob,
    }


def read_record(data: bytes) -> dict | tuple[str, str]:
    """The launch record the recording worker sent, or (code, why) when it is not one:
    ``gpu_would_reject`` for a kernel that is not Triton, ``crashed`` for anything else."""
    try:
        record = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        return ("crashed", f"the launch record is not JSON: {error}"[:300])
    problem = triton_only.record_problem(record)
    if problem is None:
        return record
    code = "gpu_would_reject" if problem.startswith("the kernel ") else "crashed"
    return (code, problem)


def judge_record(trial: Trial, record: dict) -> Result | None:
    """The judge's verdict from the record alone, or None when its kernels are replayed."""
    return verdict.from_record(trial.exercise, trial.case, record)


def judge_replay(trial: Trial, reply: dict, returned: list[bytes] | None) -> Result:
    """The verdict on one case from the replay worker's answer: the storages it sent back and
    what the memory guard saw, reduced to a :class:`~tmm_course.check.verdict.Stored`, with
    the programs its grids ran and those that touched no memory (for
    :func:`~tmm_course.check.verdict.too_many_programs`)."""
    facts = replayed(trial, reply, returned)
    if isinstance(facts, Result):
        return facts
    found = verdict.judge_stored(trial.exercise, trial.case, facts)
    programs, idle = reply.get("programs"), reply.get("idle")
    if type(programs) is int and type(idle) is int and 0 <= idle <= programs:
        found.programs, found.idle = programs, idle
    return found


def judge_zeroed(
    trial: Trial, record: dict, found: Result, poisoned: Replied, zeroed: Replied
) -> Result:
    """``found``, the verdict on the replay ``poisoned`` (the worker's reply and storages), or
    ``uninitialised_buffer`` where the replay ``zeroed``, the launcher's poisoned buffers
    zeroed instead, is right (:func:`~tmm_course.check.verdict.uninitialised`)."""
    first, again = replayed(trial, *poisoned), replayed(trial, *zeroed)
    if not isinstance(first, verdict.Stored) or not isinstance(again, verdict.Stored):
        return found
    return verdict.uninitialised(trial.exercise, trial.case, record, first.out, again) or found


def replayed(trial: Trial, reply: dict, returned: list[bytes] | None) -> verdict.Stored | Result:
    """The replay worker's answer as a :class:`~tmm_course.check.verdict.Stored`, or the
    case's outcome where the replay did not finish."""
    case = trial.case
    if not reply.get("ok"):
        kind = reply.get("error_type", "error")
        text = f"{reply.get('error', '')}"[:300]
        if kind in ("gpu_would_reject", "timed_out"):
            return verdict.result(case, code=kind, problem=text, cause=text)
        return verdict.result(case, code="crashed", problem=f"{kind}: {text}")
    assert returned is not None
    stored = [
        torch.frombuffer(bytearray(data), dtype=b.storage.dtype)
        for b, data in zip(trial.buffers, returned, strict=True)
    ]
    *inputs, out = trial.buffers
    stray = reply.get("stray") or {}
    outside = reply.get("outside") or {}
    stray_store = stray.get("text") if stray.get("kind") == "store" else None
    if stray_store is None and outside.get("store"):
        stray_store = f"stored lanes outside {_names(outside['store'])}"
    stray_load = stray.get("text") if stray.get("kind") == "load" else None
    if stray_load is None and outside.get("load"):
        stray_load = f"loaded lanes outside {_names(outside['load'])}"
    region = out.covered()
    loaded, unstored = reply.get("output_loaded"), reply.get("unstored")
    return verdict.Stored(
        out.view(stored[-1]),
        trial.poison,
        inputs_changed=not all(
            same_bits(s, b.storage) for b, s in zip(inputs, stored, strict=False)
        ),
        canaries_intact=same_bits(stored[-1][~region], out.storage[~region]),
        stray_store=None if stray_store is None else str(stray_store)[:300],
        stray_load=None if stray_load is None else str(stray_load)[:300],
        output_loaded=loaded if isinstance(loaded, bool) else None,
        unstored=unstored if type(unstored) is int and unstored >= 0 else None,
        unshared=str(reply["unshared"]) if reply.get("unshared") else None,
        shows=bool(reply.get("shows")) if trial.exercise.requires is not None else None,
    )


def _names(counts: object) -> str:
    return ", ".join(str(k) for k in counts) if isinstance(counts, dict) else "a tensor"
