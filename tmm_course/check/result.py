"""What a check says: a verdict, the cases it ran, and diagnoses in plain words, shown as text,
as HTML (with a picture of the learner's kernel when it failed on the interpreter) and as data
the batch grader reads."""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tmm_course.check.memory_guard import Trace
    from tmm_course.exercises.spec import Goal

RESULT_MIMETYPE = "application/vnd.tmm-course.check+json"

# what fixes a kernel that is right for contiguous tensors only
OWN_STRIDES = ("compute each tensor's addresses from its own .stride(0) and .stride(1), not from "
               "its shape nor from another tensor's strides.")  # fmt: skip
# the sentence for each code, unless a case or an exercise gives a more precise one
MESSAGES = {
    "not_implemented": "The exercise is not done yet: the launcher still raises "
    "NotImplementedError. Fill in the kernel and its launch, then run the check again.",
    "crashed": "The launcher raised an error (shown in the case list); read its last line first.",
    "gpu_would_reject": "A GPU would refuse this kernel: Triton's compiler, run ahead of time "
    "for a T4, an A100, an H100/H200, a B200 and an RTX 5090, stopped it (the case list gives "
    "its words).",
    "timed_out": "A case did not finish within the time limit: a loop that never ends? Check "
    "every loop's bounds, and that its counter advances.",
    "host_copy": "The launcher copied an input on the host in another layout (transposed, or "
    "gathered from a strided view) for a kernel to read: read it in place, through its strides.",
    "uninitialised_buffer": "A buffer the launcher made with torch.empty (or the like) was "
    "read, or added into, before a kernel wrote it: its memory holds whatever was there. Make "
    "it with torch.zeros, or store into it first.",
    "no_triton_kernel": "No Triton kernel was launched: the output was filled some other way "
    "(torch, say), or not at all. The exercise is to write a Triton kernel and launch it.",
    "no_descriptor": "The values are right, but compiled for an H200 a kernel loads or stores "
    "through pointers, not tensor descriptors alone (no TMA copies there): build "
    "TensorDescriptor.from_tensor on the host for a, w and c, pass them, and use "
    "desc.load([row, col]) and c_desc.store([row, col], tile).",
    "goal_missed": "The launch misses a goal set by the compiler's figures (or, on a GPU, by "
    "the clock): the case list names the knob to turn.",
    "too_many_programs": "The values are right, but most programs of the grid did nothing: "
    "launch one program per tile, triton.cdiv(n, BLOCK) on each axis.",
    "wrong_prediction": "A prediction is not what the compiler shows: the case list names "
    "each wrong one and the figure, before and after the change, that shows it.",
    "course_kernel": "The output was written by one of the course's own kernels (tmm_course), "
    "not by a kernel written here.",
    "modified_input": "The kernel stored into one of its inputs: an input is read only. Store "
    "into the output alone (is an output pointer passed where an input's is expected?).",
    "out_of_bounds_read": "The kernel loaded lanes outside its inputs' elements (the check did "
    "not perform them; the case list says where): a load mask is missing, or an offset or "
    "stride is wrong.",
    "out_of_bounds_write": "The kernel stored (or added, with a tl.atomic_*) lanes outside "
    "the output's elements or outside every tensor it was given (the case list says where): a "
    "store or atomic mask is missing, or an offset or stride is wrong.",
    "unwritten": "Some cells were never stored (they still hold the poison the check wrote): "
    "the grid may be too small, or the store mask too strict.",
    "reads_c_when_beta_zero": "C was read although beta == 0: with beta = 0, BLAS never reads C "
    "(it may hold NaN, and 0 * NaN is NaN). Load C only when beta != 0.",
    "transposed": "The result matches a transposed answer: an index or a stride is paired with "
    "the wrong axis (the case list says which).",
    "precision": "The values are close but the error grows with K, the signature of a float16 "
    "accumulator: keep acc in float32 (tl.zeros(..., dtype=tl.float32)) and cast only when "
    "storing.",
    "ragged_edge": "Right when the sizes are multiples of the block, wrong otherwise: edge "
    "tiles need masks on every axis.",
    "ignores_strides": "Right for contiguous tensors, wrong for transposed or sliced views: "
    + OWN_STRIDES,
    "wrong_values": "Some cells hold wrong values, on aligned and ragged shapes alike: re-check "
    "the formula each lane computes and which index goes with which axis.",
}


