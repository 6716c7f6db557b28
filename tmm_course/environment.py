"""What this machine runs the course on, and the library combinations known to break it."""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass, field

from tmm_course.backend import GPU, INTERPRETER
from tmm_course.gpu import Gpu
from tmm_course.gpus import TIERS

TRITON_MIN_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class KnownIssue:
    """A known-bad combination: what is wrong, and the one-line fix."""

    code: str
    message: str
    fix: str
    severity: str = "warning"  # "warning": things will fail; "note": a limit to know about

    def __str__(self) -> str:
        return f"{self.message} Fix: {self.fix}"


@dataclass(frozen=True)
class Environment:
    """Backend, device and versions, plus the problems they add up to."""

    backend: str
    device: str
    gpu_name: str | None
    capability: tuple[int, int] | None
    python: str
    torch: str
    triton: str
    numpy: str
    problems: tuple[KnownIssue, ...] = field(default=())

    @property
    def tier(self) -> str:
        """No GPU, or the GPU's tier and what the course does there (see :mod:`tmm_course.gpus`):
        before Ampere, Ampere or Ada, Hopper, Blackwell, consumer Blackwell."""
        if self.backend == INTERPRETER or self.capability is None:
            return "no GPU: Triton's interpreter, float16 and float32"
        tier = Gpu(self.gpu_name or "GPU", tuple(self.capability), 0, 0).tier
        return f"{tier}: {TIERS[tier]}"

    def lines(self) -> list[str]:
        """The report as lines of text."""
        gpu = "none" if self.gpu_name is None else self.gpu_name
        if self.capability is not None:
            gpu += f" (compute capability {self.capability[0]}.{self.capability[1]})"
        what = {GPU: "compiled Triton on the GPU", INTERPRETER: "Triton's interpreter on the CPU"}
        out = [
            f"backend   : {self.backend}  ({what[self.backend]})",
            f"device    : {self.device}",
            f"gpu       : {gpu}",
            f"python    : {self.python}",
            f"torch     : {self.torch}",
            f"triton    : {self.triton}",
            f"numpy     : {self.numpy}",
        ]
        out.append(f"tier      : {self.tier}")
        for p in self.problems:
            out.append(f"{p.severity:10}: {p}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def version_tuple(version: str) -> tuple[int, ...]:
    """``"3.6.0+git1a2b"`` -> ``(3, 6, 0)``; stops at the first part that is not a number."""
    parts = []
    for part in version.split("."):
        match = re.match(r"\d+", part)
        if not match:
            break
        parts.append(int(match.group()))
        if match.group() != part:
            break
    return tuple(parts)


def find_problems(
    backend: str,
    triton: str,
    numpy: str,
    capability: tuple[int, int] | None,
    gpu_name: str | None = None,
) -> list[KnownIssue]:
    """The known-bad combinations among these facts (a pure function, easy to test)."""
    problems = []
    if backend == INTERPRETER:
        if version_tuple(triton) < (3, 7) and version_tuple(numpy) >= (2, 4):
            problems.append(
                KnownIssue(
                    "interpreter_numpy",
                    f"Triton {triton}'s interpreter fails with numpy {numpy} as soon as a loop "
                    "bound is a runtime integer ('TypeError: only 0-dimensional arrays can be "
                    "converted to Python scalars'); triton >= 3.7 or numpy < 2.4 work.",
                    "pip install 'numpy<2.4'   (or: pip install 'triton>=3.7'), then restart "
                    "the kernel.",
                )
            )
        problems.append(
            KnownIssue(
                "interpreter_bf16",
                "bfloat16 is not supported on the interpreter: its tl.dot multiplies the raw "
                "bit patterns and returns wrong numbers.",
                "use torch.float16 or torch.float32 on the CPU; bfloat16 needs a GPU.",
                severity="note",
            )
        )
    if capability is not None and tuple(capability) < TRITON_MIN_CAPABILITY:
        here = Gpu(gpu_name or "This GPU", tuple(capability), 0, 0)
        problems.append(
            KnownIssue(
                "before_ampere",
                f"{here.name} has compute capability {capability[0]}.{capability[1]}, before "
                "Ampere (Triton's stated minimum is 8.0; Colab's free T4 is 7.5). Triton still "
                "compiles tl.dot here, without tensor cores, and every lesson runs; left out: "
                + "; ".join(here.skipped())
                + ".",
                "nothing needed. For tensor cores, bfloat16 and TF32 pick an L4 or A100 on Colab "
                "(Runtime > Change runtime type); for lesson 7's TMA kernel, an H100.",
                severity="note",
            )
        )
    return problems


def collect(backend: str, device: str) -> Environment:
    """Read the facts of this machine for ``backend``."""
    import numpy
    import torch
    import triton

    gpu_name = capability = None
    if torch.cuda.is_available():
        gpu_name = torch.cuda.get_device_name(0)
        capability = tuple(torch.cuda.get_device_capability(0))
    return Environment(
        backend=backend,
        device=device,
        gpu_name=gpu_name,
        capability=capability,
        python=platform.python_version(),
        torch=torch.__version__,
        triton=triton.__version__,
        numpy=numpy.__version__,
        problems=tuple(
            find_problems(backend, triton.__version__, numpy.__version__, capability, gpu_name)
        ),
    )
