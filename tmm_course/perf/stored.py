"""The H100 run that lessons 6 and 7 quote: one labelled run of ``python -m
tmm_course.perf.lessons`` (races, sweeps, Nsight Compute DRAM bytes), shipped as package data.

    run = stored.lessons_run()
    run.where                      # device, versions, date and code version, for every figure
    run.journey["ratio_to_torch"]  # each step's speed relative to torch.matmul
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tmm_course import timing
from tmm_course.perf import results

FILE = "lessons_h100.json"


@dataclass(frozen=True)
class LessonsRun:
    """One measured run: provenance, the device's facts and every result."""

    data: dict

    @property
    def provenance(self) -> dict:
        return self.data["provenance"]

    @property
    def timed(self) -> timing.Timing:
        """How its calls were timed: its column heading, and in words."""
        return timing.TIMINGS[timing.stored_timing(self.provenance)]

    @property
    def device(self) -> dict:
        """name, capability, sms, l2_bytes (read from the device), copy bandwidth, peaks."""
        return self.data["device"]

    @property
    def where(self) -> str:
        """'NVIDIA H200, torch 2.11.0, triton 3.6.0, 2026-12-01, code e49739e'."""
        p = self.provenance
        versions = p["versions"]
        return (
            f"{p['device']}, torch {versions['torch'].split('+')[0]}, triton {versions['triton']}, "
            f"{p['date'][:10]}, code {p['code_version']}"
        )

    @property
    def journey(self) -> dict:
        return self.data["journey"]

    @property
    def steps(self) -> list[dict]:
        return self.data["steps"]

    def sweep(self, name: str) -> dict:
        """ "tiles", "stages" or "groups": one knob over a range, raced against torch.matmul."""
        return self.data["sweeps"][name]

    @property
    def tma(self) -> list[dict]:
        """The persistent TMA kernel, its alternatives and matmul_fast against torch.matmul."""
        return self.data["tma"]

    def dram(self, label: str) -> dict:
        """Nsight Compute's DRAM bytes read and written for one launch, e.g. '4096^3 lesson 4'."""
        return self.data["dram"][label]


def lessons_run(path: str | Path | None = None) -> LessonsRun:
    """The shipped run, or one written by ``python -m tmm_course.perf.lessons`` at ``path``
    (``"./lessons_mine.json"``: read as :func:`tmm_course.perf.results.read` reads any)."""
    return LessonsRun(results.read(FILE if path is None else path))


EXERCISES_FILE = "exercises_run.json"


@dataclass(frozen=True)
class ExercisesRun:
    """``python -m tmm_course.teach.exercise_runs`` on a GPU: lessons 6, 7 and 8's solutions and
    a wrong attempt each raced, ``@triton.autotune``'s own record, and a Proton profile."""

    data: dict

    @property
    def where(self) -> str:
        return LessonsRun(self.data).where

    @property
    def timed(self) -> timing.Timing:
        return LessonsRun(self.data).timed

    def where_of(self, part: str) -> str:
        """:attr:`where` for one part: its own code version and date where it names them (a
        part measured later, with other code, on the same GPU and versions)."""
        own = {
            key: self.data[part][key] for key in ("code_version", "date") if key in self.data[part]
        }
        return LessonsRun({**self.data, "provenance": {**self.provenance, **own}}).where

    def timed_of(self, part: str) -> timing.Timing:
        """:attr:`timed` for one part: its own timing where it names one (lesson 8's parts: the
        GPU's time alone, :data:`tmm_course.perf.split_k.TIMED`)."""
        name = self.data[part].get("timing", timing.stored_timing(self.provenance))
        return timing.TIMINGS[name]

    @property
    def provenance(self) -> dict:
        return self.data["provenance"]

    def lesson(self, number: int) -> dict:
        """``{"solution": {...}, "wrong": {...}}``: each with ``ms`` and ``clock_goal``."""
        part = self.data[f"lesson_{number}"]
        return {label: part[label] for label in ("solution", "wrong") if label in part}

    @property
    def faster_sweep(self) -> dict:
        """problem, lesson 4 and torch.matmul's ms, and ``launches``: each with its knobs,
        ``ms``, ``ring`` (shared bytes per program on sm_90) and ``missed`` (the compiler goals
        it misses)."""
        return self.data["faster_sweep"]

    @property
    def descriptor_sweep(self) -> dict:
        """problem, lesson 4 and torch.matmul's ms (on the same ``w.T``), and ``launches``:
        lesson 7's solution by depth of ring, each with its knobs (``tile``, ``num_warps``,
        ``num_stages``), ``ms``, ``ring`` (shared bytes per program on sm_90) and
        ``missed``."""
        return self.data["descriptor_sweep"]

    @property
    def split_k_sweep(self) -> dict:
        """problem, lesson 4 and torch.matmul's ms, and ``launches``: each with its knobs,
        ``ms``, ``in_flight`` (bytes per SM) and ``compiler_goals_met``."""
        return self.data["split_k_sweep"]

    @property
    def autotune(self) -> dict:
        """problem, picked, autotune_ms (its own timings, per candidate), raced_ms."""
        return self.data["autotune"]

    @property
    def profile(self) -> dict:
        """Proton's scopes: time_ns (10 calls) and the flops16 and bytes each was given."""
        return self.data["proton"]


def exercises_run(path: str | Path | None = None) -> ExercisesRun:
    """The shipped exercises run, or one written by ``exercise_runs`` at ``path``."""
    return ExercisesRun(results.read(EXERCISES_FILE if path is None else path))
