"""GPU measurements as typed records: the files the package ships (``tmm_course/perf/data``,
read with :mod:`importlib.resources`, so they work from an installed wheel) and the files the
benchmark commands write, each carrying where, when and how it was measured.

    from tmm_course.perf import results
    h200 = results.bench()                   # the committed H200 goals and host times
    h200.goal("1024^3 float16").ratio_to_torch["matmul_fast"], h200.provenance.where
    results.grid().summary(fitted=False)     # matmul_fast on problems its plan never saw
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import torch

from tmm_course import timing
from tmm_course.capstone.config import Config
from tmm_course.capstone.fitted import Fitted
from tmm_course.capstone.problems import Problem, family

DATA_PACKAGE = "tmm_course.perf"
DATA_FOLDER = "data"
REFERENCE = "torch.matmul"
TIMING = ("ms", "error", "failure")  # what a sweep stores beside each configuration


@dataclass(frozen=True)
class Provenance:
    """Where, when and how a results file was measured."""

    device: str
    capability: tuple[int, int]
    versions: dict[str, str]
    date: str
    command: str
    code: str | None = None  # the commit of the code measured, where the file names one
    timing: str = timing.BEFORE  # how its calls were timed: a key of timing.TIMINGS

    @property
    def timed(self) -> timing.Timing:
        """How the file's calls were timed: its column heading, and in words."""
        return timing.TIMINGS[self.timing]

    @property
    def where(self) -> str:
        """'NVIDIA H200, 2026-11-30, torch 2.11.0+cu130, triton 3.6.0'."""
        return self._on(self.date)

    def _on(self, when: str) -> str:
        v = self.versions
        return f"{self.device}, {when}, torch {v['torch']}, triton {v['triton']}"

    def of(self, rows: Sequence[Race]) -> str:
        """Device, dates, versions and code of ``rows``: every day they were measured on, the
        file's code version and how many later ones raced some of them again (such a row
        names its own ``Race.code`` and ``Race.date``, set when it is merged into the file); where
        every row names its own, the first of those stands for the file's."""
        dates = sorted({row.date or self.date for row in rows} or {self.date})
        codes = list(dict.fromkeys(row.code for row in rows))
        first = codes[0] if codes and None not in codes else self.code
        later = [c for c in codes if c and c != first]
        when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
        versions = "version" if len(later) == 1 else "versions"
        again = f" and {len(later)} later {versions}" if later else ""
        return f"{self._on(when)}, code {first or 'not recorded'}{again}"

    @classmethod
    def from_dict(cls, data: dict) -> Provenance:
        return cls(
            device=data["device"],
            capability=tuple(data["capability"]),
            versions=dict(data["versions"]),
            date=data["date"],
            command=data["command"],
            code=data.get("code"),
            timing=timing.stored_timing(data),
        )

    def as_dict(self) -> dict:
        data = {**dataclasses.asdict(self), "capability": list(self.capability)}
        if self.code is None:
            del data["code"]
        return data


@dataclass(frozen=True)
class Race:
    """Contenders raced against torch.matmul on one problem: errors, medians and ratios."""

    problem: Problem
    tolerance: float
    error: dict[str, float]
    wrong: list[str]
    ms: dict[str, float]
    tflops: dict[str, float]
    ratio_to_torch: dict[str, float]
    host_us: dict[str, float]
    device_ms: dict[str, float | None]  # from CUDA-graph replays: no host time at all
    device_ratio_to_torch: dict[str, float]
    target: float | None = None  # goals: the lowest acceptable ratio
    plan: str | None = None  # goals: what matmul_fast chose
    fraction_of_peak: dict[str, float] = field(default_factory=dict)
    code: str | None = None  # raced again after its file's run: the code version then
    date: str | None = None  # and the day
    plans: dict[str, str] = field(default_factory=dict)  # bench compare: each contender's plan

    @property
    def label(self) -> str:
        return self.problem.label

    @property
    def contenders(self) -> list[str]:
        """Every timed name but the reference, in the order raced."""
        return [name for name in self.ratio_to_torch if name != REFERENCE]

    @classmethod
    def from_dict(cls, data: dict) -> Race:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["problem"] = Problem.from_dict(data["problem"])
        values["device_ms"] = data.get("device_ms_cuda_graph", data.get("device_ms", {}))
        return cls(**values)

    def as_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["problem"] = self.problem.as_dict()
        data["device_ms_cuda_graph"] = data.pop("device_ms")
        for key in ("code", "date", "plans"):
            if not data[key]:
                del data[key]
        return data


