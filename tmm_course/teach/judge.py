"""The judge's side of grading: secret inputs, torch references, and the verdict.

The judge never runs student code. For each exercise it draws fresh random inputs from a
secret seed (random shapes; exact-size outputs as well as outputs inside larger storage with
canary values around them; poison that is sometimes NaN and sometimes random numbers, so no
input looks like a check's; inputs between NaN margins), sends them to the worker, reads back
every storage it sent, and decides from those bytes alone: the output against a float64 torch
reference computed here, the canaries and the inputs against what it sent. New exercises are
one :data:`EXERCISES` entry.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

FP16_TOLERANCE = 1e-3  # of |A| @ |B|, elementwise: exact inputs, a float32 sum, a float16 store
FP16_NORMAL = torch.finfo(torch.float16).tiny  # below it a float16 holds fewer bits: the floor
FLOAT32_ACCUMULATOR_RMS = 6e-4  # relative rms error of a float32 sum stored as float16
LONG_K = 2048


@dataclass
class Buffer:
    """A tensor as the judge sends it: a 1-D storage and the view the launcher receives."""

    storage: torch.Tensor
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0

    def view(self, storage: torch.Tensor | None = None) -> torch.Tensor:
        base = self.storage if storage is None else storage
        return torch.as_strided(base, self.size, self.stride, self.offset)

    def covered(self) -> torch.Tensor:
        """Which storage elements the view reaches."""
        mask = torch.zeros(self.storage.numel(), dtype=torch.bool)
        index = torch.arange(self.storage.numel())
        mask[torch.as_strided(index, self.size, self.stride, self.offset).reshape(-1)] = True
        return mask


@dataclass
class Case:
    label: str
    buffers: list[Buffer]  # every tensor sent; the output is buffers[output]
    output: int
    order: list[int | float]  # the launcher's arguments: buffer index (int) or a scalar (float)
    expected: torch.Tensor  # float64, the output's shape
    atol: torch.Tensor | float
    poison: torch.Tensor | None = None  # what the output view held before the call
    ragged: bool = False
    strided: bool = False
    rms: float | None = None  # a relative rms bound checked as well (the long-K probe)
    wrong: list[tuple[str, torch.Tensor]] = field(default_factory=list)  # (code, answer)


@dataclass(frozen=True)
class Exercise:
    """One graded exercise: the reference's exercise cell, the launcher it defines, the cases."""

    name: str  # the check tag of the reference (check:NAME)
    cell_id: str
    launcher: str
    cases: Callable[[torch.Generator], list[Case]]
    helpers: tuple[str, ...] = ()  # course names the cell may use (lesson 9's launcher)
    fix_of: str | None = None  # lesson 9: the broken kernel (in kernels.pitfalls) to repair
    kernel: str | None = None  # ... and the name of the repaired kernel the cell defines


def _size(gen: torch.Generator, low: int, high: int) -> int:
    return int(torch.randint(low, high + 1, (1,), generator=gen))


# every input sits between NaN margins this many times its longest side long: a lane that reads
# past the view (a mask missing or wrong) reads NaN, which no product or copy hides, instead of
# whatever the worker's memory holds there (often zeros, which hide it)
INPUT_MARGIN = 64


def _input(gen: torch.Generator, shape: tuple[int, int], dtype, layout: str) -> Buffer:
    """A random input under ``layout``: contiguous, transposed storage, sliced rows, or every
    other column; inside NaN margins (:data:`INPUT_MARGIN`)."""
    m, n = shape
    offset = 0
    if layout == "transposed":
        data, stride = torch.randn(n * m, generator=gen), (1, m)
    elif layout == "sliced":
        data, stride, offset = torch.randn(2 * m * (n + 3), generator=gen), (2 * (n + 3), 1), 1
    elif layout == "columns":
        data, stride = torch.randn(m * 2 * n, generator=gen), (2 * n, 2)
    else:
        data, stride = torch.randn(m * n, generator=gen), (n, 1)
    return _framed(data.to(dtype), (m, n), stride, offset)


