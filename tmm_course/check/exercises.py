"""The checks the lessons call. Each takes the learner's launcher and returns a
:class:`~tmm_course.check.result.CheckResult`: a verdict, the cases tried and diagnoses, the
first of which names the cause.

Every call draws fresh random inputs over several shapes (1x1, aligned, ragged, tall, skinny,
and non-contiguous where strides matter), into an output the check poisons and surrounds with
canaries. "Aligned" means a multiple of 64 on every axis (blocks up to 64 fit); "ragged" names
the axes that are not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch

import tmm_course
from tmm_course.check.buffers import guarded_output
from tmm_course.check.engine import Trial, WrongAnswer, run_trials
from tmm_course.check.result import Case, CheckResult
from tmm_course.numerics import allowed

__all__ = [
    "CheckResult",
    "check_fill_column_major",
    "check_matmul",
    "check_outer_product",
    "check_scaled_matmul",
    "check_strided_copy",
    "check_transpose",
    "check_vector_add",
]

ALIGNED = [(64, 64), (64, 128)]
RAGGED = [(1, 1), (5, 7), (33, 17), (70, 3), (3, 70)]
BLOCK = 64


def _ragged(**sizes: int) -> tuple[str, ...]:
    """The axes whose size is not a multiple of 64: ``_ragged(M=33, N=64) == ("M",)``."""
    return tuple(axis for axis, size in sizes.items() if size % BLOCK)


def _label(shape: tuple[int, ...], note: str = "") -> str:
    kind = "ragged" if _ragged(**dict(zip("MNK", shape, strict=False))) else "aligned"
    return "x".join(map(str, shape)) + f" {kind}" + (f", {note}" if note else "")


def labelled_case(shape: tuple[int, ...], note: str = "", strided: tuple[str, ...] = ()) -> Case:
    ragged = _ragged(**dict(zip("MNK", shape, strict=False)))
    return Case(_label(shape, note), shape, ragged=ragged, strided=strided)


def _tiles_transposed(value: torch.Tensor, block: int) -> torch.Tensor:
    """``value`` with every ``block x block`` tile transposed in place (square tiles)."""
    m, n = value.shape
    out = value.clone()
    for i in range(0, m, block):
        for j in range(0, n, block):
            out[i : i + block, j : j + block] = value[i : i + block, j : j + block].t()
    return out


def check_vector_add(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 0: ``fn(x, y, out)`` must launch a kernel that stores ``x + y`` into ``out``, for
    any length, a multiple of the block or not."""
    trials = []
    for n in (1, 7, 128, 1000, 4097):
        x = torch.randn(n, device=tmm_course.DEVICE)
        y = torch.randn(n, device=tmm_course.DEVICE)
        guard = guarded_output((1, n), torch.float32)
        guard.out = guard.out[0]  # the 1-D view the launcher fills
        trials.append(
            Trial(
                case=Case(f"n = {n}", (n,), ragged=_ragged(N=n)),
                inputs=(x, y),
                guard=guard,
                expected=x + y,
                atol=1e-6,
            )
        )
    return run_trials(
        "vector_add",
        fn,
        trials,
        ("x", "y", "out"),
        messages={
            "ragged_edge": "launch triton.cdiv(n, BLOCK) programs, not n // BLOCK, and keep the "
            "kernel's mask: the last program covers the leftover elements.",
            "unwritten": "launch triton.cdiv(n, BLOCK) programs: n // BLOCK leaves the last, "
            "partial block without a program.",
        },
        allow_course_kernels=allow_course_kernels,
    )


STORE_MASK = "mask the store with (offs_m[:, None] < M) & (offs_n[None, :] < N)."
LOAD_AND_STORE_MASKS = (
    "mask the load and the store with (offs_m[:, None] < M) & (offs_n[None, :] < N)."
)