@dataclass(frozen=True)
class Bench:
    """``python -m tmm_course.perf.bench``: the capstone's goals and where host time goes."""

    provenance: Provenance
    copy_bandwidth_gbs: float
    goals: list[Race]
    host_us: dict[str, float]  # where a 1024^3 float16 call's host time goes
    peak_tflops: dict[str, float]  # the best torch.matmul rate per kind
    tiny: list[dict] = field(default_factory=list)  # per tiny product: wall_us per contender

    def goal(self, label: str) -> Race:
        """The goal race labelled ``label``, e.g. "1024^3 float16"."""
        for race in self.goals:
            if race.label == label:
                return race
        known = ", ".join(r.label for r in self.goals)
        raise KeyError(f"no goal labelled {label!r}; expected one of: {known}")

    @classmethod
    def from_dict(cls, data: dict) -> Bench:
        return cls(
            provenance=Provenance.from_dict(data),
            copy_bandwidth_gbs=data["copy_bandwidth_gbs"],
            goals=[Race.from_dict(r) for r in data.get("goals", [])],
            host_us=data["host"][0]["host_us"] if data.get("host") else {},
            peak_tflops=data.get("peak_tflops", {}),
            tiny=list(data.get("tiny", [])),
        )


@dataclass(frozen=True)
class SweepTrial:
    """One configuration of a sweep: device milliseconds (None if it failed) and its error."""

    kernel: str
    config: Config
    ms: float | None
    error: float | None
    failure: str | None


@dataclass(frozen=True)
class SweepRow:
    """Every configuration tried on one problem, and torch.matmul timed the same way."""

    problem: Problem
    trials: list[SweepTrial]
    torch_ms: float

    @classmethod
    def from_dict(cls, data: dict) -> SweepRow:
        trials = [
            SweepTrial(
                kernel,
                Config.from_dict({k: v for k, v in t.items() if k not in TIMING}),
                t["ms"],
                t["error"],
                t["failure"],
            )
            for kernel, rows in data["kernels"].items()
            for t in rows
        ]
        return cls(Problem.from_dict(data["problem"]), trials, data["torch_ms"])


@dataclass(frozen=True)
class Sweep:
    """``python -m tmm_course.perf.bench sweep``: every configuration per problem."""

    provenance: Provenance
    rows: list[SweepRow]

    @classmethod
    def from_dict(cls, data: dict) -> Sweep:
        return cls(Provenance.from_dict(data), [SweepRow.from_dict(r) for r in data["sweep"]])


@dataclass(frozen=True)
class Pitfalls:
    """``python -m tmm_course.perf.pitfalls``: the pitfalls lab's GPU-only figures."""

    provenance: Provenance
    precision_errors: dict[str, float]  # float32 512^3: input_precision -> error
    accumulator_error_curve: dict[str, list[float]]  # "K" and one rms list per accumulator
    loop_bound_timing: dict[str, float]  # runtime K against constexpr K

    @classmethod
    def from_dict(cls, data: dict) -> Pitfalls:
        return cls(
            Provenance.from_dict(data),
            data["precision_errors_512"],
            data["accumulator_error_curve"],
            data["loop_bound_timing"],
        )


@dataclass(frozen=True)
class Transposes:
    """``python -m tmm_course.perf.transposes``: lesson 5's three transposes timed on a GPU."""

    provenance: Provenance
    shape: tuple[int, int]
    dtype: str
    gbs: dict[str, float]  # transpose -> bytes read plus written per second, in GB/s

    @classmethod
    def from_dict(cls, data: dict) -> Transposes:
        return cls(Provenance.from_dict(data), tuple(data["shape"]), data["dtype"], data["gbs"])


def squares(rows: list[Race], kind: str = "float16") -> list[Race]:
    """The races of square ``kind`` products with B row-major among ``rows``, smallest first."""
    return sorted(
        (r for r in rows if r.problem.kind == kind and r.problem.m == r.problem.n == r.problem.k
         and r.problem.b_layout == "row"),
        key=lambda r: r.problem.m,
    )  # fmt: skip