def _framed(
    data: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...], offset: int = 0
) -> Buffer:
    """An input's buffer: its data between NaN margins (:data:`INPUT_MARGIN`)."""
    nan = torch.full((INPUT_MARGIN * max(size),), float("nan"), dtype=data.dtype)
    return Buffer(torch.cat([nan, data, nan]), size, stride, offset + len(nan))


def _output(
    gen: torch.Generator,
    shape: tuple[int, int],
    dtype,
    padded: bool,
    nan: bool,
    contiguous: bool = False,
):
    """An output, exact-size or inside canary storage (with gaps between rows unless
    ``contiguous``), holding NaN or random poison."""
    m, n = shape
    if padded and contiguous:
        gap = _size(gen, 1, 40)
        storage = torch.randn(m * n + 2 * gap, generator=gen).to(dtype)
        buffer = Buffer(storage, (m, n), (n, 1), gap)
    elif padded:
        gap = _size(gen, 1, 5)
        total = (m + 2) * (n + gap) + 2 * gap
        storage = torch.randn(total, generator=gen).to(dtype)
        buffer = Buffer(storage, (m, n), (n + gap, 1), n + gap + gap)
    else:
        buffer = Buffer(torch.randn(m * n, generator=gen).to(dtype), (m, n), (n, 1))
    if nan:
        buffer.view().fill_(float("nan"))
    return buffer, buffer.view().clone()


def _alternating(gen: torch.Generator) -> Iterator[bool]:
    """NaN poison on every other output, from a random start: each exercise sees both."""
    flag = bool(_size(gen, 0, 1))
    while True:
        yield flag
        flag = not flag


def _ragged(*sizes: int) -> bool:
    return any(s % 16 for s in sizes)


def transpose_cases(strided: bool, ragged: bool) -> Callable[[torch.Generator], list[Case]]:
    def cases(gen: torch.Generator) -> list[Case]:
        nan = _alternating(gen)
        shapes = [(64 * _size(gen, 1, 3), 64 * _size(gen, 1, 3)) for _ in range(2)]
        if ragged:
            shapes += [
                (1, 1),
                (_size(gen, 2, 70), _size(gen, 2, 70)),
                (_size(gen, 60, 90), 3),
                (3, _size(gen, 60, 90)),
            ]
        layouts = ["contiguous", "transposed", "sliced", "columns"] if strided else ["contiguous"]
        found = []
        for index, (m, n) in enumerate(shapes):
            for layout in layouts if index < 3 else ["contiguous"]:
                x = _input(gen, (m, n), torch.float32, layout)
                out, poison = _output(
                    gen,
                    (n, m),
                    torch.float32,
                    padded=index % 2 == 1,
                    nan=next(nan),
                    contiguous=not strided,
                )
                value = x.view().double()
                wrong = [("transposed", value.clone())] if m == n else []
                found.append(
                    Case(
                        f"{m}x{n} {layout}",
                        [x, out],
                        1,
                        [0, 1],
                        value.t(),
                        0.0,
                        poison,
                        _ragged(m, n),
                        layout != "contiguous",
                        wrong=wrong,
                    )
                )
        return found

    return cases


def _matmul_operands(gen, m, n, k, layout):
    a = _input(gen, (m, k), torch.float16, layout)
    b = _input(gen, (k, n), torch.float16, layout)
    return a, b


def _matmul_shapes(gen: torch.Generator) -> list[tuple[int, int, int, str]]:
    aligned = 32 * _size(gen, 1, 3)
    return [
        (aligned, aligned, aligned, "contiguous"),
        (1, 1, 1, "contiguous"),
        (_size(gen, 17, 70), _size(gen, 17, 70), _size(gen, 17, 70), "contiguous"),
        (aligned, aligned, _size(gen, 3, 40), "contiguous"),
        (_size(gen, 100, 200), _size(gen, 2, 6), 48, "contiguous"),
        (aligned, aligned, aligned, "transposed"),
        (_size(gen, 20, 64), _size(gen, 20, 64), _size(gen, 20, 64), "sliced"),
        (16, 16, LONG_K, "contiguous"),
    ]


