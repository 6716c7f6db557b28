"""Measure lessons 6, 7 and 8's exercises on a GPU and write one labelled run (the file the
lessons quote on a CPU, ``tmm_course/perf/data/exercises_run.json``):

    python -m tmm_course.teach.exercise_runs --notebooks notebooks \\
        --code-version "$(git rev-parse --short HEAD)" --out exercises_mine.json

- each lesson's reference solution (its notebook's solution cell, run as it is) and a plausible
  attempt with one knob left wrong (lesson 6's: its solution with a 128x256 tile on 4 warps;
  lesson 8's: its solution with ``SPLIT_K=1``), raced
  against lesson 4's kernel and ``torch.matmul`` (:func:`tmm_course.perf.faster.race`), with
  the compiler's goals for each;
- lesson 6's solution at every depth of ring its tile classes compile to
  (:data:`tmm_course.perf.faster.KNOB_SETS`), raced together, each with its ring of slabs and
  the compiler goals it misses;
- lesson 7's solution at every depth of ring of two tile classes
  (:data:`tmm_course.perf.faster.DESCRIPTOR_KNOB_SETS`), raced on its linear layer, each with
  its ring and the compiler goals it misses;
- lesson 8's solution at every depth of ring and slicing
  (:data:`tmm_course.perf.split_k.KNOB_SETS`),
  raced together, each with its loads in flight per SM;
- ``@triton.autotune``'s own record at float16 4096^3: the configuration it picked and its
  timing of every candidate, beside the same candidates raced interleaved;
- a Proton profile (``triton.profiler``) of lesson 4's kernel and lesson 6's solution: time,
  and the FLOP/s and bytes/s that follow from the FLOPs and ideal bytes given to each scope.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import linecache
import platform
import sys
import traceback
from dataclasses import asdict
from pathlib import Path

import torch

from tmm_course import timing
from tmm_course.perf import faster, results

# lesson 6's solution (128x256 tiles) on 4 warps: its accumulator spills
LESSON_6_WRONG = {"num_warps": 4}
LESSON_7_WRONG = {"tile": (128, 256, 64), "num_warps": 4, "num_stages": 3}
# lesson 8's solution with K left whole: one slice
LESSON_8_WRONG = {"SPLIT_K": 1}


def solution_cells(notebook: Path) -> dict[str, object]:
    """The names a notebook's solution cells define, run as they are (asserts included)."""
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    import tmm_course
    from tmm_course import check

    cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    source = lambda cell: "".join(cell["source"])
    # the names the lessons' solutions use (their setup cells also draw widgets)
    names: dict[str, object] = {"__name__": "__main__", "tmm_course": tmm_course, "torch": torch,
                                "triton": triton, "tl": tl, "TensorDescriptor": TensorDescriptor,
                                **{n: getattr(check, n) for n in check.__all__}}  # fmt: skip
    solutions = [c for c in cells if "solution" in c["metadata"].get("tags", [])]
    for cell in solutions:  # as they are, asserts included
        where = f"<{notebook.stem} cell {cell.get('id', '')}>"
        text = source(cell)
        # as IPython does: the source stays readable (Triton's @jit reads it back)
        linecache.cache[where] = (len(text), None, text.splitlines(True), where)
        exec(compile(text, where, "exec"), names)
    names.setdefault("tmm_course", tmm_course)
    return names


def _goals(goals: list[faster.Goal]) -> list[dict]:
    return [asdict(g) for g in goals]


def _judged(lesson: int, launcher, attempts: dict, spec, lab, race) -> dict:
    """The solution's ``launcher`` with each attempt's knobs: the compiler's goals of its
    launches at scale (``spec``, an exercise with an ``AtScale``; ``lab``: its performance
    lab), and ``race(fn)`` timed and judged by the lab's clock goal."""
    from tmm_course.check.compiled import launches_at_scale

    out = {}
    for label, knobs in attempts.items():
        fn = functools.partial(launcher, **knobs)
        goals = lab.launch_goals(launches_at_scale(spec, fn))
        ms = race(fn)
        clock = lab.clock_goal(ms, torch.cuda.get_device_name(0), faster.missed_knob(goals))
        out[label] = {"launch": knobs, "ms": ms, "compiler_goals": _goals(goals),
                      "clock_goal": asdict(clock)}  # fmt: skip
        print(f"lesson {lesson}", label, ms, clock, flush=True)
    return out


def lesson_6(notebook: Path) -> dict:
    from tmm_course.exercises import faster as spec

    launcher = solution_cells(notebook)["solution_fast_matmul"]
    race = lambda fn: faster.race(faster.filled(fn))
    attempts = {"solution": {}, "wrong": LESSON_6_WRONG}
    return _judged(6, launcher, attempts, spec.EXERCISE, faster, race)


