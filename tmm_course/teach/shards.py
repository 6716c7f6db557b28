"""Grading beyond one machine: a deterministic share of the inbox per task, and the merge.

``grade inbox/ --shard K/N`` grades the entries whose key (:func:`.safe_io.entry_key`) hashes
to K modulo N, into ``grades.K-of-N.csv``: a Slurm job array (``tools/slurm/grade-array.sbatch``)
or a Kubernetes indexed Job runs the N tasks with the task's index as K, each on its own
machine. Then

    python -m tmm_course.teach.grade merge grades.*-of-4.csv --inbox inbox/ --out grades.csv

checks that the shards are all there, that no entry was graded twice and that every entry of
the inbox has its rows, and writes one ``grades.csv`` with its report and LMS export (or says
what is missing or doubled, and writes nothing).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import sys
from pathlib import Path

from tmm_course.teach import report
from tmm_course.teach.safe_io import entry_key, shown_name


def shard_of(key: str, count: int) -> int:
    """The shard (0 to ``count`` - 1) an entry's key belongs to, the same on every machine."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % count


def shard_file(k: int, n: int) -> str:
    return f"grades.{k}-of-{n}.csv"


class MergeError(RuntimeError):
    """The shards do not add up to the inbox."""


def merge(parts: list[Path], inbox: Path) -> tuple[list[str], list[list[str]], list[dict]]:
    """The header, the rows (each entry's together, in the inbox's order) and the runs'
    provenance of ``parts``; :class:`MergeError` naming what is doubled or missing."""
    header: list[str] | None = None
    by_key: dict[str, list[list[str]]] = {}
    source: dict[str, Path] = {}
    notes: list[list[str]] = []
    doubled: list[str] = []
    runs: list[dict] = []
    for part in parts:
        with part.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            head = next(reader, None)
            if head is None or "key" not in head:
                raise MergeError(f"{part} is not a grades CSV with a key column")
            if header is not None and head != header:
                raise MergeError(f"{part} has the columns {head}, the others {header}")
            header, key_at = head, head.index("key")
            seen_here: set[str] = set()
            for row in reader:
                key = row[key_at]
                if not key:
                    notes.append(row)
                    continue
                if key in source and key not in seen_here:
                    doubled.append(f"{row[0]} (in {source[key]} and {part})")
                source.setdefault(key, part)
                seen_here.add(key)
                by_key.setdefault(key, []).append(row)
        sidecar = report.companions(part)["json"]
        if sidecar.is_file():
            runs += json.loads(sidecar.read_text(encoding="utf-8"))
    if doubled:
        raise MergeError("graded in more than one shard: " + "; ".join(doubled))
    assert header is not None
    exercise_at = header.index("exercise")
    for rows in by_key.values():
        names = [r[exercise_at] for r in rows]
        if len(set(names)) != len(names):
            raise MergeError(f"{rows[0][0]} has an exercise twice: {names}")
    keys = [entry_key(n) for n in sorted(os.listdir(inbox), key=os.fsencode)]
    missing = [shown_name(os.fsdecode(n)) for n in keys if n not in by_key]
    if missing:
        raise MergeError(
            f"{len(missing)} inbox entries have no rows: {', '.join(missing[:20])}"
            + (" ..." if len(missing) > 20 else "")
            + ": run their shard again (--resume grades only what it lacks)"
        )
    known = set(keys)
    strangers = [rows[0][0] for key, rows in by_key.items() if key not in known]
    if strangers:
        raise MergeError(f"rows for entries not in {inbox}: {', '.join(strangers[:20])}")
    rows = [row for key in keys for row in by_key[key]]
    return header, rows + [n for i, n in enumerate(notes) if n not in notes[:i]], runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tmm_course.teach.grade merge",
        description="Combine the CSVs of --shard runs into one grades.csv, its report and its "
        "LMS export; refuses an entry graded twice and names inbox entries without rows.",
    )
    parser.add_argument("parts", nargs="+", type=Path, help="the shards' CSVs")
    parser.add_argument("--inbox", type=Path, required=True, help="the folder they graded")
    parser.add_argument("--out", type=Path, default=Path("grades.csv"), help="CSV to write")
    parser.add_argument("--roster", type=Path, help=report.ROSTER_HELP)
    args = parser.parse_args(argv)
    if not args.inbox.is_dir():
        parser.error(f"no folder at {args.inbox}: --inbox names the folder the shards graded")
    roster = report.roster_or_exit(args.roster, parser)
    if args.out.resolve() in {p.resolve() for p in args.parts}:
        parser.error(f"--out {args.out} is one of the shards: name another file")
    try:
        header, rows, runs = merge(args.parts, args.inbox)
    except (MergeError, OSError) as error:
        print(f"not merged: {error}", file=sys.stderr)
        return 1
    with args.out.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    exercise_at = header.index("exercise")
    exercises = list(dict.fromkeys(r[exercise_at] for r in rows if r[exercise_at] != "*"))
    written = report.write_all(args.out, exercises, runs, roster)
    print(f"merged {len(args.parts)} shard(s), {len(rows)} rows into {args.out}; the report: "
          f"{written}")  # fmt: skip
    return 0