def matmul_cases(gen: torch.Generator) -> list[Case]:
    nan = _alternating(gen)
    found = []
    for index, (m, n, k, layout) in enumerate(_matmul_shapes(gen)):
        a, b = _matmul_operands(gen, m, n, k, layout)
        out, poison = _output(gen, (m, n), torch.float16, padded=index % 3 == 1, nan=next(nan))
        a64, b64 = a.view().double(), b.view().double()
        wrong = [("transposed", a64.t() @ b64)] if m == n == k else []
        found.append(
            Case(
                f"{m}x{n}x{k} {layout}",
                [a, b, out],
                2,
                [0, 1, 2],
                a64 @ b64,
                FP16_TOLERANCE * (a64.abs() @ b64.abs()).clamp_min(FP16_NORMAL),
                poison,
                _ragged(m, n, k),
                layout != "contiguous",
                FLOAT32_ACCUMULATOR_RMS if k == LONG_K else None,
                wrong,
            )
        )
    return found


def scaled_matmul_cases(gen: torch.Generator) -> list[Case]:
    alpha = round(0.5 + float(torch.rand(1, generator=gen)) * 1.5, 3)
    beta = round(float(torch.rand(1, generator=gen)) * 2 - 1, 3) or 0.25
    found = []
    for index, (m, n, k, layout) in enumerate(_matmul_shapes(gen)):
        a, b = _matmul_operands(gen, m, n, k, layout)
        c, initial = _output(gen, (m, n), torch.float16, padded=index % 3 == 1, nan=False)
        a64, b64, c64 = a.view().double(), b.view().double(), initial.double()
        bound = FP16_TOLERANCE * (abs(alpha) * (a64.abs() @ b64.abs()) + abs(beta) * c64.abs())
        expected = alpha * (a64 @ b64) + beta * c64
        found.append(
            Case(
                f"{m}x{n}x{k} {layout}",
                [a, b, c],
                2,
                [0, 1, 2, alpha, beta],
                expected,
                bound + 1e-3,
                None,
                _ragged(m, n, k),
                layout != "contiguous",
                FLOAT32_ACCUMULATOR_RMS if k == LONG_K else None,
                [("wrong_values", alpha * (a64 @ b64)), ("wrong_values", a64 @ b64 + beta * c64)],
            )
        )
    m = n = k = 32 * _size(gen, 1, 2)
    a, b = _matmul_operands(gen, m, n, k, "contiguous")
    c, initial = _output(gen, (m, n), torch.float16, padded=False, nan=True)
    a64, b64 = a.view().double(), b.view().double()
    found.insert(
        len(found) - 1,
        Case(
            f"{m}x{n}x{k} beta = 0, C holds NaN",
            [a, b, c],
            2,
            [0, 1, 2, alpha, 0.0],
            alpha * (a64 @ b64),
            FP16_TOLERANCE * alpha * (a64.abs() @ b64.abs()) + 1e-3,
            None,
        ),
    )
    return found


def linear_relu_cases(gen: torch.Generator) -> list[Case]:
    nan = _alternating(gen)
    found = []
    for index, (m, n, k, layout) in enumerate(_matmul_shapes(gen)[:-1]):
        x = _input(gen, (m, k), torch.float16, layout)
        w = _input(gen, (n, k), torch.float16, layout)
        bias = _framed(torch.randn(n, generator=gen).half(), (n,), (1,))
        out, poison = _output(gen, (m, n), torch.float16, padded=index % 3 == 1, nan=next(nan))
        x64, w64, bias64 = x.view().double(), w.view().double(), bias.view().double()
        bound = FP16_TOLERANCE * (x64.abs() @ w64.abs().t() + bias64.abs()).clamp_min(FP16_NORMAL)
        found.append(
            Case(
                f"{m}x{n}x{k} {layout}",
                [x, w, bias, out],
                3,
                [0, 1, 2, 3],
                torch.relu(x64 @ w64.t() + bias64),
                bound + 1e-3,
                poison,
                _ragged(m, n, k),
                layout != "contiguous",
            )
        )
    return found