def lesson_7(notebook: Path) -> dict:
    names = solution_cells(notebook)
    launcher = names["solution_descriptor_matmul"]
    out = {}
    wrong = LESSON_7_WRONG
    attempts = {
        "solution": lambda a, b: launcher(a, b, torch.empty_like(a)),
        "wrong": lambda a, b: launcher(a, b, torch.empty_like(a), tile=wrong["tile"],
                                       num_warps=wrong["num_warps"]),
    }  # fmt: skip
    for label, run in attempts.items():
        ms = faster.race(run)
        clock = faster.clock_goal(ms, torch.cuda.get_device_name(0))
        out[label] = {"ms": ms, "clock_goal": asdict(clock)}
        if label == "wrong":
            out[label]["launch"] = {"tile": list(wrong["tile"]), "num_warps": wrong["num_warps"]}
        print("lesson 7", label, ms, clock, flush=True)
    return out


def lesson_8(notebook: Path) -> dict:
    from tmm_course.exercises import split_k as spec
    from tmm_course.perf import split_k

    launcher = solution_cells(notebook)["solution_split_k_matmul"]
    attempts = {"solution": {}, "wrong": LESSON_8_WRONG}
    judged = _judged(8, launcher, attempts, spec.EXERCISE, split_k, split_k.race)
    return {**judged, "timing": split_k.TIMED}


def _ring_sweep(notebook: Path, name: str, spec, goals, label: str, **sweep) -> dict:
    """A solution (``name``, from ``notebook``) at many tiles and depths of ring, raced
    (:func:`tmm_course.perf.faster.sweep`, given ``sweep``), each launch with the shared memory
    its program holds on an H200 (its ring) and the ``goals`` it misses, from its own launches
    at scale (``spec``, the exercise)."""
    from tmm_course.check.compiled import launches_at_scale

    launcher = solution_cells(notebook)[name]
    record = faster.sweep(launcher, **sweep)
    for row in record["launches"]:
        launched = launches_at_scale(spec.EXERCISE, functools.partial(launcher, **row["launch"]))
        dot = faster.dot_launch(launched)
        row["ring"] = dot.compiled["sm_90"].shared_bytes if dot else None
        row["missed"] = [g.asks for g in goals(launched) if not g.met]
        print(label, row, flush=True)
    return record


def faster_sweep(notebook: Path) -> dict:
    """Lesson 6's solution at many tiles and depths of ring (:data:`tmm_course.perf.faster.
    KNOB_SETS`)."""
    from tmm_course.exercises import faster as spec

    return _ring_sweep(notebook, "solution_fast_matmul", spec, faster.launch_goals,
                       "lesson 6 sweep")  # fmt: skip


def descriptor_sweep(notebook: Path) -> dict:
    """Lesson 7's solution at many depths of ring (:data:`tmm_course.perf.faster.
    DESCRIPTOR_KNOB_SETS`), raced on its linear layer."""
    from tmm_course.exercises import descriptor_matmul as spec

    return _ring_sweep(notebook, "solution_descriptor_matmul", spec, faster.descriptor_goals,
                       "descriptor sweep", knob_sets=faster.DESCRIPTOR_KNOB_SETS,
                       linear=True)  # fmt: skip


def split_k_sweep(notebook: Path) -> dict:
    """Lesson 8's solution at every depth of ring and slicing, raced
    (:func:`tmm_course.perf.split_k.sweep`), each launch with its loads in flight per SM and
    whether it meets every compiler goal, from its own launches at scale
    (:func:`tmm_course.check.compiled.launches_at_scale`)."""
    from tmm_course.check.compiled import launches_at_scale
    from tmm_course.exercises import split_k as spec
    from tmm_course.perf import split_k

    launcher = solution_cells(notebook)["solution_split_k_matmul"]
    record = split_k.sweep(launcher)
    for row in record["launches"]:
        launched = launches_at_scale(spec.EXERCISE, functools.partial(launcher, **row["launch"]))
        dot = faster.dot_launch(launched)
        split = split_k.split_of(dot) if dot else None
        row["programs"] = dot.programs if dot else None
        row["in_flight"] = split_k.in_flight(split, dot.compiled["sm_90"]) if split else None
        row["compiler_goals_met"] = all(g.met for g in split_k.launch_goals(launched))
        print("split-K sweep", row, flush=True)
    return {**record, "timing": split_k.TIMED}


def autotune_record(size: int = 4096) -> dict:
    """What ``@triton.autotune`` timed and picked at float16 ``size^3``, and the same
    candidates raced interleaved afterwards, timed as the autotuner times them (do_bench's
    :func:`~tmm_course.timing.cold_cache_ms`)."""
    from tmm_course.kernels import autotuned
    from tmm_course.kernels.matmul import matmul

    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=generator)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=generator)
    autotuned.autotuned_matmul(a, b)
    tuner = autotuned.autotuned_matmul_kernel
    timings = {autotuned.short(c): t for c, t in tuner.configs_timings.items()}
    picked = autotuned.tuned()[(size, size, size)]

    def run(config):
        k = config.kwargs
        return lambda: matmul(a, b, block_m=k["BLOCK_M"], block_n=k["BLOCK_N"],
                              block_k=k["BLOCK_K"], num_warps=config.num_warps,
                              num_stages=config.num_stages)  # fmt: skip

    raced = timing.interleaved({autotuned.short(c): run(c) for c in autotuned.CONFIGS}, rounds=5,
                               timer=timing.cold_cache_ms)  # fmt: skip
    record = {"problem": f"{size}^3 float16", "picked": picked,
              "autotune_ms": {k: (v if isinstance(v, float) else list(v)) for k, v in
                              timings.items()},
              "raced_ms": raced}  # fmt: skip
    print("autotune", record, flush=True)
    return record