def _geomean(values: list[float]) -> float:
    """The geometric mean of ratios (NaN for none)."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


@dataclass(frozen=True)
class Summary:
    """matmul_fast against torch.matmul over a set of problems."""

    problems: int
    geomean: float
    worst: list[tuple[str, float]]  # the ten lowest ratios, lowest first
    below: int  # problems under the floor
    floor: float = 0.85

    def __str__(self) -> str:
        return (
            f"{self.problems} problems: geometric mean {self.geomean:.3f}, lowest "
            f"{self.worst[0][1]:.3f} ({self.worst[0][0]}), {self.below} below {self.floor}"
        )


@dataclass(frozen=True)
class Grid:
    """``python -m tmm_course.perf.bench fit grid``: the plan fitted on half of the grid, then
    matmul_fast raced against torch.matmul on all of it."""

    provenance: Provenance
    fit: list[Fitted]
    rows: list[Race]
    fitted: frozenset[str]  # labels of the problems the plan was fitted on
    layouts: list[Race] = field(default_factory=list)  # every layout of A and B, one size
    replanned: dict[str, str] = field(default_factory=dict)  # rows raced with an older plan
    pitches: list[Race] = field(default_factory=list)  # rows on 128-byte lines, or mid-line
    inductor: list[Race] = field(default_factory=list)  # held out: Inductor's GEMM raced too
    paths: list[Race] = field(default_factory=list)  # the plan beside each kernel forced
    compare: list[Race] = field(default_factory=list)  # held out: this GPU's fit, other cards'

    def part(self, fitted: bool | None = None) -> list[Race]:
        """Every row, or those the plan was (``True``) or was not (``False``) fitted on."""
        return [r for r in self.rows if fitted is None or (r.label in self.fitted) == fitted]

    def summary(self, fitted: bool | None = None, floor: float = 0.85) -> Summary:
        ratios = sorted((r.ratio_to_torch["matmul_fast"], r.label) for r in self.part(fitted))
        geomean = _geomean([x for x, _ in ratios])
        worst = [(label, x) for x, label in ratios[:10]]
        return Summary(len(ratios), geomean, worst, sum(x < floor for x, _ in ratios), floor)

    def families(self) -> dict[str, tuple[int, float, float]]:
        """Per family of problems (:func:`~tmm_course.capstone.problems.family`): how many, and
        the geometric means of matmul_fast's ratio as raced (the file's timing,
        :attr:`Provenance.timed`) and of device time alone."""
        table = {}
        for name in dict.fromkeys(family(r.problem) for r in self.rows):
            rows = [r for r in self.rows if family(r.problem) == name]
            host = [r.ratio_to_torch["matmul_fast"] for r in rows]
            device = [r.device_ratio_to_torch["matmul_fast"] for r in rows
                      if "matmul_fast" in r.device_ratio_to_torch]  # fmt: skip
            table[name] = (len(rows), _geomean(host), _geomean(device))
        return table

    @classmethod
    def from_dict(cls, data: dict) -> Grid:
        rows = data.get("grid", [])
        return cls(
            Provenance.from_dict(data),
            [Fitted.from_dict(f) for f in data.get("fit", [])],
            [Race.from_dict(r) for r in rows],
            frozenset(r["problem"]["label"] for r in rows if r.get("fitted")),
            [Race.from_dict(r) for r in data.get("layouts", [])],
            dict(data.get("replanned", {})),
            [Race.from_dict(r) for r in data.get("pitches", [])],
            [Race.from_dict(r) for r in data.get("held-out-inductor", [])],
            [Race.from_dict(r) for r in data.get("paths", [])],
            [Race.from_dict(r) for r in data.get("compare", [])],
        )


@dataclass(frozen=True)
class Races:
    """``python -m tmm_course.perf.bench host inductor``: host time per call, and matmul_fast
    beside torch.compile's best Triton GEMM (:data:`~tmm_course.perf.bench.INDUCTOR`)."""

    provenance: Provenance
    host_us: dict[str, float]
    inductor: list[Race]
    compile_s: dict[str, float]  # problem label -> seconds Inductor took to compile it
    notes: list[str]

    @classmethod
    def from_dict(cls, data: dict) -> Races:
        rows = data.get("inductor", [])
        return cls(
            Provenance.from_dict(data),
            data["host"][0]["host_us"] if data.get("host") else {},
            [Race.from_dict(r) for r in rows],
            {r["problem"]["label"]: r["compile_s"] for r in rows},
            list(data.get("notes", [])),
        )


