"""Lesson 6: predict what a knob does before turning it. The learner is shown one launch of
lesson 4's kernel (:data:`START`) and one change (:data:`CHANGE`), and states, as data
(``my_prediction``, a dict), which way each of the compiler's figures goes for an H100
(``sm_90``): registers per thread, spills, shared memory, FLOPs per byte loaded and programs
per SM. The check compiles both launches (``tmm_course.check.prediction``: lesson 4's
``matmul()`` on a float16 ``4096^3`` product, noted and not run, through the check's compile
gate) and :func:`judge` compares each prediction with the figures, naming the wrong ones and
the figure that shows it. Nothing here is typed from a compile: every figure is read from
:class:`~tmm_course.compile_ahead.Compiled` when the check runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from tmm_course.compile_ahead import Compiled
from tmm_course.exercises.spec import Cells, Exercise, Goal, Prediction
from tmm_course.perf.intensity import tile_intensity
from tmm_course.perf.knobs import Knobs

START = Knobs(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=3)
CHANGED = replace(START, block_n=256)
CHANGE = "BLOCK_N from 128 to 256 (BLOCK_M, BLOCK_K, warps and stages as they were)"
TARGET = "sm_90"  # an H100 (or H200): what the figures are compiled for
SIZE = 4096  # float16 SIZE^3: the product both launches are compiled at

# what the learner predicts, and the values each prediction may take
DIRECTIONS = ("up", "down", "same")
ANSWERS: dict[str, tuple[object, ...]] = {
    "registers per thread": DIRECTIONS,
    "spills": (True, False),  # does the changed launch spill registers?
    "shared memory": DIRECTIONS,
    "FLOPs per byte loaded": DIRECTIONS,
    "programs per SM": DIRECTIONS,
}
NAME = "my_prediction"  # what the exercise cell binds


@dataclass(frozen=True)
class Figures:
    """What one launch compiled to for :data:`TARGET`, as the prediction names its figures."""

    registers: int
    spilled_bytes: int
    shared_bytes: int
    flops_per_byte: float  # of the float16 tile (lesson 6's section 1), from its sizes
    programs: int  # per SM, from the registers, shared memory and warps the compiler reports
    limited_by: str

    @classmethod
    def of(cls, knobs: Knobs, compiled: Compiled) -> Figures:
        held = compiled.occupancy
        if not compiled.ok or held is None:
            raise RuntimeError(
                f"lesson 4's kernel at {knobs.label} did not compile for {compiled.gpu} "
                f"({compiled.error or 'no registers reported: cuobjdump missing'})"
            )
        return cls(compiled.registers or 0, compiled.spilled_bytes or 0,
                   compiled.shared_bytes or 0,
                   tile_intensity(knobs.block_m, knobs.block_n, element_bytes=2),
                   held.programs, held.limited_by)  # fmt: skip


def direction(before: float, after: float) -> str:
    """'up', 'down' or 'same': how a figure moved."""
    return "same" if after == before else ("up" if after > before else "down")


def truths(before: Figures, after: Figures) -> dict[str, tuple[object, str]]:
    """Per prediction: the right answer and the figures that show it."""
    b, a = before, after
    return {
        "registers per thread": (direction(b.registers, a.registers),
                                 f"{b.registers} -> {a.registers} registers per thread"),
        "spills": (a.spilled_bytes > 0,
                   f"{a.spilled_bytes} bytes spilled per thread after (before: "
                   f"{b.spilled_bytes})"),
        "shared memory": (direction(b.shared_bytes, a.shared_bytes),
                          f"{b.shared_bytes / 1024:.0f} KB -> {a.shared_bytes / 1024:.0f} KB "
                          "of shared memory per program"),
        "FLOPs per byte loaded": (direction(round(b.flops_per_byte, 6),
                                            round(a.flops_per_byte, 6)),
                                  f"{b.flops_per_byte:.1f} -> {a.flops_per_byte:.1f} FLOP per "
                                  "byte loaded"),
        "programs per SM": (direction(b.programs, a.programs),
                            f"{b.programs} -> {a.programs} programs per SM (after: limited by "
                            f"{a.limited_by})"),
    }  # fmt: skip


def problem(prediction: object) -> str | None:
    """What is wrong with the shape of a prediction (not its answers), or None."""
    if not isinstance(prediction, Mapping):
        return (f"{NAME} must be a dict, not a {type(prediction).__name__}: keep the cell's "
                "dict and fill in its values")  # fmt: skip
    missing = [k for k in ANSWERS if k not in prediction]
    extra = [str(k) for k in prediction if k not in ANSWERS]
    if missing or extra:
        return (f"{NAME} must have exactly the keys {', '.join(map(repr, ANSWERS))}"
                + (f"; missing {', '.join(map(repr, missing))}" if missing else "")
                + (f"; unknown {', '.join(map(repr, extra))}" if extra else ""))  # fmt: skip
    for key, allowed in ANSWERS.items():
        value = prediction[key]
        if value is not None and (value not in allowed or type(value) is not type(allowed[0])):
            return (f"{NAME}[{key!r}] is {value!r}: expected one of "
                    f"{', '.join(map(repr, allowed))} (or None while undecided)")  # fmt: skip
    return None


def judge(prediction: object, compiled: Callable[[Knobs], Compiled]) -> list[Goal]:
    """One goal per prediction: met when it agrees with the compiler (``compiled(knobs)``:
    what a launch compiles to, asked of :data:`START` and :data:`CHANGED` once the prediction
    can be judged); a miss names the prediction and the figure that shows it. Left at None:
    not implemented."""
    said = problem(prediction)
    if said is not None:
        return [Goal(f"{NAME} is a prediction of each figure", False, said, "crashed",
                     f"The prediction cannot be read: {said}.")]  # fmt: skip
    assert isinstance(prediction, Mapping)
    if all(prediction[k] is None for k in ANSWERS):
        return [Goal(f"predict each figure for {CHANGE}", False, "every value still None",
                     "not_implemented", f"The prediction is not made yet: fill in {NAME} "
                     "(each value, then run this check).")]  # fmt: skip
    found = truths(Figures.of(START, compiled(START)), Figures.of(CHANGED, compiled(CHANGED)))
    wrong = {k: shown for k, (right, shown) in found.items()
             if prediction[k] is not None and prediction[k] != right}  # fmt: skip
    each = "; ".join(f"{k} (you said {prediction[k]!r}): {shown}" for k, shown in wrong.items())
    verb = "is" if len(wrong) == 1 else "are"
    fix = (f"{len(wrong)} of {len(found)} predictions {verb} not what the compiler shows for an "
           f"H100 ({TARGET}): {each}.")  # fmt: skip
    goals = []
    for key, (_, shown) in found.items():
        yours = prediction[key]
        asks = f"{key}: you said {yours!r}"
        if yours is None:
            goals.append(Goal(asks, False, "not predicted yet", "not_implemented",
                              f"{key}: not predicted yet (the value is None)."))  # fmt: skip
        else:
            met = key not in wrong
            goals.append(Goal(asks, met, f"the compiler: {shown}", "wrong_prediction",
                              "" if met else fix))  # fmt: skip
    return goals


def _no_cases(*_: object) -> list:  # a prediction runs no function on cases
    return []


EXERCISE = Exercise(
    name="predict_knob",
    lesson=6,
    function=NAME,
    signature=f"{NAME} = {{...}}",
    tensors=(),
    cases=_no_cases,
    cells=Cells("06_making_it_fast", "mf22p", "mf22q", "mf22r"),
    predicts=Prediction(NAME, TARGET, SIZE, judge),
)