COMPILED_COLUMNS = (
    "kernel",
    "compiled for",
    "GPU",
    "verdict",
    "shared memory",
    "registers / thread",
    "spilled",
    "tl.dot runs on",
    "programs / SM",
)


@dataclass(frozen=True)
class Diagnosis:
    """One finding: a stable code and a sentence a learner understands."""

    code: str
    message: str


@dataclass
class Case:
    """One run of the launcher and what the check saw."""

    label: str
    shape: tuple[int, ...]
    ragged: tuple[str, ...] = ()  # the axes that are not multiples of 64 ("M", "N", "K")
    strided: tuple[str, ...] = ()  # the tensors that are not contiguous
    passed: bool = False
    problem: str = ""
    code: str | None = None  # the diagnosis this case alone points to
    cause: str = ""  # a precise sentence for ``code``, when the case knows one
    trace: Trace | None = field(default=None, repr=False)  # its loads and stores (interpreter)
    explains: tuple[str, ...] = ()  # diagnoses the cause explains away
    ambiguous: bool = False  # the cause is one of two that give the same values
    known: bool = False  # the cause is a known mistake's, matched on the values stored
    secondary: bool = False  # a GPU refused this dtype only, having compiled another
    # the programs its kernels' grids launched, and those that touched no memory (0, 0: loads
    # and stores not traced)
    programs: int = 0
    idle: int = 0
    # the inputs whose strides are the output's (None: its values were not judged)
    alike: tuple[str, ...] | None = None