def check_fill_column_major(
    fn: Callable[[torch.Tensor], object], *, allow_course_kernels: bool = False
) -> CheckResult:
    """Lesson 1: ``fn(out)`` must set ``out[i, j] = j * M + i`` (the column-major index)."""
    trials = []
    for m, n in ALIGNED + RAGGED:
        i = torch.arange(m, device=tmm_course.DEVICE)[:, None]
        j = torch.arange(n, device=tmm_course.DEVICE)[None, :]
        wrong = []
        if m > 1 and n > 1:
            wrong.append(
                WrongAnswer(
                    "transposed",
                    (i * n + j).float(),
                    "stores the row-major index i * N + j; the exercise asks for the "
                    "column-major one, j * M + i: swap the roles of offs_m and offs_n in the "
                    "value you store (the pointer stays offs_m[:, None] * N + offs_n[None, :]).",
                )
            )
        trials.append(
            Trial(
                case=labelled_case((m, n)),
                inputs=(),
                guard=guarded_output((m, n), torch.float32),
                expected=(j * m + i).float(),
                wrong_answers=wrong,
            )
        )
    return run_trials(
        "fill_column_major",
        fn,
        trials,
        ("out",),
        messages={"ragged_edge": STORE_MASK},
        allow_course_kernels=allow_course_kernels,
    )


