"""What a GPU would make of the learner's kernels, asked of Triton's own compiler.

A kernel that passes on the interpreter (numpy on the CPU) may still be refused by a GPU's
compiler, or need more shared memory than the GPU has. For every learner kernel a check sees
launched, :class:`Compiler` compiles it ahead of time (:mod:`tmm_course.compile_ahead`) for the
GPUs the course names (:data:`tmm_course.gpus.TARGETS`: a T4, an A100, an H100/H200, a B200, an
RTX 5090), from the recorded launch: its arguments'
types, its ``tl.constexpr`` values, ``num_warps`` and ``num_stages``. The compiler's refusal is
the verdict, in its own words; what it produced (shared memory, registers, spills, the matrix
instructions) is what the check shows the learner, on any machine.

Each kernel and dtype is compiled once per check for every GPU (and cached across checks), so a
check costs a second or two more per kernel and dtype, not per case. The other specializations
a check launched (a 1x1 case turns its size-1 integers into constants, a transposed view its
unit strides) are compiled too, for one GPU, once every case passed: a kernel that only a
size-1 K makes the compiler refuse is refused, in the compiler's words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from tmm_course import gpus
from tmm_course.check.launches import Launch
from tmm_course.compile_ahead import (
    GPUS,
    Compiled,
    Specialization,
    compile_everywhere,
    front_end,
    parameters,
    specialize,
)

NOT_CONSTEXPR = "must be of type tl.constexpr"  # a block size passed as a runtime value
# the most shared memory one program may use, per GPU the course names
SHARED_MEMORY_LIMIT = {target: gpus.for_target(target).shared_per_block for target in GPUS}
SHORT_NAMES = {target: gpus.label(target) for target in GPUS}
ONE_GPU = "sm_80"  # what each further specialization is compiled for, where the targets have it
OPTIONS = ("num_warps", "num_stages")
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}


def not_constexpr(message: str) -> str:
    """Triton's refusal of a runtime block size, with the fix."""
    start = message.find(NOT_CONSTEXPR)
    said = message[max(0, message.rfind("(", 0, start) - 40) : start + len(NOT_CONSTEXPR)]
    return (
        f"a size that must be known when compiling was passed as a runtime value ({said.strip()})."
        " Fix: annotate the kernel's argument, e.g. BLOCK: tl.constexpr."
    )


def fits(compiled: Compiled) -> Compiled:
    """``compiled``, refused in the words Triton's launcher uses when its shared memory (or
    tensor memory, on a B200) does not fit the GPU."""
    if not compiled.ok:
        return compiled
    card = gpus.for_target(compiled.gpu)
    for resource, used, limit in (
        ("shared memory", compiled.shared_bytes, card.shared_per_block),
        ("tensor memory", compiled.tensor_memory, card.tensor_memory),
    ):
        if used and used > limit:
            return dataclasses.replace(
                compiled,
                ok=False,
                error=f"out of resource: {resource}, Required: {used}, Hardware limit: "
                f"{limit}. Reducing block sizes or `num_stages` may help.",
            )
    return compiled


@dataclass
class KernelReport:
    """One learner kernel, one specialization, compiled for every GPU the course names."""

    kernel: str
    launch: str  # what it was compiled for: dtypes, constexprs, warps, stages
    compiled: dict[str, Compiled]

    @property
    def refused(self) -> list[Compiled]:
        return [c for c in self.compiled.values() if not c.ok]

    def refusal(self) -> str | None:
        """The sentence for a learner when some GPU refuses the kernel, else None."""
        refused = self.refused
        if not refused:
            return None
        said = {c.error for c in refused}
        if len(said) == 1:  # one sentence for every GPU that refused
            where = (
                f"every GPU the course names ({', '.join(SHORT_NAMES.values())})"
                if len(refused) == len(GPUS)
                else " and ".join(c.gpu_name for c in refused)
            )
            return (
                f"the GPU compiler refuses {self.kernel} ({self.launch}) for {where}; it says: "
                f"{refused[0].error}"
            )
        each = "; ".join(f"for {c.gpu_name}: {c.error}" for c in refused)  # each its own limit
        return f"the GPU compiler refuses {self.kernel} ({self.launch}) {each}"

    def rows(self) -> list[dict[str, object]]:
        """One row per GPU, as plain data (for the HTML and the grader)."""
        return [
            {
                "kernel": self.kernel,
                "launch": self.launch,
                "gpu": f"{SHORT_NAMES[name]} ({name})",
                "ok": c.ok,
                "error": c.error,
                "shared_kb": None if c.shared_bytes is None else round(c.shared_bytes / 1024, 1),
                "registers": c.registers,
                "spilled_bytes": c.spilled_bytes,
                "matrix_unit": c.matrix_unit,
                "tensor_memory": c.tensor_memory,
                "programs_per_sm": c.occupancy.programs if c.occupancy else None,
            }
            for name, c in self.compiled.items()
        ]