@dataclass
class CheckResult:
    """The verdict of a check, the cases it tried and its diagnoses (the first is primary)."""

    exercise: str
    passed: bool
    cases: list[Case]
    diagnoses: list[Diagnosis] = field(default_factory=list)
    # what each learner kernel compiled to per GPU, one row per kernel and GPU (see
    # tmm_course.check.gpu_rules.KernelReport.rows)
    compiled: list[dict] = field(default_factory=list)

    @property
    def codes(self) -> list[str]:
        return [d.code for d in self.diagnoses]

    @property
    def primary(self) -> Diagnosis | None:
        return self.diagnoses[0] if self.diagnoses else None

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        lines = [
            f"{self.exercise}: {verdict} ({sum(c.passed for c in self.cases)} of "
            f"{len(self.cases)} cases passed)"
        ]
        lines += [f"  [{d.code}] {d.message}" for d in self.diagnoses]
        for case in self.cases:
            mark = "ok  " if case.passed else "FAIL"
            lines.append(f"  {mark} {case.label}" + (f": {case.problem}" if case.problem else ""))
        return "\n".join(lines)

    __repr__ = __str__

    def as_dict(self) -> dict:
        """The result as plain data (what the batch grader reads)."""
        return {
            "exercise": self.exercise,
            "passed": self.passed,
            "codes": self.codes,
            "messages": [d.message for d in self.diagnoses],
            "cases": [
                {"label": c.label, "passed": c.passed, "problem": c.problem} for c in self.cases
            ],
            "compiled": self.compiled,
        }

    @classmethod
    def from_dict(cls, data: dict) -> CheckResult:
        """The inverse of :meth:`as_dict`."""
        cases = [
            Case(c["label"], (), passed=c["passed"], problem=c["problem"]) for c in data["cases"]
        ]
        messages = data.get("messages") or [MESSAGES.get(code, "") for code in data["codes"]]
        diagnoses = [Diagnosis(c, m) for c, m in zip(data["codes"], messages, strict=True)]
        return cls(
            data["exercise"], data["passed"], cases, diagnoses, list(data.get("compiled", []))
        )

    def traced_failure(self) -> Case | None:
        """The failing case whose record of loads and stores makes the clearest picture: the
        largest output, among those whose sides are all more than one cell."""
        traced = [c for c in self.cases if not c.passed and c.trace is not None]
        if not traced:
            return None

        def clarity(case: Case) -> tuple[bool, int]:
            out = list(case.trace.views.values())[-1]
            return (min(out.shape, default=0) > 1, out.numel())

        return max(traced, key=clarity)

    def picture(self):
        """Where the learner's kernel read and wrote in the first traced failing case."""
        from tmm_course.viz.accesses import accesses_figure

        case = self.traced_failure()
        if case is None:
            raise ValueError(
                "no failing case was traced: pictures come from the interpreter's record of "
                "every load and store (run the check with TMM_BACKEND=interpreter)"
            )
        return accesses_figure(case.trace, case.label)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {
            "text/plain": str(self),
            "text/html": self._repr_html_(),
            RESULT_MIMETYPE: self.as_dict(),
        }

    def _picture_html(self) -> str:
        if self.passed or self.traced_failure() is None:
            return ""
        buffer = io.BytesIO()
        self.picture().savefig(buffer, format="png", dpi=80, bbox_inches="tight")
        data = base64.b64encode(buffer.getvalue()).decode()
        return f"<img alt='where the kernel read and wrote' src='data:image/png;base64,{data}'/>"

    def _compiled_html(self) -> str:
        """What each learner kernel compiled to on each GPU the course names."""
        if not self.compiled:
            return ""
        units = {"tcgen05": "tcgen05 (Blackwell tensor cores)",
                 "wgmma": "wgmma (Hopper tensor cores)", "mma": "mma.sync (tensor cores)",
                 "fma": "FMA (no tensor cores)", "none": "no tl.dot", None: ""}  # fmt: skip
        rows = []
        for row in self.compiled:
            if row["ok"]:
                cells = [
                    "compiles",
                    f"{row['shared_kb']} KB",
                    str(row["registers"]),
                    f"{row['spilled_bytes']} B",
                    units.get(row["matrix_unit"], str(row["matrix_unit"]))
                    + (
                        f", {row['tensor_memory']} tensor-memory columns"
                        if row.get("tensor_memory")
                        else ""
                    ),
                    str(row.get("programs_per_sm") or ""),
                ]
            else:
                cells = [f"refused: {row['error']}", "", "", "", "", ""]
            rows.append(
                f"<tr><td>{html.escape(str(row['kernel']))}</td>"
                f"<td>{html.escape(str(row['launch']))}</td><td>{html.escape(str(row['gpu']))}</td>"
                + "".join(f"<td>{html.escape(c)}</td>" for c in cells)
                + "</tr>"
            )
        head = "".join(f"<th>{h}</th>" for h in COMPILED_COLUMNS)
        return (
            "<details><summary>What your kernel compiles to on each GPU (Triton's compiler, run "
            "here on the CPU)</summary>"
            f"<table><tr>{head}</tr>{''.join(rows)}</table></details>"
        )

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        verdict = "PASS" if self.passed else "FAIL"
        rows = "".join(
            f"<tr><td>{'✔' if c.passed else '✘'}</td><td>{html.escape(c.label)}</td>"
            f"<td>{html.escape(c.problem)}</td></tr>"
            for c in self.cases
        )
        found = "".join(
            f"<li><code>{d.code}</code>: {html.escape(d.message)}</li>" for d in self.diagnoses
        )
        return (
            f"<div class='tmm-check'><b style='color:{colour}'>{verdict}</b> "
            f"{html.escape(self.exercise)}<ul>{found}</ul>{self._picture_html()}"
            f"<table>{rows}</table>{self._compiled_html()}</div>"
        )


def from_goals(name: str, goals: list[Goal]) -> CheckResult:
    """The verdict from goals (an exercise's figures at scale, the clock's): the first missed
    goal that is not merely unanswered names the cause (else the first unanswered one)."""
    cases = [Case(g.asks, (), passed=g.met, problem=g.seen, code=None if g.met else g.code)
             for g in goals]  # fmt: skip
    missed = [g for g in goals if not g.met]
    first = next((g for g in missed if g.code != "not_implemented"), missed[0] if missed else None)
    diagnoses = []
    if first is not None:
        diagnoses.append(
            Diagnosis(first.code, first.fix or f"{first.asks}: not yet ({first.seen}).")
        )
    return CheckResult(name, not missed, cases, diagnoses)