def read(name: str | Path) -> dict:
    """A results file as plain data: a path, or the name of one the package ships (the one
    reader of ``tmm_course/perf/data``: :mod:`~tmm_course.perf.stored` reads through it too)."""
    path = Path(name)  # "./mine.json" names a path: Path drops its "./"
    if path.suffix == ".json" and (path.is_absolute() or "/" in str(name).replace("\\", "/")):
        return json.loads(path.read_text(encoding="utf-8"))
    in_package = resources.files(DATA_PACKAGE) / DATA_FOLDER / str(name)
    if not in_package.is_file():
        available = shipped()
        raise FileNotFoundError(
            f"no results file {str(name)!r} ships with tmm_course; expected one of "
            f"{', '.join(available)}, or a path to a file you measured (e.g. './bench_mine.json')."
        )
    return json.loads(in_package.read_text(encoding="utf-8"))


def shipped() -> list[str]:
    """The names of the results files the package ships."""
    return sorted(p.name for p in (resources.files(DATA_PACKAGE) / DATA_FOLDER).iterdir())


def bench(name: str | Path = "goals_h200.json") -> Bench:
    """A benchmark file: shipped (by name) or measured (by path)."""
    return Bench.from_dict(read(name))


def sweep(name: str | Path = "sweep_h200.json") -> Sweep:
    """A sweep file: shipped (by name) or measured (by path)."""
    return Sweep.from_dict(read(name))


def grid(name: str | Path = "grid_h200.json") -> Grid:
    """A grid file (the fitted plan and the race over the grid): shipped or measured."""
    return Grid.from_dict(read(name))


def races(name: str | Path = "races_h200.json") -> Races:
    """A host-time and Inductor race file: shipped (by name) or measured (by path)."""
    return Races.from_dict(read(name))


def pitfalls(name: str | Path = "pitfalls_h200.json") -> Pitfalls:
    """A pitfalls-lab file: shipped (by name) or measured (by path)."""
    return Pitfalls.from_dict(read(name))


def transposes(name: str | Path = "transposes_h200.json") -> Transposes:
    """A lesson-5 transposes file: shipped (by name) or measured (by path)."""
    return Transposes.from_dict(read(name))


def provenance(module: str, argv: list[str] | None = None, timed: str = "with_host") -> dict:
    """Device, capability, versions, date, the command (``python -m module args``) and how its
    calls are ``timed`` (a key of :data:`tmm_course.timing.TIMINGS`)."""
    import triton

    args = sys.argv[1:] if argv is None else argv
    return Provenance(
        device=torch.cuda.get_device_name(0),
        capability=tuple(torch.cuda.get_device_capability(0)),
        versions={
            "python": platform.python_version(),
            "torch": torch.__version__,
            "triton": triton.__version__,
        },
        date=datetime.date.today().isoformat(),
        command=command(module, args),
        timing=timed,
    ).as_dict()


def measure_command(
    description: str, measure: Callable[[], dict], argv: list[str] | None = None
) -> int:
    """The ``python -m`` entry of a module whose GPU figures go to one ``--out`` JSON file:
    refuses without a GPU, else measures, writes and prints."""
    import argparse

    import tmm_course
    from tmm_course.backend import GPU

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    if tmm_course.BACKEND != GPU:
        print("error: these figures need compiled Triton on a GPU", file=sys.stderr)
        return 2
    data = measure()
    write(args.out, data)
    print(json.dumps(data, indent=2))
    return 0


def command(module: str, args: list[str]) -> str:
    """``python -m module args`` as documented: file arguments (JSON, CSV) by their names,
    without the folders of the machine it ran on."""

    def named(arg: str) -> str:
        flag, equals, value = arg.rpartition("=") if arg.startswith("--") else ("", "", arg)
        return flag + equals + (Path(value).name if value.endswith((".json", ".csv")) else value)

    return " ".join(["python", "-m", module, *map(named, args)])


def write(path: Path, data: dict) -> None:
    """Write measurements as indented JSON, creating the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
