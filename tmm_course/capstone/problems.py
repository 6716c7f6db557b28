"""The problems the capstone is raced on, as data: a :class:`Problem` is one product C = A @ B;
``GOALS`` are ``matmul_fast``'s targets on an H200. ``GRID`` is the broad set it is judged on:
its plan is fitted on ``FITTED`` (every other problem) and ``EXTRA_FITTED`` (sizes between
the grid's), and reported apart on ``HELD_OUT``."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

import tmm_course
from tmm_course.numerics import tolerance


@dataclass(frozen=True)
class Problem:
    """C = A @ B with A (m, k) and B (k, n) row-major, or column-major where ``a_layout`` or
    ``b_layout`` is "col" (the transpose of a row-major (k, m) A, or (n, k) B)."""

    m: int
    n: int
    k: int
    dtype: str = "float16"
    precision: str = "tf32"  # how float32 products are formed, on both sides
    b_layout: str = "row"
    a_layout: str = "row"

    def __post_init__(self) -> None:
        for name in ("a_layout", "b_layout"):
            if getattr(self, name) not in ("row", "col"):
                raise ValueError(f"{name}={getattr(self, name)!r}: expected 'row' or 'col'")

    @property
    def kind(self) -> str:
        """The dtype, and for float32 how products are formed: "float32 (tf32)"."""
        return f"float32 ({self.precision})" if self.dtype == "float32" else self.dtype

    @property
    def label(self) -> str:
        shape = f"{self.m}^3" if self.m == self.n == self.k else f"{self.m}x{self.n}x{self.k}"
        layouts = [f"{x} column-major" for x, layout in (("A", self.a_layout), ("B", self.b_layout))
                   if layout == "col"]  # fmt: skip
        return ", ".join([f"{shape} {self.kind}", *layouts])

    @property
    def rows_on_16_bytes(self) -> bool:
        """Whether the lines of A, B and C (rows, or columns of a column-major operand) all
        start on 16-byte boundaries, or are one line: what :func:`~tmm_course.capstone.kernels.
        rows_on_16_bytes` says of the problem's tensors."""
        itemsize = getattr(torch, self.dtype).itemsize
        a = (self.m, self.k) if self.a_layout == "row" else (self.k, self.m)
        b = (self.k, self.n) if self.b_layout == "row" else (self.n, self.k)
        return all(rows <= 1 or pitch <= 1 or pitch * itemsize % 16 == 0
                   for rows, pitch in (a, b, (self.m, self.n)))  # fmt: skip

    @property
    def odd_operands(self) -> list[tuple[int, bool]]:
        """(bytes, contiguous along K) of each of A and B whose lines (rows, or columns where
        column-major) are off 16-byte boundaries, as ``plans.odd_operands`` says of tensors."""
        itemsize = getattr(torch, self.dtype).itemsize
        a_row, b_row = self.a_layout == "row", self.b_layout == "row"
        operands = (((self.m, self.k) if a_row else (self.k, self.m), a_row),
                    ((self.k, self.n) if b_row else (self.n, self.k), not b_row))  # fmt: skip
        return [(rows * pitch * itemsize, along_k) for (rows, pitch), along_k in operands
                if rows > 1 and pitch > 1 and pitch * itemsize % 16]  # fmt: skip

    def as_dict(self) -> dict:
        return {**asdict(self), "kind": self.kind, "label": self.label}

    @classmethod
    def from_dict(cls, data: dict) -> Problem:
        """The problem a results file stored (``as_dict``'s "kind" and "label" are derived)."""
        return cls(data["m"], data["n"], data["k"], data["dtype"], data["precision"],
                   data.get("b_layout", "row"), data.get("a_layout", "row"))  # fmt: skip

    def tolerance(self) -> float:
        """The error bound its results must meet on this backend."""
        return tolerance(getattr(torch, self.dtype), tmm_course.BACKEND, self.precision)

    def operands(self, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator(device=tmm_course.DEVICE).manual_seed(seed)
        dtype = getattr(torch, self.dtype)
        new = lambda r, c: torch.randn(r, c, device=tmm_course.DEVICE, generator=gen).to(dtype)
        a = new(self.k, self.m).t() if self.a_layout == "col" else new(self.m, self.k)
        return a, (new(self.n, self.k).t() if self.b_layout == "col" else new(self.k, self.n))


# The goals on an H200: problem -> lowest acceptable ratio torch time / our time
GOALS = (
    *(
        (Problem(m, n, k, dtype), target)
        for (m, n, k, target) in [
            (4096, 4096, 4096, 1.0), (8192, 8192, 8192, 1.0), (1024, 1024, 1024, 0.8),
            (16, 4096, 4096, 0.8), (128, 4096, 4096, 0.8), (4096, 4096, 4093, 1.0),
        ]
        for dtype in ("float16", "bfloat16")
    ),
    (Problem(4096, 4096, 4096, "float32", "tf32"), 0.8),
)  # fmt: skip


def _grid() -> tuple[Problem, ...]:
    """At least 60 problems across the shape space, families interleaved so that every other
    one (the fitted half) covers each family."""
    squares = [256, 384, 512, 768, 1000, 1024, 1536, 2048, 2500, 3072, 4096, 5000, 6144, 8192,
               12288, 16384]  # fmt: skip
    problems = [Problem(s, s, s) for s in squares]
    problems += [Problem(s, s, s, "bfloat16") for s in (512, 1024, 1536, 2048, 3000, 4096, 8192)]
    problems += [Problem(s, s, s, "float32") for s in (512, 1024, 2048, 3000, 4096, 8192)]
    problems += [Problem(m, 4096, 4096) for m in (1, 8, 16, 32, 64, 100, 128, 256, 384, 512)]
    problems += [Problem(m, 8192, 8192, "bfloat16") for m in (16, 128)]
    problems += [Problem(4096, n, 4096) for n in (1, 16, 64, 256)]
    problems += [Problem(4096, 4096, k) for k in (16, 64, 128, 256)]
    problems += [Problem(m, n, k) for m, n, k in [  # odd sizes
        (4095, 4097, 4093), (1023, 1025, 1027), (3001, 2999, 4093), (777, 1333, 2049),
        (4096, 4096, 4093), (2048, 2048, 2047)]]  # fmt: skip
    problems += [Problem(m, n, k, dtype, b_layout="col") for m, n, k, dtype in [
        (1024, 1024, 1024, "float16"), (4096, 4096, 4096, "float16"), (8192, 8192, 8192, "float16"),
        (128, 4096, 4096, "float16"), (4096, 4096, 4096, "bfloat16"), (2048, 2048, 2048, "float32")
    ]]  # fmt: skip
    problems += [Problem(m, n, k) for m, n, k in [  # rectangles
        (8192, 1024, 1024), (1024, 8192, 1024), (1024, 1024, 8192), (2048, 8192, 512),
        (16384, 4096, 256)]]  # fmt: skip
    problems += [Problem(m, n, k, dtype, b_layout=b, a_layout="col") for m, n, k, dtype, b in [
        (4096, 4096, 4096, "float16", "row"), (2048, 2048, 2048, "bfloat16", "col"),
        (1024, 1024, 1024, "float16", "row"), (4096, 4096, 4096, "float16", "col")]]  # fmt: skip
    return tuple(problems)


GRID = _grid()
# every layout combination of one product (python -m tmm_course.perf.bench layouts)
LAYOUTS = tuple(Problem(4096, 4096, 4096, dtype, a_layout=a, b_layout=b)
                for dtype in ("float16", "bfloat16") for a in ("row", "col")
                for b in ("row", "col"))  # fmt: skip
FITTED = GRID[0::2]  # the plan is fitted on these
HELD_OUT = GRID[1::2]  # and judged apart on these


def _extra_fitted() -> tuple[Problem, ...]:
    """Problems the plan is also fitted on, never raced in the grid: sizes between the grid's
    (none equal to a held-out one), so that mid squares, few rows or columns and deep K have
    fitted neighbours nearer than a factor of two."""
    problems = [Problem(s, s, s) for s in (640, 896, 1280, 1792, 3584)]
    problems += [Problem(s, s, s, "bfloat16") for s in (1280, 2560)]
    problems += [Problem(s, s, s, "float32") for s in (384, 640, 768, 1536)]
    problems += [Problem(m, 4096, 4096) for m in (2, 48, 80, 160, 192, 320)]
    problems += [Problem(32, 8192, 8192, "bfloat16"), Problem(16, 8192, 4096, "bfloat16")]
    problems += [Problem(8, 8192, 8192), Problem(64, 8192, 4096), Problem(256, 8192, 4096)]
    problems += [Problem(4096, n, 4096) for n in (32, 96, 128)]
    problems += [Problem(8192, 1, 4096), Problem(4096, 8, 8192)]  # one or a few columns
    problems += [Problem(4096, 4096, 32)]  # small K
    problems += [Problem(512, 512, 8192), Problem(2048, 2048, 8192)]
    problems += [Problem(1024, 1024, 4096), Problem(1024, 1024, 16384)]  # deep K, 1024 square
    return tuple(problems)


EXTRA_FITTED = _extra_fitted()

# products whose rows are off 16-byte boundaries (odd pitches), beside the grid's seven: few
# rows or columns, mid sizes and large, each 16-bit dtype and float32; the plan is fitted on
# every other one (ODD_ROWS_FITTED), and the rest are held out (python -m tmm_course.perf.bench
# paths races each kernel forced beside the plan)
ODD_ROWS = tuple(Problem(m, n, k, dtype) for m, n, k, dtype in [
    (64, 4097, 4093, "float16"), (100, 5003, 3001, "float16"),
    (4097, 100, 2999, "bfloat16"), (3000, 30, 4097, "float16"),
    (500, 6007, 3007, "float16"), (700, 2001, 5003, "float16"),
    (5001, 4999, 2047, "bfloat16"), (3003, 3005, 3007, "bfloat16"),
    (1999, 1501, 1003, "float32"), (1501, 1999, 2001, "float32")])  # fmt: skip
ODD_ROWS_FITTED = ODD_ROWS[0::2]
ODD_ROWS_HELD_OUT = ODD_ROWS[1::2]


# products small enough that a call's host time is what its caller waits for: aligned and odd
# (lines off 16-byte boundaries), each dtype (python -m tmm_course.perf.bench tiny)
TINY = tuple(Problem(m, n, k, dtype) for m, n, k, dtype in [
    (63, 65, 67, "float16"), (63, 65, 67, "bfloat16"), (100, 100, 100, "float16"),
    (127, 129, 131, "float16"), (255, 257, 259, "float16"), (33, 1000, 77, "float16"),
    (1, 1, 1, "float16"), (16, 16, 16, "float16"), (64, 64, 64, "float16"),
    (128, 128, 128, "float16"), (256, 256, 256, "bfloat16"), (64, 64, 64, "float32")])  # fmt: skip


def family(problem: Problem) -> str:
    """The part of the grid a problem stands for."""
    m, n, k = problem.m, problem.n, problem.k
    if problem.a_layout == "col":
        return "A column-major"
    if problem.b_layout == "col":
        return "B column-major"
    if min(m, n) <= 512 and max(m, n) >= 4096:
        return "few rows or columns"
    if k <= 256 and min(m, n) >= 4096:
        return "small K"
    if m == n == k:
        return "square"
    if any(x % 8 for x in (m, n, k)):
        return "odd sizes"
    return "rectangular"