def proton_profile(notebook: Path, size: int = 4096) -> dict:
    """A Proton profile of lesson 4's kernel, lesson 6's solution and torch.matmul
    (:func:`tmm_course.perf.profiler.profile`)."""
    from tmm_course.perf import profiler

    yours = faster.filled(solution_cells(notebook)["solution_fast_matmul"])
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=generator)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=generator)
    runs = {"lesson 4": faster.BASELINE.launcher(), "yours": yours,
            "torch.matmul": torch.matmul}  # fmt: skip
    _, raw = profiler.profile(runs, a, b, calls=10)
    return {"problem": f"{size}^3 float16, 10 calls each",
            "scopes": profiler.scopes(raw, tuple(runs)), "hatchet": raw}  # fmt: skip


def joined(earlier: dict, provenance: dict) -> dict:
    """``earlier`` (a run's file) ready to take more parts measured under ``provenance``: the
    same GPU, versions and timing, or a ValueError says which differs. Its date and code stay
    (a part measured with other code names its own: :func:`stamped`); its command gains this
    one."""
    before = earlier.get("provenance", {})
    before = {**before, "timing": timing.stored_timing(before)}  # runs from before name none
    for key in ("device", "versions", "timing"):
        if before.get(key) != provenance[key]:
            raise ValueError(
                f"it was measured with {key} {before.get(key)!r}, this run has "
                f"{provenance[key]!r}: measure every part again, without --into"
            )
    command = f"{before['command']} && {provenance['command']}"
    return {**earlier, "provenance": {**before, "command": command}}


def stamped(part: dict, file: dict, provenance: dict) -> dict:
    """``part``, measured under ``provenance``, as the ``file`` it joins keeps it: naming its
    own code version and date where the file's code is another."""
    if file["code_version"] == provenance["code_version"]:
        return part
    return {**part, "code_version": provenance["code_version"], "date": provenance["date"]}


def main(argv: list[str] | None = None) -> int:
    import triton

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"))
    parser.add_argument("--code-version", default="unknown")
    parser.add_argument("--out", type=Path, default=Path("exercises_mine.json"))
    parser.add_argument("--parts", nargs="+", default=["lesson_6", "faster_sweep", "lesson_7",
                        "descriptor_sweep", "lesson_8", "split_k_sweep", "autotune", "proton"],
                        help="what to measure (default: all)")  # fmt: skip
    parser.add_argument("--into", type=Path, default=None,
                        help="a run of this GPU, code and versions to add these parts to (one "
                        "command may not have time for every part)")  # fmt: skip
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: measuring needs a CUDA GPU", file=sys.stderr)
        return 2
    out: dict = {
        "provenance": {
            "device": torch.cuda.get_device_name(0),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "code_version": args.code_version,
            # the command as documented: files by their names, not this machine's paths
            "command": results.command("tmm_course.teach.exercise_runs", argv or sys.argv[1:]),
            "timing": "with_host",  # tmm_course.timing.TIMINGS
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "triton": triton.__version__,
                "cuda": torch.version.cuda,
            },
        },
    }
    parts = {
        "lesson_6": lambda: lesson_6(args.notebooks / "06_making_it_fast.ipynb"),
        "faster_sweep": lambda: faster_sweep(args.notebooks / "06_making_it_fast.ipynb"),
        "lesson_7": lambda: lesson_7(args.notebooks / "07_persistent_tma.ipynb"),
        "descriptor_sweep": lambda: descriptor_sweep(args.notebooks / "07_persistent_tma.ipynb"),
        "lesson_8": lambda: lesson_8(args.notebooks / "08_racing_cublas.ipynb"),
        "split_k_sweep": lambda: split_k_sweep(args.notebooks / "08_racing_cublas.ipynb"),
        "autotune": autotune_record,
        "proton": lambda: proton_profile(args.notebooks / "06_making_it_fast.ipynb"),
    }
    unknown = sorted(set(args.parts) - set(parts))
    if unknown:
        parser.error(f"no part named {', '.join(unknown)}; the parts are {', '.join(parts)}")
    measured = out["provenance"]
    if args.into is not None:
        try:
            out = joined(json.loads(args.into.read_text()), measured)
        except (OSError, ValueError) as error:
            parser.error(f"--into {args.into}: {error}")
    for name, part in parts.items():
        if name not in args.parts:
            continue
        try:
            out[name] = stamped(part(), out["provenance"], measured)
        except Exception:  # one part failing leaves the others measured
            out[name] = {"failed": traceback.format_exc()[-3000:]}
            print(name, "failed", out[name]["failed"], flush=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
