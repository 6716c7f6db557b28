"""The graded exercises of lessons 6 and 7, each checkable on a CPU:

- :func:`check_grouped_tile`: a function ``pid -> (pid_m, pid_n)`` in grouped order, judged on
  the whole program-id -> tile map of several grids (ragged last groups included);
- :func:`check_faster`: lesson 4's kernel with the learner's knobs, judged by the compiler for
  a T4, an A100 and an H200 (:mod:`tmm_course.compile_ahead`) and, on a GPU, by the clock;
- :func:`check_descriptor_matmul`: the learner's own descriptor kernel, judged like lesson 4's
  check on shapes whose rows a descriptor can read (16-byte aligned), then compiled ahead: it
  must load through descriptors (TMA copies on sm_90); on a GPU it is raced too."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

import tmm_course
from tmm_course.backend import GPU
from tmm_course.check.buffers import guarded_output
from tmm_course.check.engine import Trial, run_trials
from tmm_course.check.exercises import accumulator_precision, labelled_case
from tmm_course.check.result import Case, CheckResult, Diagnosis
from tmm_course.numerics import allowed
from tmm_course.perf import faster

# ---------------------------------------------------------------------------- grouped order

# (grid_m, grid_n, GROUP_M): square, a ragged last group, a group wider than the grid, row-major
TILE_GRIDS = [(4, 4, 2), (6, 5, 4), (7, 3, 2), (3, 8, 1), (5, 6, 8), (1, 1, 1), (9, 4, 3)]


def grouped_tile_reference(pid: int, grid_m: int, grid_n: int, group_m: int) -> tuple[int, int]:
    """Grouped order: groups of ``group_m`` rows of tiles, each walked column by column."""
    per_group = group_m * grid_n
    first_m = (pid // per_group) * group_m
    rows = min(grid_m - first_m, group_m)
    return first_m + (pid % per_group) % rows, (pid % per_group) // rows


def _tile_map(fn: Callable, grid_m: int, grid_n: int, group_m: int) -> list[tuple[int, int]]:
    tiles = []
    for pid in range(grid_m * grid_n):
        got = fn(pid, grid_m, grid_n, group_m)
        if not (isinstance(got, tuple | list) and len(got) == 2):
            raise TypeError(f"grouped_tile({pid}, ...) returned {got!r}; expected (pid_m, pid_n)")
        tiles.append((int(got[0]), int(got[1])))
    return tiles


def _mistake(tiles: list, grid_m: int, grid_n: int, group_m: int) -> tuple[str, str]:
    """(code, sentence) for a wrong map: the mistakes grouped order invites."""
    if len(set(tiles)) != len(tiles) or any(
        not (0 <= m < grid_m and 0 <= n < grid_n) for m, n in tiles
    ):
        seen: dict[tuple[int, int], int] = {}
        for pid, tile in enumerate(tiles):
            if tile in seen or not (0 <= tile[0] < grid_m and 0 <= tile[1] < grid_n):
                first = f"program {seen[tile]} and " if tile in seen else ""
                return "wrong_values", (
                    f"{first}program {pid} got tile {tile}: every program must own exactly one "
                    f"tile inside the {grid_m} x {grid_n} grid."
                )
            seen[tile] = pid
    if tiles == [(pid // grid_n, pid % grid_n) for pid in range(grid_m * grid_n)]:
        return "wrong_values", "this is plain row-major order: GROUP_M is ignored."
    return "wrong_values", "some programs get the wrong tile (the case list shows the first)."


def check_grouped_tile(fn: Callable[[int, int, int, int], tuple[int, int]]) -> CheckResult:
    """``fn(pid, grid_m, grid_n, group_m) -> (pid_m, pid_n)`` against grouped order on every
    grid of :data:`TILE_GRIDS`, each program id of each."""
    cases: list[Case] = []
    diagnoses: list[Diagnosis] = []
    for grid_m, grid_n, group_m in TILE_GRIDS:
        ragged = grid_m % group_m != 0
        case = Case(
            f"{grid_m} x {grid_n} tiles, GROUP_M={group_m}"
            + (" (the last group has fewer rows)" if ragged else ""),
            (grid_m, grid_n),
            ragged=("M",) if ragged else (),
        )
        cases.append(case)
        want = [grouped_tile_reference(p, grid_m, grid_n, group_m) for p in range(grid_m * grid_n)]
        try:
            tiles = _tile_map(fn, grid_m, grid_n, group_m)
        except NotImplementedError:
            case.code, case.problem = "not_implemented", "raises NotImplementedError"
            continue
        except Exception as error:  # a learner's bug must not crash the notebook
            case.code, case.problem = "crashed", f"{type(error).__name__}: {error}"[:200]
            continue
        if tiles == want:
            case.passed = True
            continue
        pid = next(
            p for p, (got, right) in enumerate(zip(tiles, want, strict=True)) if got != right
        )
        case.code, case.cause = _mistake(tiles, grid_m, grid_n, group_m)
        case.problem = f"program {pid} got tile {tiles[pid]}, expected {want[pid]}"
    failed = [c for c in cases if not c.passed]
    if failed:
        codes = {c.code for c in failed}
        if codes == {"not_implemented"}:
            diagnoses.append(
                Diagnosis(
                    "not_implemented",
                    "Write grouped_tile (replace the raise), then run the check again.",
                )
            )
        elif all(c.ragged for c in failed) and any(not c.ragged for c in cases if c.passed):
            diagnoses.append(
                Diagnosis(
                    "ragged_edge",
                    "Right when GROUP_M divides grid_m, wrong otherwise: the "
                    "last group has only grid_m - first_m rows, so take "
                    "rows = min(grid_m - first_m, GROUP_M) and use rows, not GROUP_M, in "
                    "the % and // that place a program inside its group.",
                )
            )
        else:
            first = failed[0]
            code = first.code or "wrong_values"
            message = first.cause or f"{first.label}: {first.problem}"
            diagnoses.append(Diagnosis(code, message))
    return CheckResult("grouped_tile", not failed, cases, diagnoses)


# ------------------------------------------------------------- descriptors (lesson 7)

# (label, M, N, K): every row a whole number of 16 bytes in float16 (K and N multiples of 8)
DESCRIPTOR_CASES = [
    ("square", 64, 64, 64),
    ("one K block", 16, 16, 16),
    ("ragged M", 65, 64, 64),
    ("ragged N", 64, 72, 64),
    ("ragged K", 64, 64, 72),
    ("K smaller than a block", 64, 64, 8),
    ("tall", 304, 8, 48),
    ("skinny", 8, 304, 48),
]
DESCRIPTOR_LONG_K = ("long K", 16, 16, 4096)

DESCRIPTOR_MESSAGES = {
    "ragged_edge": "a descriptor fills rows and columns outside the tensor with zeros and drops "
    "stores outside it, but only if its shape is the tensor's true shape: build each one with "
    "shape=[M, K], [K, N] and [M, N], not with the sizes rounded up to blocks.",
}


def _descriptor_trial(label: str, m: int, n: int, k: int, dtype: torch.dtype) -> Trial:
    device = tmm_course.DEVICE
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    a64, b64 = a.double(), b.double()
    bound = allowed(a64.abs() @ b64.abs(), dtype, tmm_course.BACKEND)
    case = labelled_case((m, n, k), f"{label}, {str(dtype).removeprefix('torch.')}")
    extra = accumulator_precision(a64 @ b64) if label == DESCRIPTOR_LONG_K[0] else None
    return Trial(case, (a, b), guarded_output((m, n), dtype), a64 @ b64, atol=bound, extra=extra)


def check_descriptor_matmul(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
) -> CheckResult:
    """Lesson 7: ``fn(a, b, c)`` must store ``a @ b`` into ``c`` through tensor descriptors, on
    contiguous float16 (and one float32) operands whose rows start every 16 bytes, ragged
    edges included, with a float32 accumulator."""
    trials = [_descriptor_trial(*spec, torch.float16) for spec in DESCRIPTOR_CASES]
    probe = _descriptor_trial(*DESCRIPTOR_LONG_K, torch.float16)
    probe.only_if_all_passed = True
    trials.append(probe)
    trials.append(_descriptor_trial(*DESCRIPTOR_CASES[0], torch.float32))
    result = run_trials(
        "descriptor_matmul", fn, trials, ("a", "b", "c"), messages=DESCRIPTOR_MESSAGES
    )
    if result.passed or not set(result.codes) & {"not_implemented", "crashed"}:
        reads = descriptor_reads(fn)
        result.cases.append(reads)
        if not reads.passed:
            result.passed = False
            result.diagnoses.insert(0, Diagnosis(reads.code or "no_descriptor", reads.problem))
    if result.passed and tmm_course.BACKEND == GPU:
        goal = faster.clock_goal(faster.race(lambda a, b: _filled(fn, a, b)),
                                 torch.cuda.get_device_name(0))  # fmt: skip
        clock, missed = _goal_cases([goal])
        result.cases += clock
        result.passed = goal.met
        result.diagnoses += missed
    return result


def _filled(fn: Callable, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    fn(a, b, c)
    return c


def descriptor_reads(fn: Callable) -> Case:
    """One call of ``fn`` on a 128x128x128 float16 product, its own kernels compiled ahead:
    they read through tensor descriptors if their Triton-level code (TTIR) loads with
    ``descriptor_load`` and their PTX copies with the TMA (``cp.async.bulk.tensor``) for an H200,
    and they compile for an A100 too (where Triton turns each descriptor back into a pointer,
    shape and strides: no TMA there). A pointer kernel does neither."""
    from tmm_course.check.launches import recording
    from tmm_course.compile_ahead import compile_for, specialize

    case = Case("reads A and B through tensor descriptors (compiled for sm_80 and sm_90)", ())
    device = tmm_course.DEVICE
    a = torch.randn(128, 128, device=device).half()
    b = torch.randn(128, 128, device=device).half()
    try:
        with recording() as seen:
            fn(a, b, torch.empty(128, 128, device=device, dtype=torch.float16))
    except Exception as error:  # reported by the trials already
        case.code, case.problem = "crashed", f"{type(error).__name__}: {error}"[:200]
        return case
    mine = [launch for launch in seen.seen if launch.jit is not None and not launch.from_the_course]
    if not mine:
        case.code = "course_kernel"
        case.problem = (
            "no kernel written in the notebook was launched: write your own descriptor kernel "
            "(the course's kernels do not count)"
        )
        return case
    seen_text = []
    for launch in mine:
        options = {k: launch.kwargs[k] for k in ("num_warps", "num_stages") if k in launch.kwargs}
        spec = specialize(launch.jit, launch.args, launch.kwargs)
        ampere = compile_for(launch.jit, spec, "sm_80", **options)
        hopper = compile_for(launch.jit, spec, "sm_90", **options)
        if not (ampere.ok and hopper.ok):
            refused = ampere if not ampere.ok else hopper
            case.code, case.problem = "gpu_would_reject", f"{refused.gpu}: {refused.error}"
            return case
        descriptors = "descriptor_load" in hopper.ttir  # sm_80's TTIR has them as pointers
        tma = "cp.async.bulk.tensor" in hopper.ptx
        seen_text.append(f"{launch.kernel}: descriptor loads in the TTIR {descriptors}, "
                         f"TMA copies on sm_90 {tma}")  # fmt: skip
        if descriptors and tma:
            case.passed, case.problem = True, seen_text[-1]
            return case
    case.code = "no_descriptor"
    case.problem = ("the kernel loads through pointers, not tensor descriptors (" +
                    "; ".join(seen_text) + "): build TensorDescriptor.from_tensor(x, block) on "
                    "the host, pass it, and load with a_desc.load([row, col])")  # fmt: skip
    return case


# ------------------------------------------------------- making it faster (lesson 6)

REASONING_WORDS = 12  # a sentence or two: what limits lesson 4's launch, what yours changes


def _reasoned(reasoning: object) -> bool:
    return isinstance(reasoning, str) and len(reasoning.split()) >= REASONING_WORDS


def _goal_cases(goals: list[faster.Goal]) -> tuple[list[Case], list[Diagnosis]]:
    cases = [
        Case(g.asks, (), passed=g.met, problem=g.seen, code=None if g.met else "too_slow")
        for g in goals
    ]
    missed = [g for g in goals if not g.met]
    diagnoses = [
        Diagnosis("too_slow", f"{g.asks}: not yet ({g.seen}). Turn {g.knob}." if g.knob
                  else f"{g.asks}: not yet ({g.seen}).")
        for g in missed[:1]
    ]  # fmt: skip
    return cases, diagnoses


def check_faster(launch: Mapping[str, object], reasoning: str = "") -> CheckResult:
    """Lesson 6: ``launch``, the knobs of lesson 4's kernel (``BLOCK_M``, ``BLOCK_N``,
    ``BLOCK_K``, ``num_warps``, ``num_stages``, ``GROUP_M``), judged by the compiler for a T4,
    an A100 and an H200 (:func:`tmm_course.perf.faster.compiler_goals`) and, on a GPU, by the
    clock against lesson 4's own launch. ``reasoning``: your prediction in words, asked for
    before the compiler's figures are shown."""
    knobs = faster.knobs_of(launch)
    if knobs == faster.BASELINE:
        return CheckResult("faster", False, [Case("your launch", (), code="not_implemented",
                           problem="still lesson 4's own knobs")], [Diagnosis(
                           "not_implemented", "Change my_launch's knobs (it still holds lesson "
                           "4's), write my_reasoning, then run the check.")])  # fmt: skip
    if not _reasoned(reasoning):
        return CheckResult("faster", False, [Case("your reasoning", (), code="not_implemented",
                           problem="not written yet")], [Diagnosis("not_implemented",
                           f"First say in my_reasoning (at least {REASONING_WORDS} words) what "
                           "limits lesson 4's launch and what each knob you turned changes; "
                           "the check shows the compiler's figures after that.")])  # fmt: skip
    figures = faster.compiled(knobs)
    goals = faster.compiler_goals(knobs, figures)
    if tmm_course.BACKEND == GPU:
        name = torch.cuda.get_device_name(0)
        goals.append(faster.clock_goal(faster.race(knobs), name, faster.missed_knob(goals)))
    cases, diagnoses = _goal_cases(goals)
    result = CheckResult("faster", all(g.met for g in goals), cases, diagnoses)
    result.compiled = [
        {"kernel": "lesson 4's kernel", "launch": knobs.label, "gpu": gpu, "ok": c.ok,
         "error": c.error, "shared_kb": None if c.shared_bytes is None else
         round(c.shared_bytes / 1024, 1), "registers": c.registers,
         "spilled_bytes": c.spilled_bytes, "matrix_unit": c.matrix_unit,
         "programs_per_sm": c.occupancy.programs if c.occupancy else None}
        for gpu, c in figures.items()
    ]  # fmt: skip
    return result
