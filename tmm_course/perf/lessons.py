"""Measure what lessons 6 and 7 show, on a GPU, and write it as one labelled run.

    ncu --clock-control none --profile-from-start off --print-units base --csv \\
        --metrics dram__bytes_read.sum,dram__bytes_write.sum \\
        python -m tmm_course.perf.lessons dram --order order.json > ncu.csv
    python -m tmm_course.perf.lessons measure --ncu ncu.csv --order order.json \\
        --code-version "$(git rev-parse --short HEAD)" --out lessons_mine.json

``dram`` launches every step of :data:`~tmm_course.perf.knobs.STEPS` (and the launch orders of
the grouped-order problem) once, inside the profiled range, so that Nsight Compute counts the
bytes each one read from and wrote to DRAM. ``measure`` races every step, sweep and the
persistent TMA kernel against ``torch.matmul`` (interleaved, median of 5 rounds, the launchers'
each call back to back as a user makes it, host time included:
:func:`tmm_course.timing.with_host_ms`) and stores everything with the device (its L2 size
read from it), versions, date, command and code version.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import platform
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

import tmm_course
from tmm_course.perf import intensity, knobs, results

JOURNEY_SIZE = 4096  # float16 4096^3: the journey and the tile and stage sweeps
GROUPED_SIZE = 8192  # float16 8192^3: where grouped order wins
TMA_SIZES = (4096, 8192)
TMA_DTYPES = (torch.float16, torch.bfloat16)
ROUNDS = 5
# what counts the DRAM bytes of the ``dram`` run (the first command of this module's docstring)
DRAM_COMMAND = (
    "ncu --clock-control none --profile-from-start off --print-units base --csv --metrics "
    "dram__bytes_read.sum,dram__bytes_write.sum python -m tmm_course.perf.lessons dram "
    "--order order.json"
)


def operands(size: int, dtype: torch.dtype = torch.float16) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=dtype, generator=generator)
    b = torch.randn(size, size, device="cuda", dtype=dtype, generator=generator)
    return a, b


def dram_launches() -> list[tuple[str, Callable[[], object]]]:
    """(label, call) for every launch the DRAM counts are taken of, in launch order."""
    a, b = operands(JOURNEY_SIZE)
    launches: list[tuple[str, Callable[[], object]]] = [
        (f"{JOURNEY_SIZE}^3 {step.name}", lambda run=step.run: run(a, b)) for step in knobs.STEPS
    ]
    launches.append((f"{JOURNEY_SIZE}^3 torch.matmul", lambda: torch.matmul(a, b)))
    big_a, big_b = operands(GROUPED_SIZE)
    for config in knobs.GROUPS:
        run = config.launcher()
        launches.append((f"{GROUPED_SIZE}^3 {config.label}", lambda run=run: run(big_a, big_b)))
    return launches


def dram(order_path: Path) -> None:
    """Run each launch once inside the profiled range (each warmed up outside it first)."""
    launches = dram_launches()
    for _, call in launches:
        call()  # compile, and let the autotuner choose, before the profiled range
    torch.cuda.synchronize()
    labels = []
    for label, call in launches:
        torch.cuda.profiler.start()
        call()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        labels.append(label)
    order_path.write_text(json.dumps(labels))


def parse_ncu(text: str) -> list[dict]:
    """Kernel name and DRAM bytes read and written for each profiled kernel, in order, from
    ``ncu --csv --print-units base`` output (lines that are not CSV rows are skipped)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        entry = rows.setdefault(row["ID"], {"kernel": row["Kernel Name"]})
        value = float(row["Metric Value"].replace(",", ""))
        entry["read" if row["Metric Name"].startswith("dram__bytes_read") else "written"] = value
    return [rows[key] for key in sorted(rows, key=int)]


def attach_dram(labels: list[str], kernels: list[dict]) -> dict[str, dict]:
    """Each launch's kernels (a launch may run more than one, e.g. cuBLAS's) summed."""
    if len(kernels) < len(labels):
        raise ValueError(f"{len(kernels)} kernels profiled for {len(labels)} launches")
    extra = len(kernels) - len(labels)
    out: dict[str, dict] = {}
    index = 0
    for label in labels:
        take = 1 + (extra if "torch.matmul" in label else 0)  # only cuBLAS may launch more
        group = kernels[index : index + take]
        index += take
        out[label] = {
            "kernels": [k["kernel"][:80] for k in group],
            "read_bytes": sum(k["read"] for k in group),
            "written_bytes": sum(k["written"] for k in group),
        }
    return out