EXERCISES = [
    Exercise("transpose_v1", "c04", "transpose_v1", transpose_cases(strided=False, ragged=False)),
    Exercise("transpose_v2", "c08", "transpose_v2", transpose_cases(strided=True, ragged=False)),
    Exercise("transpose", "c12", "transpose", transpose_cases(strided=True, ragged=True)),
    Exercise("scaled_matmul", "c17", "scaled_matmul", scaled_matmul_cases),
    Exercise("matmul", "c19", "my_matmul", matmul_cases),
    Exercise("linear_relu", "c22b", "linear_relu", linear_relu_cases),
    *(
        Exercise(
            f"fixed_{x}",
            f"f7e{x}1",
            f"fixed_{x}",
            matmul_cases,
            ("launcher",),
            f"mystery_{x}_kernel",
            f"fixed_{x}_kernel",
        )
        for x in "abcd"
    ),
]
BY_NAME = {e.name: e for e in EXERCISES}
BY_CELL = {e.cell_id: e for e in EXERCISES}


def fix_problem(exercise: Exercise, source: str) -> str | None:
    """Lesson 9: why the cell's kernel is not a repair of the broken one (None if it is), read
    from its source alone: at most a few statements may differ from the broken kernel."""
    if exercise.fix_of is None:
        return None
    from types import SimpleNamespace

    from tmm_course.check import fixes
    from tmm_course.kernels import pitfalls

    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return f"the cell does not parse: {error}"
    found = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == exercise.kernel
    ]
    if not found:
        return f"the cell defines no kernel named {exercise.kernel}"
    text = ast.get_source_segment(source, found[-1]) or ""
    changed = fixes.lines_changed(getattr(pitfalls, exercise.fix_of), SimpleNamespace(src=text))
    if changed == 0:
        return f"{exercise.kernel} is {exercise.fix_of} unchanged: find its bug and fix it"
    if changed > fixes.MOST_LINES_CHANGED:
        return (
            f"{exercise.kernel} differs from {exercise.fix_of} in {changed} statements (at most "
            f"{fixes.MOST_LINES_CHANGED}): the exercise is to repair that kernel, not to write "
            "another matmul"
        )
    return None


@dataclass
class Outcome:
    """What the judge concluded about one case."""

    label: str
    passed: bool
    code: str = ""
    problem: str = ""


def judge_case(case: Case, returned: list[bytes] | None, error: dict | None) -> Outcome:
    """The verdict on one case, from the storages the worker sent back (or its error)."""
    if error is not None:
        kind = error.get("error_type", "error")
        if kind == "NotImplementedError":
            return Outcome(case.label, False, "not_implemented", "raised NotImplementedError")
        return Outcome(case.label, False, "crashed", f"{kind}: {error.get('error', '')}"[:200])
    assert returned is not None
    for index, (buffer, data) in enumerate(zip(case.buffers, returned, strict=True)):
        storage = torch.frombuffer(bytearray(data), dtype=buffer.storage.dtype)
        if index != case.output:
            if not _same(storage, buffer.storage):
                return Outcome(case.label, False, "modified_input", "an input was changed")
            continue
        outside = ~buffer.covered()
        if not _same(storage[outside], buffer.storage[outside]):
            return Outcome(
                case.label, False, "out_of_bounds_write", "memory around the output was overwritten"
            )
        got = buffer.view(storage).double()
        return _compare(case, got)
    return Outcome(case.label, False, "crashed", "no output came back")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(a.view(_bits(a)), b.view(_bits(b))))