def check_outer_product(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 2: ``fn(x, y, out)`` must set ``out[i, j] = x[i] * y[j]`` by broadcasting."""
    trials = []
    for m, n in ALIGNED + RAGGED:
        x = torch.randn(m, device=tmm_course.DEVICE)
        y = torch.randn(n, device=tmm_course.DEVICE)
        right = x[:, None] * y[None, :]
        wrong = []
        if m == n > 1:
            wrong.append(
                WrongAnswer(
                    "transposed",
                    y[:, None] * x[None, :],
                    "out[i, j] holds x[j] * y[i]: x was loaded along the columns and y "
                    "along the rows. Load x at offs_m and y at offs_n, then x[:, None] * "
                    "y[None, :].",
                )
            )
            for block in (8, 16, 32):  # swapped [:, None] and [None, :] in square tiles
                wrong.append(
                    WrongAnswer(
                        "transposed",
                        _tiles_transposed(right, block),
                        f"each {block}x{block} tile holds the transpose of the right tile: "
                        "[:, None] and [None, :] are swapped, so x runs along the tile's "
                        "columns. Use x[:, None] (a column, down the rows) times y[None, :] "
                        "(a row, along the columns).",
                    )
                )
        trials.append(
            Trial(
                case=labelled_case((m, n)),
                inputs=(x, y),
                guard=guarded_output((m, n), torch.float32),
                expected=right,
                wrong_answers=wrong,
                atol=1e-6,
            )
        )
    return run_trials(
        "outer_product",
        fn,
        trials,
        ("x", "y", "out"),
        messages={
            "ragged_edge": "mask the loads of x (offs_m < M) and y (offs_n < N), and the store "
            "with both."
        },
        allow_course_kernels=allow_course_kernels,
    )


def _views(m: int, n: int) -> list[tuple[str, torch.Tensor]]:
    """Random inputs under four layouts: contiguous, transposed, sliced rows, strided columns."""
    device = tmm_course.DEVICE
    return [
        ("contiguous", torch.randn(m, n, device=device)),
        ("transposed view", torch.randn(n, m, device=device).t()),
        ("sliced view", torch.randn(2 * m, n + 3, device=device)[::2, 1 : n + 1]),
        ("every other column", torch.randn(m, 2 * n, device=device)[:, ::2]),
    ]


COPY_SHAPES = [(64, 64), (1, 1), (33, 17), (5, 70)]


def check_strided_copy(
    fn: Callable[[torch.Tensor, torch.Tensor], object], *, allow_course_kernels: bool = False
) -> CheckResult:
    """Lesson 3: ``fn(x, out)`` must copy ``x`` into ``out`` for any strides of either."""
    trials = []
    for m, n in COPY_SHAPES:
        for layout, x in _views(m, n):
            strided = () if layout == "contiguous" else ("x",)
            wrong = []
            if not strided and m == n > 1:
                wrong.append(
                    WrongAnswer(
                        "transposed",
                        x.t(),
                        "out holds x transposed: a stride is paired with the wrong offset. "
                        "Pair offs_m with stride 0 and offs_n with stride 1, for x and for out.",
                    )
                )
            trials.append(
                Trial(
                    case=labelled_case((m, n), layout, strided),
                    inputs=(x,),
                    guard=guarded_output((m, n), torch.float32),
                    expected=x,
                    wrong_answers=wrong,
                )
            )
    for m, n in [(64, 64), (33, 17)]:
        x = torch.randn(m, n, device=tmm_course.DEVICE)
        trials.append(
            Trial(
                case=labelled_case((m, n), "output with padded rows", ("out",)),
                inputs=(x,),
                guard=guarded_output((m, n), torch.float32, row_gap=5),
                expected=x,
            )
        )
    return run_trials(
        "strided_copy",
        fn,
        trials,
        ("x", "out"),
        messages={"ragged_edge": LOAD_AND_STORE_MASKS},
        allow_course_kernels=allow_course_kernels,
        gather=True,
    )


def check_transpose(
    fn: Callable[[torch.Tensor, torch.Tensor], object],
    *,
    strided: bool = True,
    ragged: bool = True,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 5: ``fn(x, out)`` must store ``x.T`` into ``out`` (``x`` is M x N, ``out`` N x M).

    ``strided=False`` or ``ragged=False`` leave out the non-contiguous or the ragged cases, for
    the first parts of the homework.
    """
    shapes = list(ALIGNED)
    if ragged:
        shapes += [(1, 1), (33, 17), (70, 3), (3, 70)]
    trials = []
    for m, n in shapes:
        views = _views(m, n) if strided else _views(m, n)[:1]
        for layout, x in views:
            wrong = []
            if m == n > 1 and layout == "contiguous":  # on a view, a copy is a strides slip
                wrong.append(
                    WrongAnswer(
                        "transposed",
                        x.clone(),
                        COPY_NOT_TRANSPOSE,
                        ambiguous=True,
                        refine=lambda trace, m=m, n=n: _copy_or_column_major_load(trace, m, n),
                    )
                )
            if m < n and layout == "contiguous":
                wrong.append(
                    WrongAnswer(
                        "out_of_bounds_write",
                        _stored_with_row_stride(x, n),
                        WRONG_OUT_ROW_STRIDE,
                    )
                )
            trials.append(
                Trial(
                    case=labelled_case((m, n), layout, () if layout == "contiguous" else ("x",)),
                    inputs=(x,),
                    guard=guarded_output((n, m), torch.float32),
                    expected=x.t(),
                    wrong_answers=wrong,
                )
            )
    if strided:
        for m, n in [(64, 64), (33, 17)] if ragged else [(64, 64)]:
            x = torch.randn(m, n, device=tmm_course.DEVICE)
            trials.append(
                Trial(
                    case=labelled_case((m, n), "output with padded rows", ("out",)),
                    inputs=(x,),
                    guard=guarded_output((n, m), torch.float32, row_gap=5),
                    expected=x.t(),
                )
            )
    return run_trials(
        "transpose",
        fn,
        trials,
        ("x", "out"),
        messages={
            "ragged_edge": "mask the load with (offs_m[:, None] < M) & (offs_n[None, :] < N) and "
            "the store with the same mask (the tile is stored transposed, its mask too).",
            "ignores_strides": "take x's and out's strides as kernel arguments and build both "
            "pointer tiles from them; out is N x M, so its row stride goes with offs_n.",
            "out_of_bounds_write when M != N": "Stores land outside out, and only when M != N: "
            "the store mask compares with the wrong sizes. out is N x M, so the stored tile's "
            "mask is (offs_m[:, None] < M) & (offs_n[None, :] < N), the same as the load's.",
        },
        allow_course_kernels=allow_course_kernels,
        gather=True,
    )


COPY_NOT_TRANSPOSE = (
    "out holds a copy of x, not its transpose: x[i, j] must land at out[j, i]. Either the "
    "store's offsets are not swapped, or the load reads x column-major (offs_m paired with x's "
    "column stride). Load with offs_m[:, None] * x.stride(0) + offs_n[None, :] * x.stride(1); "
    "store with offs_n[None, :] * out.stride(0) + offs_m[:, None] * out.stride(1)."
)
STORE_NOT_SWAPPED = (
    "out holds a copy of x, not its transpose: x[i, j] must land at out[j, i]. The load is "
    "right: keep it as it is and swap the store's offsets: offs_n[None, :] with out's row "
    "stride, offs_m[:, None] with its column stride."
)
LOAD_COLUMN_MAJOR = (
    "out holds a copy of x, not its transpose: the load reads x column-major (offs_m paired with "
    "x.stride(1), offs_n with x.stride(0)), so each program loads the transposed tile and its "
    "transposing store turns it back. The store is right; load with offs_m[:, None] * "
    "x.stride(0) + offs_n[None, :] * x.stride(1)."
)
WRONG_OUT_ROW_STRIDE = (
    "out's row stride is wrong: out is N x M, so its rows are M apart (out.stride(0) == M), "
    "but the kernel stepped N, x's row stride, between them; when M != N its stores run past "
    "out's end. Build out's pointers from out.stride(0) and out.stride(1)."
)


def _copy_or_column_major_load(trace, m: int, n: int) -> str | None:
    """Which of the two mistakes made out a copy of x, from the x cells program (0, 1) loaded:
    rows of its own row block (the load is right) or of its column block (the load reads x
    column-major). None when the record cannot say."""
    rows = [
        a.cells // n
        for a in trace.accesses
        if a.kind == "load" and a.tensor == "x" and a.program[:2] == (0, 1) and a.cells.size
    ]
    if not rows:
        return None
    first = min(int(r.min()) for r in rows)
    return STORE_NOT_SWAPPED if first == 0 else LOAD_COLUMN_MAJOR


def _stored_with_row_stride(x: torch.Tensor, row_stride: int) -> torch.Tensor:
    """What a transpose stores into a contiguous N x M out whose rows it steps ``row_stride``
    apart: x[i, j] at flat j * row_stride + i, NaN where nothing lands."""
    m, n = x.shape
    flat = torch.full((n * m,), math.nan, dtype=x.dtype, device=x.device)
    i = torch.arange(m, device=x.device)[:, None]
    j = torch.arange(n, device=x.device)[None, :]
    where = (j * row_stride + i).flatten()
    inside = where < n * m
    flat[where[inside]] = x.flatten()[inside]
    return flat.view(n, m)


class MatmulCase(NamedTuple):
    """One product a matmul check runs."""

    label: str
    m: int
    n: int
    k: int
    layout: str  # contiguous, transposed, sliced or padded output


MATMUL_CASES = [
    MatmulCase("square", 64, 64, 64, "contiguous"),
    MatmulCase("one K block", 16, 16, 16, "contiguous"),
    MatmulCase("1x1x1", 1, 1, 1, "contiguous"),
    MatmulCase("ragged M", 65, 64, 64, "contiguous"),
    MatmulCase("ragged N", 64, 65, 64, "contiguous"),
    MatmulCase("ragged K", 64, 64, 65, "contiguous"),
    MatmulCase("K smaller than a block", 64, 64, 7, "contiguous"),
    MatmulCase("tall", 300, 4, 48, "contiguous"),
    MatmulCase("skinny", 4, 300, 48, "contiguous"),
    MatmulCase("transposed A and B", 64, 64, 64, "transposed"),
    MatmulCase("sliced A and B", 64, 64, 64, "sliced"),
    MatmulCase("output with padded rows", 64, 64, 64, "padded output"),
]
PRECISION_PROBE_K = 4096
LONG_K = MatmulCase("long K", 16, 16, PRECISION_PROBE_K, "contiguous")
FLOAT32_ACCUMULATOR_RMS = 6e-4  # float16 output of a float32 sum: about 2e-4 at any K

MATMUL_MESSAGES = {
    "ragged_edge K": "mask the K lanes of both loads, (offs_k[None, :] < K - k * BLOCK_K) for "
    "A and (offs_k[:, None] < K - k * BLOCK_K) for B, with other=0.0 so the padding adds "
    "nothing to the sum.",
    "ragged_edge": "mask A's rows (offs_m < M) and B's columns (offs_n < N) on the loads, the "
    "K lanes of both with other=0.0, and the store with rows and columns.",
    "ignores_strides": "pass all six strides (a.stride(0), a.stride(1), b..., c...) and build "
    "every pointer tile from them.",
}


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


def strided_tensors(layout: str, names: tuple[str, str, str] = ("a", "b", "c")) -> tuple[str, ...]:
    """Which of a product's tensors (A, B, the output: ``names``) a case's layout makes
    non-contiguous."""
    inputs, output = names[:2], names[2:]
    return {"transposed": inputs, "sliced": inputs, "padded output": output}.get(layout, ())


def _matmul_mistakes(a64: torch.Tensor, b64: torch.Tensor, scale=lambda p: p) -> list[WrongAnswer]:
    """The stride pairings a matmul gets wrong, for a square case that fits one K block (where
    each equals a product of transposes exactly)."""
    return [
        WrongAnswer(
            "transposed",
            scale(a64.t() @ b64),
            "matches A^T B: offs_m is paired with stride_ak and offs_k with stride_am. Build "
            "a_ptrs as offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak.",
        ),
        WrongAnswer(
            "transposed",
            scale(a64 @ b64.t()),
            "matches A B^T: offs_k is paired with stride_bn and offs_n with stride_bk. Build "
            "b_ptrs as offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn.",
        ),
        WrongAnswer(
            "transposed",
            scale((a64 @ b64).t()),
            "matches (AB)^T: C is stored transposed, offs_m paired with stride_cn. Build c_ptrs "
            "as offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn.",
        ),
        WrongAnswer(
            "transposed",
            scale(a64.t() @ b64.t()),
            "matches A^T B^T: the strides of both A and B are paired with the wrong offsets.",
        ),
    ]


BLOCK_K_GUESSES = (16, 32, 64, 128)  # the BLOCK_K a K-loop mistake is tried with
SHORT_K_LOOP = (
    "the K loop runs K // BLOCK_K times, so the last, partial K-slab is never added (the K "
    "masks are fine): loop for k in range(0, tl.cdiv(K, BLOCK_K))."
)
ONLY_LAST_SLAB = (
    "only the last K-slab reached C: acc = tl.dot(a, b) starts the sum again at every step. "
    "Accumulate: acc = tl.dot(a, b, acc) (or acc += tl.dot(a, b))."
)
FIRST_SLAB_AGAIN = (
    "every step reloads the first K-slab: the pointers never move along K. At the end of each "
    "step advance them: a_ptrs += BLOCK_K * stride_ak and b_ptrs += BLOCK_K * stride_bk."
)


def k_loop_mistakes(a64: torch.Tensor, b64: torch.Tensor, scale=lambda p: p) -> list[WrongAnswer]:
    """What a K loop gets wrong, for each BLOCK_K a learner may have chosen: too few trips,
    a sum that restarts, pointers that never advance (``scale`` turns a product into what
    the exercise stores)."""
    k = a64.shape[1]
    wrong = []
    for block in BLOCK_K_GUESSES:
        full, rest = divmod(k, block)
        trips = full + (rest > 0)
        if rest:
            short = a64[:, : full * block] @ b64[: full * block]
            wrong.append(WrongAnswer("ragged_edge", scale(short), SHORT_K_LOOP))
        if trips > 1:
            last = (trips - 1) * block
            wrong.append(
                WrongAnswer("wrong_values", scale(a64[:, last:] @ b64[last:]), ONLY_LAST_SLAB)
            )
            again = full * (a64[:, :block] @ b64[:block]) + a64[:, :rest] @ b64[:rest]
            wrong.append(WrongAnswer("wrong_values", scale(again), FIRST_SLAB_AGAIN))
    return wrong


def _matmul_trial(spec: MatmulCase, dtype: torch.dtype) -> Trial:
    label, m, n, k, layout = spec
    a, b = _matmul_operands(m, n, k, layout, dtype)
    a64, b64 = a.double(), b.double()
    bound = allowed(a64.abs() @ b64.abs(), dtype, tmm_course.BACKEND)
    wrong = _matmul_mistakes(a64, b64) if m == n == k and layout == "contiguous" else []
    wrong += k_loop_mistakes(a64, b64)
    guard = guarded_output((m, n), dtype, row_gap=3 if layout == "padded output" else 0)
    case = labelled_case(
        (m, n, k), f"{label}, {str(dtype).removeprefix('torch.')}", strided_tensors(layout)
    )
    extra = accumulator_precision(a64 @ b64) if spec is LONG_K else None
    return Trial(case, (a, b), guard, a64 @ b64, wrong, atol=bound, extra=extra)


def accumulator_precision(exact: torch.Tensor) -> Callable[..., tuple[str, str] | None]:
    """On the long-K probe: an error against ``exact`` that a float32 accumulator would not
    make (rms error over rms value)."""

    def judge(out: torch.Tensor, *_: object) -> tuple[str, str] | None:
        error = float((out.double() - exact).pow(2).mean().sqrt() / exact.pow(2).mean().sqrt())
        if error > FLOAT32_ACCUMULATOR_RMS:
            return "precision", (
                f"rms error {error:.1e} at K={PRECISION_PROBE_K}; a float32 accumulator stays "
                "near 2e-4"
            )
        return None

    return judge


def check_matmul(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 4: ``fn(a, b, c)`` must store ``a @ b`` into ``c`` (float16; the last case also
    float32), for any shapes and strides, with a float32 accumulator. ``allow_course_kernels``
    accepts the course's own kernels (lesson 9 checks its broken ones)."""
    trials = [_matmul_trial(spec, torch.float16) for spec in MATMUL_CASES]
    probe = _matmul_trial(LONG_K, torch.float16)
    probe.only_if_all_passed = True
    trials.append(probe)
    # last: a GPU refuses some kernels on float32 only, which must not hide the probe above
    trials.append(_matmul_trial(MATMUL_CASES[0], torch.float32))
    return run_trials(
        "matmul",
        fn,
        trials,
        ("a", "b", "c"),
        messages=MATMUL_MESSAGES,
        allow_course_kernels=allow_course_kernels,
    )


def check_scaled_matmul(
    fn: Callable[..., object],
    alpha: float = 1.5,
    beta: float = -0.5,
    *,
    allow_course_kernels: bool = False,
) -> CheckResult:
    """Lesson 5: ``fn(a, b, c, alpha, beta)`` must update ``c`` to ``alpha * a @ b + beta * c``.

    One case has ``beta = 0`` and ``c`` full of NaN: as in BLAS, ``c`` must then not be read.
    """
    trials = []
    for spec in [*MATMUL_CASES, LONG_K]:
        label, m, n, k, layout = spec
        a, b = _matmul_operands(m, n, k, layout, torch.float16)
        c0 = torch.randn(m, n, device=tmm_course.DEVICE).half()
        a64, b64, c64 = a.double(), b.double(), c0.double()
        bound = allowed(
            abs(alpha) * (a64.abs() @ b64.abs()) + abs(beta) * c64.abs(), torch.float16,
            tmm_course.BACKEND,
        )  # fmt: skip
        wrong = [
            WrongAnswer(
                "wrong_values",
                alpha * (a64 @ b64),
                "matches alpha * A @ B alone: beta * C was never added. Load the old C "
                "(converted to float32) and add beta times it before the store.",
            ),
            WrongAnswer(
                "wrong_values",
                a64 @ b64 + beta * c64,
                "matches A @ B + beta * C: the product was not scaled by alpha.",
            ),
        ]
        if alpha != beta:
            wrong.append(
                WrongAnswer(
                    "wrong_values",
                    beta * (a64 @ b64) + alpha * c64,
                    "matches beta * A @ B + alpha * C: alpha and beta are swapped between the "
                    "launch and the kernel. Pass them in the order the kernel takes them.",
                    explains=("reads_c_when_beta_zero",),
                )
            )
        if m == n == k and layout == "contiguous":
            wrong += _matmul_mistakes(a64, b64, lambda p, c64=c64: alpha * p + beta * c64)
        wrong += k_loop_mistakes(a64, b64, lambda p, c64=c64: alpha * p + beta * c64)
        padded = layout == "padded output"
        trials.append(
            Trial(
                case=labelled_case((m, n, k), label, strided_tensors(layout)),
                inputs=(a, b, alpha, beta),
                guard=guarded_output((m, n), torch.float16, row_gap=3 if padded else 0),
                expected=alpha * (a64 @ b64) + beta * c64,
                wrong_answers=wrong,
                atol=bound,
                initial=c0,
                extra=accumulator_precision(alpha * (a64 @ b64) + beta * c64)
                if spec is LONG_K
                else None,
                only_if_all_passed=spec is LONG_K,
            )
        )
    a, b = _matmul_operands(64, 64, 64, "contiguous", torch.float16)
    a64, b64 = a.double(), b.double()
    bound = allowed(abs(alpha) * (a64.abs() @ b64.abs()), torch.float16, tmm_course.BACKEND)
    trials.insert(
        len(trials) - 1,
        Trial(
            case=Case("64x64x64 beta = 0, C holds NaN", (64, 64, 64)),
            inputs=(a, b, alpha, 0.0),
            guard=guarded_output((64, 64), torch.float16),
            expected=alpha * (a64 @ b64),
            atol=bound,
            output_must_not_be_read=True,
        ),
    )

    def call(a: torch.Tensor, b: torch.Tensor, alpha: float, beta: float, c: torch.Tensor):
        return fn(a, b, c, alpha, beta)

    return run_trials(
        "scaled_matmul",
        call,
        trials,
        ("a", "b", "c"),
        messages=MATMUL_MESSAGES,
        allow_course_kernels=allow_course_kernels,
    )
