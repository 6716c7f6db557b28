"""The capstone's fit: every candidate raced with torch.matmul on each fitted problem, into the
records the plan chooses from (:class:`Fitted`). The caller times (``bench fit`` passes
interleaved medians of each call with its host time): this module measures nothing itself
and runs anywhere."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator

import torch

from tmm_course.capstone.calls import matmul_fast
from tmm_course.capstone.candidates import candidates_for, for_float32
from tmm_course.capstone.config import Config
from tmm_course.capstone.fitted import Fitted
from tmm_course.capstone.kernels import tma_problem
from tmm_course.capstone.problems import Problem
from tmm_course.numerics import error

# ``timed(problem, runs)``: each run's milliseconds, torch.matmul's under "torch.matmul"
Timer = Callable[[Problem, dict[str, Callable[[], object]]], dict[str, float]]
Pairs = Iterable[tuple[str, Config]]


def ratios(problem: Problem, timed: Timer, say: Callable[[str], None] = print,
           pairs: Pairs | None = None) -> dict[tuple[str, Config], float]:  # fmt: skip
    """Each candidate for ``problem`` (or each of ``pairs``; the persistent kernel only where
    descriptors can read) that computes the right product: its ratio to torch, by ``timed``."""
    (a, b), limit = problem.operands(), problem.tolerance()
    right: dict[str, Callable[[], object]] = {"torch.matmul": lambda: torch.matmul(a, b)}
    choices: dict[str, tuple[str, Config]] = {}
    if pairs is None:
        pairs = candidates_for(problem.m, problem.n, problem.k, problem.dtype)
    for path, config in pairs:
        if path == "persistent_tma" and tma_problem(a, b, stage=True) is not None:
            continue
        run = functools.partial(matmul_fast, a, b, path=path, config=config)
        name = f"{path} {config}"
        try:
            if error(run(), a, b) <= limit:
                right[name], choices[name] = run, (path, config)
            else:
                say(f"{problem.label}: {name} is wrong here, left out")
        except Exception as exc:  # too much shared memory, say: not a candidate here
            say(f"{problem.label}: {name} failed: {type(exc).__name__}")
    ms = timed(problem, right)
    return {pair: ms["torch.matmul"] / ms[name] for name, pair in choices.items()}


def fit_one(problem: Problem, timed: Timer, say: Callable[[str], None] = print,
            pairs: Pairs | None = None) -> Fitted | None:  # fmt: skip
    """:meth:`Fitted.best_of` the :func:`ratios` of ``problem``'s candidates (or ``pairs``)."""
    return Fitted.best_of(problem, ratios(problem, timed, say, pairs))


def fit(problems: Iterable[Problem], timed: Timer, say: Callable[[str], None] = print
        ) -> Iterator[Fitted]:  # fmt: skip
    """:func:`fit_one` on each problem, skipping those where no grouped candidate ran."""
    for problem in problems:
        fitted = fit_one(problem, timed, say)
        if fitted is None:
            say(f"{problem.label}: no candidate ran, left out of the fit")
            continue
        say(f"{problem.label:34s} {fitted.ratio:.3f} {fitted.path} {fitted.config}")
        yield fitted


def refit(earlier: Fitted, new: Pairs, timed: Timer, say: Callable[[str], None] = print
          ) -> Fitted:  # fmt: skip
    """``earlier`` with the ``new`` candidates of its size class timed in one run beside an
    anchor, ``earlier``'s best pair that is not new, and put on ``earlier``'s scale through it
    (times the anchor's ratio then over its ratio now); winners chosen anew, or unchanged.
    The known ratios stay as they were: noise between two runs moves no known winner."""
    p = earlier.problem
    fresh = {(path, for_float32(c) if p.dtype == "float32" else c) for path, c in new}
    wanted = [pair for pair in candidates_for(p.m, p.n, p.k, p.dtype) if pair in fresh]
    measured = earlier.measured()
    known = {pair: r for pair, r in measured.items() if pair not in fresh}
    if not wanted or not known:
        return earlier
    anchor = max(known, key=known.get)
    now = ratios(p, timed, say, dict.fromkeys([*wanted, anchor]))  # no grouped one needed
    if anchor not in now:
        return earlier
    scale = known[anchor] / now[anchor]
    timed_now = {pair: r * scale for pair, r in now.items() if pair != anchor}
    merged = Fitted.best_of(p, {**measured, **timed_now})
    say(f"{p.label:34s} {earlier.ratio:.3f} -> {merged.ratio:.3f} {merged.path} {merged.config}"
        f" (anchor {now[anchor]:.3f} now, {known[anchor]:.3f} then)")  # fmt: skip
    return merged
