"""Grade a folder of submitted notebooks into a CSV, one row per submission and exercise.

    python -m tmm_course.teach.grade inbox/ --out grades.csv --timeout 300 --jobs 2

For each submission the grader rebuilds the notebook from the instructor's reference, taking
only the exercise cells' sources from the submission (:mod:`.graded_notebook`), runs it in a
sandbox (:mod:`.sandbox`: its own unprivileged user, folder, limits, no network, everything it
started killed at the end) against a read-only copy of the course package with no notebooks
beside it, and reads the verdicts from signed result records, never from outputs. Rows are
appended as each submission finishes, so a run that stops keeps what it graded, and
``--resume`` skips those. Every entry of the inbox gets a row; the inbox is hashed before and
after, and any change is reported.

Verdicts: ``pass``, ``fail`` (with the diagnosis codes and the first failing case),
``not_implemented``, ``missing`` (no exercise cell or no result), ``review`` (the exercise code
reaches into the checker, the display machinery, processes, files or the interpreter's
internals: a person should look; never a pass), ``timeout``, ``error``, ``invalid``.

Several machines: split the inbox (``ls inbox | split -n r/4``) and run one grader per part
with GNU parallel or a job array of your cluster's scheduler, each writing its own CSV; then
concatenate the CSVs (``--resume`` makes a rerun of any part cheap).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import queue
import secrets
import shutil
import stat
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tmm_course.check.result import CheckResult
from tmm_course.teach import graded_notebook, sandbox
from tmm_course.teach.graded_notebook import Exercise

DEFAULT_REFERENCE = Path("notebooks/05_homework_transpose.ipynb")
FIELDS = ["submission", "exercise", "verdict", "codes", "detail"]
NOTEBOOK = "submission.ipynb"
RESULTS = "results.jsonl"
STATUS = "status.json"
OUTPUT_CAP = 2**20  # bytes of cell output the child keeps counting before it gives up


@dataclass(frozen=True)
class Row:
    submission: str
    exercise: str
    verdict: str  # pass fail not_implemented missing review timeout error invalid
    codes: str = ""
    detail: str = ""


def expected_labels(exercises: list[Exercise]) -> dict[str, list[str]]:
    """Each exercise's check name and case labels, from its check run on a launcher that
    does nothing."""
    from tmm_course import check

    class Untouched(dict):
        def __missing__(self, name: str):
            def todo(*args: object) -> None:
                raise NotImplementedError

            return getattr(check, name) if name.startswith("check_") else todo

    labels = {}
    for exercise in exercises:
        result = eval(exercise.check_source, {}, Untouched())  # the reference's own check cell
        labels[exercise.name] = [result.exercise, *(c.label for c in result.cases)]
    return labels


def rows_for(
    submission: str,
    exercises: list[Exercise],
    labels: dict[str, list[str]],
    status: dict,
    results: dict[str, list[dict]],
    flags: dict[str, list[str]],
    sources: dict[str, str | None],
) -> list[Row]:
    """The CSV rows of one submission, from its verified results and the review flags."""
    if status.get("status") in ("timeout", "error") and not results:
        return [Row(submission, "*", status["status"], detail=status.get("detail", ""))]
    rows = []
    for exercise in exercises:
        name = exercise.name
        found = results.get(name, [])
        if sources.get(name) is None:
            rows.append(Row(submission, name, "missing", detail="no exercise cell with its id"))
            continue
        if not found:
            if flags.get(name):
                detail = f"needs review: {'; '.join(flags[name])} (no check result was recorded)"
                rows.append(Row(submission, name, "review", detail=detail))
            else:
                rows.append(Row(submission, name, "missing", detail="no check result recorded"))
            continue
        check = CheckResult.from_dict(found[0])
        verdict = (
            "pass"
            if check.passed
            else ("not_implemented" if check.codes == ["not_implemented"] else "fail")
        )
        failed = [c for c in check.cases if not c.passed]
        detail = f"{len(check.cases) - len(failed)}/{len(check.cases)} cases passed"
        if failed:
            detail += f"; first failure: {failed[0].label}: {failed[0].problem}"
        problems = list(flags.get(name, []))
        elsewhere = sorted(n for n, reasons in flags.items() if reasons and n != name)
        if elsewhere and check.passed:  # code in one cell can change how every check runs
            problems.append(f"the exercise cell of {', '.join(elsewhere)} needs review")
        if len(found) > 1:
            problems.append(f"{len(found)} results were recorded, expected one")
        if [check.exercise, *(c.label for c in check.cases)] != labels[name]:
            problems.append("the result's cases do not match the reference's check")
        if problems:
            detail = f"needs review: {'; '.join(problems)} (the check said {verdict}: {detail})"
            verdict = "review"
        rows.append(Row(submission, name, verdict, " ".join(check.codes), detail))
    return rows


def package_copy(into: Path) -> Path:
    """A read-only copy of the installed tmm_course package (no notebooks beside it)."""
    import tmm_course

    source = Path(tmm_course.__file__).resolve().parent
    target = into / "tmm_course"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    for path in [into, *into.rglob("*")]:
        readable = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
        mode = readable | (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH if path.is_dir() else 0)
        os.chmod(path, mode)
    return into


def scratch_root() -> str | None:
    """Where grading folders go: /var/tmp, since each sandbox gets a private /tmp."""
    return "/var/tmp" if Path("/var/tmp").is_dir() else None


def _environment(folder: Path, site: Path, key: bytes) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "TMPDIR": str(folder),
        "PYTHONPATH": str(site),
        "PYTHONDONTWRITEBYTECODE": "1",
        "JUPYTER_RUNTIME_DIR": str(folder / ".runtime"),
        "JUPYTER_DATA_DIR": str(folder / ".data"),
        "MPLCONFIGDIR": str(folder / ".matplotlib"),
        "TRITON_CACHE_DIR": str(folder / ".triton"),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        graded_notebook.KEY_VARIABLE: key.hex(),
        graded_notebook.RESULTS_VARIABLE: str(folder / RESULTS),
    }
    for name in ("TMM_BACKEND", "CUDA_VISIBLE_DEVICES", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


@dataclass
class Grader:
    """Everything one grading run shares: the reference, its exercises and the package copy."""

    reference: dict
    exercises: list[Exercise]
    labels: dict[str, list[str]]
    site: Path
    limits: sandbox.Limits
    scratch: Path  # where each submission's folder is made (outside /tmp, which is private)
    hide: list[Path]  # what the sandbox sees empty: the inbox, the reference's folder

    def grade(self, path: Path, slot: int) -> list[Row]:
        """Grade one inbox entry; always returns its rows."""
        name = path.name
        if not path.is_file() or path.suffix != ".ipynb":
            return [Row(name, "*", "invalid", detail="not a notebook file (.ipynb)")]
        try:
            submission = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(submission.get("cells"), list):
                raise ValueError("no list of cells")
        except (ValueError, UnicodeDecodeError, AttributeError) as error:
            return [Row(name, "*", "invalid", detail=f"not a readable notebook: {error}"[:300])]
        sources = graded_notebook.exercise_sources(submission, self.exercises)
        flags = {n: graded_notebook.review_flags(s) for n, s in sources.items() if s}
        built = graded_notebook.build(self.reference, sources)
        folder = Path(tempfile.mkdtemp(prefix="submission-", dir=self.scratch))
        try:
            (folder / NOTEBOOK).write_text(json.dumps(built), encoding="utf-8")
            key = secrets.token_bytes(32)
            command = [sys.executable, "-m", "tmm_course.teach.grade", "--execute-one", NOTEBOOK,
                       "--timeout", str(self.limits.seconds)]  # fmt: skip
            outcome = sandbox.run(
                command, folder, _environment(folder, self.site, key), self.limits, slot,
                folder.parent / f"{folder.name}.log", self.hide, [self.site],
            )  # fmt: skip
            status = _read_json(folder / STATUS)
            if outcome.returncode is None:
                status = {"status": "timeout", "detail": f"ran past {self.limits.seconds:g} s"}
            elif status.get("status") not in ("ok", "timeout", "error"):
                status = {"status": "error", "detail": f"exit code {outcome.returncode}"}
            lines = _read_lines(folder / RESULTS)
            results = graded_notebook.verified(lines, key)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            Path(f"{folder}.log").unlink(missing_ok=True)
        return rows_for(name, self.exercises, self.labels, status, results, flags, sources)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8")[:10_000])
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _read_lines(path: Path, cap: int = 2**20) -> list[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.read(cap).splitlines()
    except OSError:
        return []


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every entry below ``folder`` (a folder hashes as its name)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        found[key] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return found


class CsvOut:
    """Rows appended as each submission finishes, flushed at once; resumable."""

    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.done: set[str] = set()
        if resume and path.exists():
            with path.open(newline="", encoding="utf-8") as f:
                self.done = {row["submission"] for row in csv.DictReader(f)}
        else:
            with path.open("w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerow(FIELDS)

    def write(self, rows: list[Row]) -> None:
        with self.lock, self.path.open("a", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(
                [r.submission, r.exercise, r.verdict, r.codes, r.detail] for r in rows
            )
            f.flush()
            os.fsync(f.fileno())


def grade_folder(
    inbox: Path, grader: Grader, out: CsvOut, jobs: int, progress: bool = True
) -> list[Row]:
    """Grade every entry of ``inbox`` not yet in ``out``, ``jobs`` at a time."""
    from tqdm.auto import tqdm

    entries = [p for p in sorted(inbox.iterdir()) if p.name not in out.done]
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(max(1, jobs)):
        slots.put(slot)
    rows: list[Row] = []

    def one(path: Path) -> list[Row]:
        slot = slots.get()
        try:
            graded = grader.grade(path, slot)
        except Exception as error:  # the grader's own fault: still a row, and go on
            graded = [Row(path.name, "*", "error", detail=f"grader: {error}"[:300])]
        finally:
            slots.put(slot)
        out.write(graded)
        return graded

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for graded in tqdm(pool.map(one, entries), total=len(entries), desc="submissions",
                           disable=not progress):  # fmt: skip
            rows += graded
    return rows


def _capped_client(notebook, limit: float, folder: str):
    """An nbclient NotebookClient that keeps no output (results travel elsewhere) and stops a
    notebook whose output runs past :data:`OUTPUT_CAP` bytes."""
    from nbclient import NotebookClient

    class Client(NotebookClient):
        printed = 0

        def output(self, outs, msg, display_id, cell_index):
            self.printed += len(json.dumps(msg.get("content", {}), default=str))
            if self.printed > OUTPUT_CAP:
                raise OutputLimit(f"more than {OUTPUT_CAP} bytes of output")
            return None

    return Client(
        notebook, timeout=limit, startup_timeout=120, kernel_name="python3",
        allow_errors=True, resources={"metadata": {"path": folder}},
    )  # fmt: skip


class OutputLimit(RuntimeError):
    """A submission printed more than the grader keeps reading."""


def _execute_one(path: Path, limit: float) -> int:
    """Child entry, inside the sandbox: run the built notebook; write how it ended."""
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    status = {"status": "ok"}
    try:
        notebook = nbformat.read(path, as_version=4)
        _capped_client(notebook, limit, str(path.parent.resolve())).execute()
    except CellTimeoutError:
        status = {"status": "timeout", "detail": f"a cell ran past the {limit:g} s limit"}
    except DeadKernelError as error:
        status = {"status": "error", "detail": f"the kernel died: {error}"[:300]}
    except OutputLimit as error:
        status = {"status": "error", "detail": str(error)}
    except Exception as error:  # anything else the notebook or its kernel did
        status = {"status": "error", "detail": f"{type(error).__name__}: {error}"[:300]}
    Path(STATUS).write_text(json.dumps(status), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade a folder of submitted notebooks.")
    parser.add_argument("submissions", type=Path, nargs="?", help="folder of submissions")
    parser.add_argument(
        "--reference",
        type=Path,
        default=DEFAULT_REFERENCE,
        help="the course notebook (with its solutions) the submissions answer",
    )
    parser.add_argument("--out", type=Path, default=Path("grades.csv"), help="CSV to write")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per submission")
    parser.add_argument("--memory-gib", type=float, default=12, help="memory per submission")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once")
    parser.add_argument("--resume", action="store_true", help="skip submissions in --out")
    parser.add_argument("--execute-one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)  # fmt: skip
    if args.execute_one:
        return _execute_one(args.execute_one, args.timeout)
    if args.submissions is None or not args.submissions.is_dir():
        parser.error("name the folder of submitted notebooks")
    if not args.reference.is_file():
        parser.error(f"no reference notebook at {args.reference}: pass --reference PATH")
    reference = graded_notebook.read_reference(args.reference)
    exercises = graded_notebook.exercises_of(reference)
    if not exercises:
        parser.error(f"{args.reference} has no exercise cell followed by a solution and a check")
    if not sandbox.isolation_available():
        print("note: not root, so submissions run as this user, without per-submission users, "
              "network namespace or private /tmp (limits and process kill still apply)",
              file=sys.stderr)  # fmt: skip
    limits = sandbox.Limits(args.timeout, int(args.memory_gib * 2**30))
    before = digest(args.submissions)
    with tempfile.TemporaryDirectory(prefix="tmm-grade-", dir=scratch_root()) as scratch:
        os.chmod(scratch, 0o711)  # each sandbox user reaches its own folder, lists nothing
        site = package_copy(Path(scratch) / "site")
        labels = expected_labels(exercises)
        hide = [args.submissions.resolve(), args.reference.resolve().parent]
        grader = Grader(reference, exercises, labels, site, limits, Path(scratch), hide)
        out = CsvOut(args.out, args.resume)
        rows = grade_folder(args.submissions, grader, out, args.jobs)
    after = digest(args.submissions)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        out.write([Row("(inbox)", "*", "inbox_changed", detail=", ".join(changed)[:300])])
        print(f"warning: the inbox changed while grading: {', '.join(changed)}", file=sys.stderr)
    print(f"graded {len({r.submission for r in rows})} submission(s) into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
