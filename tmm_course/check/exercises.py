"""Checks for the exercises. Each takes the learner's launcher and returns a
:class:`~tmm_course.check.engine.CheckResult`: a verdict, the cases tried and diagnoses.

Every call draws fresh random inputs over several shapes (1x1, aligned, ragged, tall, skinny,
and non-contiguous where strides matter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

import tmm_course
from tmm_course.check.engine import (
    Case,
    CheckResult,
    Trial,
    guarded_output,
    run_trials,
)
from tmm_course.numerics import relative_rms, tolerance

__all__ = [
    "CheckResult",
    "check_fill_column_major",
    "check_matmul",
    "check_outer_product",
    "check_scaled_matmul",
    "check_strided_copy",
    "check_transpose",
]

ALIGNED = [(64, 64), (32, 128)]
RAGGED = [(1, 1), (5, 7), (33, 17), (70, 3), (3, 70)]


def _label(shape: tuple[int, int], ragged: bool, note: str = "") -> str:
    kind = "ragged" if ragged else "aligned"
    return f"{shape[0]}x{shape[1]} {kind}" + (f", {note}" if note else "")


def _shapes() -> list[tuple[tuple[int, int], bool]]:
    return [(s, False) for s in ALIGNED] + [(s, True) for s in RAGGED]


def check_fill_column_major(fn: Callable[[torch.Tensor], object]) -> CheckResult:
    """Lesson 1: ``fn(out)`` must set ``out[i, j] = j * M + i`` (the column-major index)."""
    trials = []
    for shape, ragged in _shapes():
        m, n = shape
        i = torch.arange(m, device=tmm_course.DEVICE)[:, None]
        j = torch.arange(n, device=tmm_course.DEVICE)[None, :]
        wrong = [("transposed", (i * n + j).float())] if m > 1 and n > 1 else []
        trials.append(
            Trial(
                case=Case(_label(shape, ragged), shape, ragged=ragged),
                inputs=(),
                guard=guarded_output(shape, torch.float32),
                expected=(j * m + i).float(),
                wrong_answers=wrong,
            )
        )
    return run_trials("fill_column_major", fn, trials)


def check_outer_product(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
) -> CheckResult:
    """Lesson 2: ``fn(x, y, out)`` must set ``out[i, j] = x[i] * y[j]`` by broadcasting."""
    trials = []
    for shape, ragged in _shapes():
        m, n = shape
        x = torch.randn(m, device=tmm_course.DEVICE)
        y = torch.randn(n, device=tmm_course.DEVICE)
        wrong = [("transposed", y[:, None] * x[None, :])] if m == n and m > 1 else []
        trials.append(
            Trial(
                case=Case(_label(shape, ragged), shape, ragged=ragged),
                inputs=(x, y),
                guard=guarded_output(shape, torch.float32),
                expected=x[:, None] * y[None, :],
                wrong_answers=wrong,
                atol=1e-6,
            )
        )
    return run_trials("outer_product", fn, trials)


def _views(m: int, n: int) -> list[tuple[str, torch.Tensor]]:
    """Random inputs under four layouts: contiguous, transposed, sliced rows, strided columns."""
    device = tmm_course.DEVICE
    return [
        ("contiguous", torch.randn(m, n, device=device)),
        ("transposed view", torch.randn(n, m, device=device).t()),
        ("sliced view", torch.randn(2 * m, n + 3, device=device)[::2, 1 : n + 1]),
        ("every other column", torch.randn(m, 2 * n, device=device)[:, ::2]),
    ]


def check_strided_copy(fn: Callable[[torch.Tensor, torch.Tensor], object]) -> CheckResult:
    """Lesson 3: ``fn(x, out)`` must copy ``x`` into ``out`` for any strides of either."""
    trials = []
    for shape, ragged in [((32, 32), False), ((1, 1), True), ((33, 17), True), ((5, 70), True)]:
        for layout, x in _views(*shape):
            strided = layout != "contiguous"
            wrong = []
            if not strided and shape[0] == shape[1] > 1:
                wrong.append(("transposed", x.t()))
            trials.append(
                Trial(
                    case=Case(_label(shape, ragged, layout), shape, ragged=ragged, strided=strided),
                    inputs=(x,),
                    guard=guarded_output(shape, torch.float32),
                    expected=x,
                    wrong_answers=wrong,
                )
            )
    m, n = 33, 17
    x = torch.randn(m, n, device=tmm_course.DEVICE)
    trials.append(
        Trial(
            case=Case(
                _label((m, n), True, "output with padded rows"), (m, n), ragged=True, strided=True
            ),
            inputs=(x,),
            guard=guarded_output((m, n), torch.float32, row_gap=5),
            expected=x,
        )
    )
    return run_trials("strided_copy", fn, trials)


class MatmulCase(NamedTuple):
    """One product a matmul check runs. The block sizes a learner picks are unknown, so
    "aligned" means every dimension is a multiple of 64, and "ragged" anything else."""

    label: str
    m: int
    n: int
    k: int
    layout: str  # contiguous, transposed, sliced or padded output
    ragged: bool


MATMUL_CASES = [
    MatmulCase("square", 64, 64, 64, "contiguous", False),
    MatmulCase("1x1x1", 1, 1, 1, "contiguous", True),
    MatmulCase("ragged M", 65, 64, 64, "contiguous", True),
    MatmulCase("ragged N", 64, 65, 64, "contiguous", True),
    MatmulCase("ragged K", 64, 64, 65, "contiguous", True),
    MatmulCase("K smaller than a block", 32, 32, 7, "contiguous", True),
    MatmulCase("tall", 300, 4, 48, "contiguous", True),
    MatmulCase("skinny", 4, 300, 48, "contiguous", True),
    MatmulCase("transposed A and B", 64, 64, 64, "transposed", False),
    MatmulCase("sliced A and B", 64, 64, 64, "sliced", False),
    MatmulCase("output with padded rows", 64, 64, 64, "padded output", False),
]
PRECISION_PROBE_K = 4096
FLOAT32_ACCUMULATOR_RMS = 6e-4  # float16 output of a float32 sum: about 2e-4 at any K


def _matmul_operands(m: int, n: int, k: int, layout: str, dtype: torch.dtype):
    device = tmm_course.DEVICE
    if layout == "transposed":
        return (
            torch.randn(k, m, device=device).to(dtype).t(),
            torch.randn(n, k, device=device).to(dtype).t(),
        )
    if layout == "sliced":
        return (
            torch.randn(2 * m, k + 3, device=device).to(dtype)[::2, 2 : k + 2],
            torch.randn(k, 2 * n, device=device).to(dtype)[:, ::2],
        )
    return torch.randn(m, k, device=device).to(dtype), torch.randn(k, n, device=device).to(dtype)


def _matmul_trial(spec: MatmulCase, dtype: torch.dtype, extra=None) -> Trial:
    label, m, n, k, layout, ragged = spec
    a, b = _matmul_operands(m, n, k, layout, dtype)
    a64, b64 = a.double(), b.double()
    bound = tolerance(dtype, tmm_course.BACKEND) * (a64.abs() @ b64.abs())
    wrong = []
    if m == n == k and layout == "contiguous":
        wrong.append(("transposed", a64.t() @ b64))  # A's strides paired the wrong way round
        wrong.append(("transposed", a64 @ b64.t()))  # B's
    guard = guarded_output((m, n), dtype, row_gap=3 if layout == "padded output" else 0)
    case = Case(
        f"{m}x{n}x{k} {label}, {str(dtype).removeprefix('torch.')}",
        (m, n, k),
        ragged=ragged,
        strided=layout != "contiguous",
    )
    return Trial(
        case=case,
        inputs=(a, b),
        guard=guard,
        expected=a64 @ b64,
        wrong_answers=wrong,
        atol=bound,
        extra=extra,
    )


def _accumulator_precision(
    out: torch.Tensor, a: torch.Tensor, b: torch.Tensor
) -> tuple[str, str] | None:
    """On the long-K probe: an error that a float32 accumulator would not make."""
    error = relative_rms(out, a, b)
    if error > FLOAT32_ACCUMULATOR_RMS:
        return "precision", (
            f"rms error {error:.1e} at K={PRECISION_PROBE_K}; a float32 accumulator stays near 2e-4"
        )
    return None


def check_matmul(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object]) -> CheckResult:
    """Lesson 4: ``fn(a, b, c)`` must store ``a @ b`` into ``c`` (float16; the last case also
    float32), for any shapes and strides, with a float32 accumulator."""
    trials = [_matmul_trial(spec, torch.float16) for spec in MATMUL_CASES]
    long_k = MatmulCase("long K", 16, 16, PRECISION_PROBE_K, "contiguous", ragged=True)
    probe = _matmul_trial(long_k, torch.float16, extra=_accumulator_precision)
    probe.only_if_all_passed = True
    trials.append(probe)
    # last: a GPU refuses some kernels on float32 only, which must not hide the probe above
    trials.append(_matmul_trial(MATMUL_CASES[0], torch.float32))
    return run_trials("matmul", fn, trials)


def check_transpose(
    fn: Callable[[torch.Tensor, torch.Tensor], object], *, strided: bool = True, ragged: bool = True
) -> CheckResult:
    """Lesson 5: ``fn(x, out)`` must store ``x.T`` into ``out`` (``x`` is M x N, ``out`` N x M).

    ``strided=False`` or ``ragged=False`` leave out the non-contiguous or the ragged cases, for
    the first parts of the homework.
    """
    shapes = [((64, 64), False), ((32, 128), False)]
    if ragged:
        shapes += [((1, 1), True), ((33, 17), True), ((70, 3), True), ((3, 70), True)]
    trials = []
    for (m, n), is_ragged in shapes:
        views = _views(m, n) if strided else _views(m, n)[:1]
        for layout, x in views:
            is_strided = layout != "contiguous"
            wrong = [("transposed", x)] if m == n > 1 else []  # a copy, not a transpose
            trials.append(
                Trial(
                    case=Case(
                        _label((m, n), is_ragged, layout),
                        (m, n),
                        ragged=is_ragged,
                        strided=is_strided,
                    ),
                    inputs=(x,),
                    guard=guarded_output((n, m), torch.float32),
                    expected=x.t(),
                    wrong_answers=wrong,
                )
            )
        if strided:
            x = torch.randn(m, n, device=tmm_course.DEVICE)
            trials.append(
                Trial(
                    case=Case(
                        _label((m, n), is_ragged, "output with padded rows"),
                        (m, n),
                        ragged=is_ragged,
                        strided=True,
                    ),
                    inputs=(x,),
                    guard=guarded_output((n, m), torch.float32, row_gap=5),
                    expected=x.t(),
                )
            )
    return run_trials("transpose", fn, trials)


def check_scaled_matmul(
    fn: Callable[..., object], alpha: float = 1.5, beta: float = -0.5
) -> CheckResult:
    """Lesson 5: ``fn(a, b, c, alpha, beta)`` must update ``c`` to ``alpha * a @ b + beta * c``.

    One case has ``beta = 0`` and ``c`` full of NaN: as in BLAS, ``c`` must then not be read.
    """
    trials = []
    for label, m, n, k, layout, ragged in MATMUL_CASES[:9]:
        a, b = _matmul_operands(m, n, k, layout, torch.float16)
        c0 = torch.randn(m, n, device=tmm_course.DEVICE).half()
        a64, b64, c64 = a.double(), b.double(), c0.double()
        bound = tolerance(torch.float16, tmm_course.BACKEND) * (
            abs(alpha) * (a64.abs() @ b64.abs()) + abs(beta) * c64.abs()
        )
        case = Case(
            f"{m}x{n}x{k} {label}", (m, n, k), ragged=ragged, strided=layout != "contiguous"
        )
        trials.append(
            Trial(
                case=case,
                inputs=(a, b, alpha, beta),
                guard=guarded_output((m, n), torch.float16),
                expected=alpha * (a64 @ b64) + beta * c64,
                wrong_answers=[("transposed", alpha * (a64.t() @ b64) + beta * c64)]
                if m == n == k and layout == "contiguous"
                else [],
                atol=bound,
                initial=c0,
            )
        )
    a, b = _matmul_operands(64, 64, 64, "contiguous", torch.float16)
    exact = alpha * (a.double() @ b.double())
    bound = (
        tolerance(torch.float16, tmm_course.BACKEND)
        * abs(alpha)
        * (a.double().abs() @ b.double().abs())
    )
    trials.append(
        Trial(
            case=Case("64x64x64 beta = 0, C holds NaN", (64, 64, 64)),
            inputs=(a, b, alpha, 0.0),
            guard=guarded_output((64, 64), torch.float16),
            expected=exact,
            atol=bound,
        )
    )

    def call(a: torch.Tensor, b: torch.Tensor, alpha: float, beta: float, c: torch.Tensor):
        return fn(a, b, c, alpha, beta)

    return run_trials("scaled_matmul", call, trials)