def _bits(t: torch.Tensor):
    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]


def _compare(case: Case, got: torch.Tensor) -> Outcome:
    expected = case.expected
    if expected.numel() == 0:
        return Outcome(case.label, True)
    if case.poison is not None:
        poison = case.poison.double()
        stale = (got == poison) | (got.isnan() & poison.isnan())
        stale &= ~((expected - poison).abs() <= case.atol)
        if stale.any():
            where = stale.nonzero()[0].tolist()
            return Outcome(
                case.label,
                False,
                "unwritten",
                f"{int(stale.sum())} cells were never stored, e.g. {tuple(where)}",
            )
    diff = (got - expected).abs()
    bad = ~(diff <= case.atol)
    if bad.any():
        for code, answer in case.wrong:
            if answer.shape == got.shape and bool(((got - answer).abs() <= case.atol).all()):
                return Outcome(case.label, False, code, "matches a known mistake")
        where = bad.nonzero()[0].tolist()
        return Outcome(
            case.label,
            False,
            "wrong_values",
            f"{int(bad.sum())} of {got.numel()} cells wrong, e.g. at {tuple(where)}: "
            f"{float(got[tuple(where)]):.4g} instead of "
            f"{float(expected[tuple(where)]):.4g}",
        )
    if case.rms is not None:
        rms = float((got - expected).pow(2).mean().sqrt() / expected.pow(2).mean().sqrt())
        if not rms <= case.rms:
            return Outcome(
                case.label,
                False,
                "precision",
                f"relative rms error {rms:.1e} at long K; a float32 accumulator "
                f"stays under {case.rms:.0e}",
            )
    return Outcome(case.label, True)


def verdict(cases: list[Case], outcomes: list[Outcome]) -> tuple[str, list[str], str]:
    """(verdict, codes, detail) of one exercise from its cases' outcomes."""
    if outcomes and outcomes[0].code == "not_implemented":
        return "not_implemented", ["not_implemented"], "the launcher raised NotImplementedError"
    failed = [(c, o) for c, o in zip(cases, outcomes, strict=False) if not o.passed]
    detail = f"{len(outcomes) - len(failed)}/{len(cases)} cases passed"
    if not failed and len(outcomes) == len(cases):
        return "pass", [], detail
    codes = sorted({o.code for _, o in failed})
    passed = [c for c, o in zip(cases, outcomes, strict=False) if o.passed]
    if failed and all(c.ragged for c, _ in failed) and any(c.ragged is False for c in passed):
        codes.append("ragged_edge")
    if failed and all(c.strided for c, _ in failed) and any(not c.strided for c in passed):
        codes.append("ignores_strides")
    first = failed[0][1] if failed else None
    if first is not None:
        detail += f"; first failure: {first.label}: {first.problem}"
    return "fail", sorted(set(codes)), detail


def seed_generator(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed % (2**63))
    return gen


def storage_bytes(buffer: Buffer) -> bytes:
    return buffer.storage.numpy().tobytes()


def spec(buffer: Buffer, blob: int) -> dict:
    return {
        "kind": "tensor",
        "dtype": str(buffer.storage.dtype).removeprefix("torch."),
        "size": list(buffer.size),
        "stride": list(buffer.stride),
        "offset": buffer.offset,
        "blob": blob,
    }


def request(case: Case, launcher: str) -> tuple[dict, list[bytes]]:
    """The call frame for ``case``: every buffer's storage, and the argument order."""
    args: list[dict] = [spec(b, i) for i, b in enumerate(case.buffers)]
    order = []
    for item in case.order:
        if isinstance(item, int) and not isinstance(item, bool):
            order.append(item)
        else:
            args.append({"kind": "scalar", "value": float(item)})
            order.append(len(args) - 1)
    blobs = [storage_bytes(b) for b in case.buffers]
    return {"op": "call", "name": launcher, "args": args, "order": order}, blobs
