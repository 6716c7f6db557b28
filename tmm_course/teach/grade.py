"""Grade a folder of submitted notebooks into a CSV, one row per submission and exercise.

    python -m tmm_course.teach.grade submissions/ --out grades.csv --timeout 300 --jobs 2

Each submission runs in its own process and Jupyter kernel, several at once, each under a
time limit. The exercises are the reference notebook's check cells (tagged ``check:NAME``); a
submission's grade for NAME is the check result its own ``check:NAME`` cell displayed. A
submission that is not a notebook, runs past its limit or kills its kernel gets one row
saying so; the others are graded all the same.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tmm_course.check.result import RESULT_MIMETYPE, CheckResult

CHECK_TAG = "check:"
DEFAULT_REFERENCE = Path("notebooks/05_homework_transpose.ipynb")
FIELDS = ["submission", "exercise", "verdict", "codes", "detail"]


@dataclass(frozen=True)
class Row:
    submission: str
    exercise: str
    verdict: str  # pass, fail, not_implemented, missing, timeout, invalid, error
    codes: str = ""
    detail: str = ""


def exercises_of(notebook: dict) -> list[str]:
    """The exercise names of the check cells, in notebook order."""
    names = []
    for cell in notebook["cells"]:
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag.startswith(CHECK_TAG):
                names.append(tag[len(CHECK_TAG) :])
    return names


def results_of(notebook: dict) -> dict[str, dict | None]:
    """For each check cell of an executed notebook, the check result it displayed (or None)."""
    found: dict[str, dict | None] = {}
    for cell in notebook["cells"]:
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag.startswith(CHECK_TAG):
                data = [o.get("data", {}).get(RESULT_MIMETYPE) for o in cell.get("outputs", [])]
                found[tag[len(CHECK_TAG) :]] = next((d for d in data if d), None)
    return found


def rows_for(submission: str, exercises: list[str], outcome: dict) -> list[Row]:
    """Turn one submission's execution outcome into CSV rows."""
    status = outcome["status"]
    if status != "ok":
        return [Row(submission, "*", status, detail=outcome.get("detail", ""))]
    rows = []
    for name in exercises:
        result = outcome["results"].get(name)
        if result is None:
            rows.append(
                Row(
                    submission,
                    name,
                    "missing",
                    detail="no check result: the check cell was deleted or failed",
                )
            )
            continue
        check = CheckResult.from_dict(result)
        verdict = (
            "pass"
            if check.passed
            else ("not_implemented" if check.codes == ["not_implemented"] else "fail")
        )
        failed = [c for c in check.cases if not c.passed]
        detail = f"{len(check.cases) - len(failed)}/{len(check.cases)} cases passed"
        if failed:
            detail += f"; first failure: {failed[0].label}: {failed[0].problem}"
        rows.append(Row(submission, name, verdict, " ".join(check.codes), detail))
    return rows


def execute(path: Path, limit: float) -> dict:
    """Run one notebook in a fresh kernel (in this process) and collect its check results."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as error:  # not JSON, not a notebook
        return {"status": "invalid", "detail": f"not a readable notebook: {error}"[:300]}
    with tempfile.TemporaryDirectory() as workdir:
        client = NotebookClient(
            notebook,
            timeout=limit,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": workdir}},
        )
        try:
            client.execute()
        except CellTimeoutError:
            return {"status": "timeout", "detail": f"a cell ran past the {limit:g} s limit"}
        except DeadKernelError as error:
            return {"status": "error", "detail": f"the kernel died: {error}"[:300]}
    return {"status": "ok", "results": results_of(notebook)}


def grade_one(path: Path, limit: float) -> dict:
    """Execute ``path`` in a child process, killed (with its kernel) past ``limit`` seconds."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tmm_course.teach.grade",
            "--execute-one",
            str(path),
            "--timeout",
            str(limit),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=limit + 60)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return {"status": "timeout", "detail": f"ran past the {limit:g} s limit"}
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"status": "error", "detail": (err.strip().splitlines() or ["no output"])[-1]}


def grade_folder(folder: Path, exercises: list[str], limit: float, jobs: int) -> list[Row]:
    """Grade every file in ``folder`` (a bad file gets a row too), ``jobs`` at a time."""
    paths = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(lambda p: grade_one(p, limit), paths))
    return [
        row for p, o in zip(paths, outcomes, strict=True) for row in rows_for(p.name, exercises, o)
    ]


def write_csv(rows: list[Row], out: Path) -> None:
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        writer.writerows([r.submission, r.exercise, r.verdict, r.codes, r.detail] for r in rows)


def _execute_one(path: Path, limit: float) -> int:
    """Child-process entry: print the outcome as one JSON line."""

    def on_alarm(signum, frame):
        raise TimeoutError

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(limit) + 1)
    try:
        outcome = execute(path, limit)
    except TimeoutError:
        outcome = {"status": "timeout", "detail": f"ran past the {limit:g} s limit"}
    finally:
        signal.alarm(0)
    print(json.dumps(outcome))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade a folder of submitted notebooks.")
    parser.add_argument("submissions", type=Path, nargs="?", help="folder of submissions")
    parser.add_argument(
        "--reference",
        type=Path,
        default=DEFAULT_REFERENCE,
        help="the course notebook whose check cells name the exercises",
    )
    parser.add_argument("--out", type=Path, default=Path("grades.csv"), help="CSV to write")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per submission")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once")
    parser.add_argument("--execute-one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute_one:
        return _execute_one(args.execute_one, args.timeout)
    if args.submissions is None or not args.submissions.is_dir():
        parser.error("name the folder of submitted notebooks")
    exercises = exercises_of(json.loads(args.reference.read_text(encoding="utf-8")))
    if not exercises:
        parser.error(f"{args.reference} has no cells tagged {CHECK_TAG}NAME")
    rows = grade_folder(args.submissions, exercises, args.timeout, args.jobs)
    write_csv(rows, args.out)
    print(f"graded {len({r.submission for r in rows})} submission(s) into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
