"""The capstone: ``matmul_fast``, the course's matmul that races cuBLAS (lesson 8). A wing of
its own, beside the lesson kernels it builds on (:mod:`tmm_course.kernels`) and below the
performance lab that measures it (:mod:`tmm_course.perf`). Its parts, one job each:

- :mod:`~tmm_course.capstone.kernels`: the Triton kernels. A grouped pointer kernel (lesson 4's
  kernel in lesson 6's grouped tile order, K split into slices where few tiles fill few SMs)
  and a persistent kernel that loads through tensor descriptors (TMA on Hopper), which first
  copies what they cannot read (and float32's B^T) behind a grid barrier; plus what the TMA
  can read.
- :mod:`~tmm_course.capstone.launches` and :mod:`~tmm_course.capstone.quick_launch`: each call
  signature's launch prepared once, then sent straight to the compiled binary (a small
  product takes a few microseconds on the GPU; Python must not take longer).
- :mod:`~tmm_course.capstone.config`: a :class:`Config` (tiles, warps, stages, switches), the
  unit the fit measures and the results files store, as data.
- :mod:`~tmm_course.capstone.problems`, :mod:`~tmm_course.capstone.candidates`: the grid of
  problems it is judged on (a fitted half, a held-out half; extra fitted problems between
  them) and the configurations tried.
- :mod:`~tmm_course.capstone.fit`, :mod:`~tmm_course.capstone.fitted`: every candidate raced
  on the fitted problems, and the records kept.
- :mod:`~tmm_course.capstone.plans`: the plan: the candidate that did best on the nearest
  fitted problems, corrected for how full it keeps the SMs.
- :mod:`~tmm_course.capstone.calls`: ``matmul_fast`` itself: check once, plan, prepare, run.

Two public switches: :func:`plain_launches` (every launch on Triton's own path, for recorders
and the interpreter) and :func:`reset` (forget every prepared call).
"""

from __future__ import annotations

from collections.abc import Sequence

from tmm_course.capstone import plans
from tmm_course.capstone.calls import matmul_fast, plain_launches, reset
from tmm_course.capstone.config import Config
from tmm_course.capstone.fitted import Fitted
from tmm_course.capstone.plans import Plan, plan

__all__ = ["Config", "Fitted", "Plan", "matmul_fast", "plain_launches", "plan", "reset", "use_fit"]


def use_fit(fitted: Sequence[Fitted] | None) -> None:
    """Plan from ``fitted`` from now on (``results.grid(path).fit``, from your own GPU's
    ``python -m tmm_course.perf.bench fit``); None: the shipped fit of the GPU in hand."""
    plans.use_fit(fitted)
    reset()