def _describe(
    launch: Launch, constexprs: dict, options: dict, spec: Specialization | None = None
) -> str:
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in launch.tensors})
    blocks = ", ".join(
        f"{name}={value}"
        for name, value in constexprs.items()
        if isinstance(value, int) and not isinstance(value, bool) and name.isupper()
    )
    ones = (
        ", ".join(n for n, kind in spec.signature.items() if kind == "constexpr" and
                  constexprs.get(n) == 1 and not isinstance(constexprs.get(n), bool))
        if spec is not None else ""
    )  # fmt: skip
    parts = [
        "/".join(dtypes),
        blocks,
        f"{ones} = 1 (constants)" if ones else "",
        f"{options['num_warps']} warps, {options['num_stages']} stages",
    ]
    return "; ".join(p for p in parts if p)


@dataclass
class Compiler:
    """Compiles each learner kernel a check sees once per distinct specialization, for
    ``targets`` (every GPU the course names, unless an exercise says otherwise:
    :attr:`tmm_course.exercises.spec.Exercise.gpus`)."""

    targets: tuple[str, ...] = tuple(GPUS)
    reports: dict[tuple, KernelReport] = field(default_factory=dict)
    # the further specializations seen: (launch, its specialization, options, cases), by key
    pending: dict[tuple, tuple[Launch, Specialization, dict, list]] = field(default_factory=dict)
    covered: set[tuple] = field(default_factory=set)  # specializations compiled already

    def judge(self, launched: Iterable[Launch], case: object = None) -> KernelReport | None:
        """Compile what is new among ``launched`` (the course's own kernels are known to
        compile, and are left out); the first report some GPU refuses, or None. A further
        specialization of a kernel compiled already is kept for :meth:`further` (with
        ``case``, the case that launched it)."""
        refused = None
        for launch in launched:
            if launch.jit is None or launch.from_the_course:
                continue
            report = self._report(launch, case)
            if report is not None and report.refused and refused is None:
                refused = report
        return refused

    def further(self) -> list[tuple[KernelReport, list]]:
        """Put each further specialization (the same kernel, some size-1 integer a constant)
        through Triton's front end for one GPU, where a constant breaks what it breaks
        (:func:`~tmm_course.compile_ahead.front_end`; its tiles, and so its memory, are those
        compiled already); (report, cases) for each the compiler refuses."""
        refused = []
        gpu = ONE_GPU if ONE_GPU in self.targets else self.targets[0]
        for key, (launch, spec, options, cases) in self.pending.items():
            compiled = front_end(launch.jit, spec, gpu, **options)
            report = KernelReport(
                launch.kernel,
                _describe(launch, spec.constexprs, options, spec),
                {gpu: compiled},
            )
            self.covered.add(key)
            if report.refused:
                self.reports[key] = report
                refused.append((report, cases))
        self.pending.clear()
        return refused

    def _report(self, launch: Launch, case: object = None) -> KernelReport | None:
        options = {
            **DEFAULT_OPTIONS,
            **{k: launch.kwargs[k] for k in OPTIONS if k in launch.kwargs},
        }
        try:
            spec = specialize(launch.jit, launch.args, launch.kwargs)
        except (TypeError, ValueError):  # an argument the compiler has no type for
            return None
        # one compile per kernel, argument types and constexprs: the 1x1 case's size-1
        # integers (constants to the compiler) and alignment do not make a new one
        declared = {name for name, is_constexpr in parameters(launch.jit) if is_constexpr}
        kinds = tuple(
            (name, repr(spec.constexprs[name]) if name in declared else _kind(kind))
            for name, kind in spec.signature.items()
        )
        key = (id(getattr(launch.jit, "fn", launch.jit)), kinds, tuple(options.items()))
        exact = (key, _signature_key(spec))
        if key not in self.reports:
            compiled = compile_everywhere(launch.jit, spec, targets=self.targets, **options)
            self.reports[key] = KernelReport(
                launch.kernel,
                _describe(launch, spec.constexprs, options),
                {name: fits(compiled[name]) for name in self.targets},
            )
            self.covered.add(exact)
        elif exact not in self.covered:
            entry = self.pending.setdefault(exact, (launch, spec, options, []))
            if case is not None and case not in entry[3]:
                entry[3].append(case)
        return self.reports[key]

    def rows(self) -> list[dict[str, object]]:
        return [row for report in self.reports.values() for row in report.rows()]


def _signature_key(spec: Specialization) -> tuple:
    """A specialization's types and constexprs, alignment left out: what makes a compile the
    compiler may refuse (a size-1 integer is a constant)."""
    return (
        tuple(spec.signature.items()),
        tuple((name, repr(value)) for name, value in spec.constexprs.items()),
    )


def _kind(kind: str) -> str:
    return "int" if kind in ("i32", "i64", "constexpr") else kind