def race(size: int, dtype: torch.dtype, contenders: dict[str, Callable]) -> dict:
    """Milliseconds per call with host time (median of ROUNDS interleaved runs), TFLOP/s,
    ratio to torch and error of every contender on ``size^3``."""
    from tmm_course.numerics import error
    from tmm_course.timing import interleaved

    a, b = operands(size, dtype)
    everyone = {"torch.matmul": torch.matmul, **contenders}
    errors, failures = {}, {}
    for name, fn in everyone.items():
        try:
            errors[name] = error(fn(a, b), a, b)
        except Exception as exc:  # a configuration this GPU refuses: recorded, not timed
            failures[name] = f"{type(exc).__name__}: {exc}"[:300]
    timed = {n: fn for n, fn in everyone.items() if n not in failures}
    ms = interleaved({n: (lambda fn=fn: fn(a, b)) for n, fn in timed.items()}, rounds=ROUNDS)
    work = intensity.flops(size, size, size)
    return {
        "problem": f"{size}^3 {str(dtype).removeprefix('torch.')}",
        "ms": ms,
        "tflops": {n: work / (t * 1e-3) / 1e12 for n, t in ms.items()},
        "ratio_to_torch": {n: ms["torch.matmul"] / t for n, t in ms.items()},
        "error": errors,
        "failures": failures,
    }


def device_facts() -> dict:
    from tmm_course.perf.measure import copy_bandwidth_gbs, gpu_clocks

    props = torch.cuda.get_device_properties(0)
    a, b = operands(8192)
    from tmm_course.timing import cold_cache_ms

    peaks = {}
    for dtype in ("float16", "bfloat16", "tf32"):
        x, y = (a, b) if dtype == "float16" else (a.bfloat16(), b.bfloat16())
        if dtype == "tf32":
            x, y = a.float(), b.float()
            torch.backends.cuda.matmul.allow_tf32 = True
        ms = min(cold_cache_ms(lambda x=x, y=y: x @ y, rep_ms=100) for _ in range(3))
        torch.backends.cuda.matmul.allow_tf32 = False
        peaks[dtype] = intensity.flops(8192, 8192, 8192) / (ms * 1e-3) / 1e12
    return {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count,
        "l2_bytes": int(props.L2_cache_size),
        "copy_bandwidth_gbs": copy_bandwidth_gbs(1024),
        "peak_tflops": peaks,  # cuBLAS at 8192^3: the measured roof per precision
        "clocks": gpu_clocks(),
    }


def measure(args: argparse.Namespace) -> dict:
    import triton

    facts = device_facts()
    print("device", facts, flush=True)
    steps = {s.name: s.run for s in knobs.STEPS}
    out: dict = {
        "provenance": {
            "device": facts["name"],
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "code_version": args.code_version,
            "command": results.command("tmm_course.perf.lessons", args.argv),
            "timing": "with_host",  # tmm_course.timing.TIMINGS
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "triton": triton.__version__,
                "cuda": torch.version.cuda,
            },
        },
        "device": facts,
        "steps": [{"name": s.name, "change": s.change, "tile": s.tile} for s in knobs.STEPS],
    }
    save = lambda: args.out.write_text(json.dumps(out, indent=1) + "\n")  # after every part
    out["journey"] = race(JOURNEY_SIZE, torch.float16, steps)
    save()
    print("journey", out["journey"]["ratio_to_torch"], flush=True)
    sweeps = {"tiles": (knobs.TILES, JOURNEY_SIZE), "stages": (knobs.STAGES, JOURNEY_SIZE),
              "groups": (knobs.GROUPS, GROUPED_SIZE)}  # fmt: skip
    out["sweeps"] = {}
    for name, (configs, size) in sweeps.items():
        result = race(size, torch.float16, {c.label: c.launcher() for c in configs})
        result["configs"] = {c.label: asdict(c) for c in configs}
        out["sweeps"][name] = result
        print(name, {k: round(v, 3) for k, v in result["ratio_to_torch"].items()}, flush=True)
        save()
    from tmm_course.capstone.calls import matmul_fast
    from tmm_course.kernels.persistent_tma import PersistentConfig, persistent_matmul

    alternatives = {"persistent_matmul": None,
                    "persistent 128x128x64 w8 s4": PersistentConfig(128, 128, 64, num_stages=4),
                    "persistent 256x128x64 w8 s3": PersistentConfig(256, 128, 64)}  # fmt: skip
    out["tma"] = []
    for size in TMA_SIZES:
        for dtype in TMA_DTYPES:
            contenders = {
                name: (lambda a, b, c=config: persistent_matmul(a, b, config=c))
                for name, config in alternatives.items()
            }
            contenders["matmul_fast"] = matmul_fast
            result = race(size, dtype, contenders)
            out["tma"].append(result)
            print(result["problem"], result["ratio_to_torch"], flush=True)
            save()
    if args.ncu:
        labels = json.loads(Path(args.order).read_text())
        out["dram"] = attach_dram(labels, parse_ncu(Path(args.ncu).read_text()))
        out["provenance"]["dram_command"] = DRAM_COMMAND
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("dram", "measure"))
    parser.add_argument("--order", default="order.json", help="launch labels of `dram`")
    parser.add_argument("--ncu", help="Nsight Compute CSV of the `dram` run")
    parser.add_argument("--code-version", default="unknown", help="e.g. git rev-parse HEAD")
    parser.add_argument("--out", type=Path, default=Path("lessons_mine.json"))
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if tmm_course.DEVICE.type != "cuda":
        print("error: measuring needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.what == "dram":
        dram(Path(args.order))
        return 0
    args.out.write_text(json.dumps(measure(args), indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
