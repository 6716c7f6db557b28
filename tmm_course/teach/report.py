"""The class at a glance, written beside ``grades.csv`` from its rows: an HTML report, an LMS
export and the run's provenance.

- ``grades.html``: one page, no network (its plot is a PNG inside it): each exercise's pass
  rate and verdicts, every student's verdict and primary diagnosis per exercise (most failures
  first), the most common diagnoses per exercise with one example each, the submissions that
  went to ``timeout`` or ``error``, and where, when and with what the run graded (course
  version, device, time).
- ``grades-lms.csv``: one row per submission, one column per exercise (1 for a pass, else 0)
  and a total. Without a roster, the student is the notebook's file name (``Student`` and
  ``SIS Login ID``, Canvas's names): it imports only where submissions are named by login.
  With a roster (``--roster``: a ``file`` column naming each submission, then the LMS's own
  identity columns, e.g. Canvas's ``Student, ID, SIS User ID, SIS Login ID`` or Moodle's
  ``Email address``), each row carries those columns instead.
- ``grades.json``: the provenance of each run whose rows the CSV holds (one, or one per shard).
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import html
import io
import json
import os
import platform
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tmm_course.teach.safe_io import csv_cell, entry_name, shown_name

VERDICTS = ["pass", "fail", "not_implemented", "missing", "review", "timeout", "error", "invalid"]
COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "not_implemented": "#9e9e9e",
           "missing": "#bdbdbd", "review": "#f9a825", "timeout": "#6a1b9a",
           "error": "#ef6c00", "invalid": "#5d4037"}  # fmt: skip
TROUBLE = ("timeout", "error")


def companions(csv_path: Path) -> dict[str, Path]:
    """Where the report, the LMS export and the provenance of ``csv_path`` go."""
    stem = csv_path.name.removesuffix(".csv")  # grades.2-of-4.csv: grades.2-of-4.html
    return {"html": csv_path.with_name(f"{stem}.html"),
            "lms": csv_path.with_name(f"{stem}-lms.csv"),
            "json": csv_path.with_name(f"{stem}.json")}  # fmt: skip


def code_version(site: Path) -> str:
    """A digest of the course package the workers ran (the copy in ``site``)."""
    digest = hashlib.sha256()
    for path in sorted(site.rglob("*.py")):
        digest.update(str(path.relative_to(site)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def device() -> str:
    """What the workers computed on: the GPU(s) they were handed, or the CPU interpreter."""
    import torch

    import tmm_course

    if tmm_course.BACKEND != "interpreter" and torch.cuda.is_available():
        names = Counter(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        return ", ".join(f"{n} x {name}" for name, n in names.items())
    cpu = platform.processor() or platform.machine()
    for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"Triton's interpreter on the CPU ({cpu}, {os.cpu_count()} cores)"


def provenance(
    *, run, code, started, graded, jobs, gpus, limits, shard, isolated, reference
) -> dict:
    """Where, when and with what one run graded."""
    import torch
    import triton

    import tmm_course

    finished = time.time()
    stamp = lambda t: time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
    return {
        "run": run,
        "course_version": tmm_course.__version__,
        "code": code,
        "reference": Path(reference).name,
        "device": device(),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "started": stamp(started),
        "finished": stamp(finished),
        "seconds": round(finished - started, 1),
        "submissions": graded,
        "seconds_per_submission": round((finished - started) / graded, 2) if graded else None,
        "load_average": [round(x, 1) for x in os.getloadavg()],  # what else ran on the host
        "jobs": jobs,
        "gpus": list(gpus),
        "timeout_s": limits.seconds,
        "memory_gib": round(limits.memory_bytes / 2**30, 2),
        "shard": f"{shard[0]}/{shard[1]}" if shard else None,
        "isolation": "isolated" if isolated else "unisolated",
        "command": " ".join(["python -m tmm_course.teach.grade", *sys.argv[1:]]),
    }


def read_rows(csv_path: Path) -> list[dict]:
    with csv_path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


class RosterError(ValueError):
    """The roster CSV cannot map submissions to students."""


ROSTER_FILE = "file"  # the roster's column naming each submission (with or without .ipynb)
PLAIN_IDENTITY = ["Student", "SIS Login ID"]  # without a roster: the file name in both


@dataclass(frozen=True)
class Roster:
    """Who handed in which notebook: the LMS's identity columns for each submission's file."""

    columns: list[str]  # the LMS's, in the roster's order
    people: dict[str, dict[str, str]]  # file name without .ipynb -> column -> value

    def who(self, file: str) -> dict[str, str] | None:
        """The identity of the student who handed in ``file``, or None."""
        return self.people.get(file.removesuffix(".ipynb"))


def read_roster(path: Path) -> Roster:
    """The roster CSV at ``path``: a ``file`` column, then the LMS's identity columns."""
    how = (
        f"a roster is a CSV with a '{ROSTER_FILE}' column (each submission's file name) and the "
        "columns your LMS matches students on, e.g. Canvas: Student,ID,SIS User ID,SIS Login ID; "
        "Moodle: Email address"
    )
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = [c.strip() for c in reader.fieldnames or []]
            records = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise RosterError(f"cannot read the roster {path}: {error}") from None
    if ROSTER_FILE not in header:
        raise RosterError(f"{path} has the columns {header}: {how}")
    columns = [c for c in header if c != ROSTER_FILE]
    if not columns:
        raise RosterError(f"{path} has no identity column beside '{ROSTER_FILE}': {how}")
    people: dict[str, dict[str, str]] = {}
    for line, record in enumerate(records, start=2):
        record = {(k or "").strip(): (v or "").strip() for k, v in record.items()}
        file = record[ROSTER_FILE].removesuffix(".ipynb")
        if not file:
            raise RosterError(f"{path}, line {line}: no file name in the '{ROSTER_FILE}' column")
        if file in people:
            raise RosterError(f"{path}, line {line}: {file} is named twice")
        people[file] = {c: record.get(c, "") for c in columns}
    return Roster(columns, people)


ROSTER_HELP = (
    "a CSV naming each submission's student for the LMS export: a 'file' column (the "
    "notebook's file name), then the LMS's identity columns (Canvas: Student,ID,SIS User ID,"
    "SIS Login ID; Moodle: Email address)"
)


def roster_or_exit(path: Path | None, parser: argparse.ArgumentParser) -> Roster | None:
    """The roster ``--roster`` names (None without one); a bad one stops the command."""
    if path is None:
        return None
    try:
        return read_roster(path)
    except RosterError as error:
        parser.error(str(error))


def write_all(
    csv_path: Path, exercises: list[str], runs: list[dict], roster: Roster | None = None
) -> Path:
    """The report, the LMS export and the provenance of ``csv_path``; the report's path."""
    rows = read_rows(csv_path)
    places = companions(csv_path)
    places["json"].write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")
    write_lms(places["lms"], rows, exercises, roster)
    places["html"].write_text(page(rows, exercises, runs, csv_path.name, roster), encoding="utf-8")
    return places["html"]


def _entries(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows by inbox entry (the key column), in order; notes without a key left out."""
    found: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("key"):
            found.setdefault(row["key"], []).append(row)
    return found


def unmatched(rows: list[dict], roster: Roster) -> tuple[list[str], list[str]]:
    """Submissions the roster does not name, and roster files with no submission."""
    files = [shown_name(entry_name(key)) for key in _entries(rows)]
    handed_in = {f.removesuffix(".ipynb") for f in files}
    return ([f for f in files if roster.who(f) is None],
            [f for f in roster.people if f not in handed_in])  # fmt: skip


def write_lms(
    path: Path, rows: list[dict], exercises: list[str], roster: Roster | None = None
) -> None:
    """One row per submission: its student, 1 per exercise passed, 0 otherwise, and the total.
    With a roster, the student is the roster's identity columns, and a submission it does not
    name is left out (the report lists it)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow([*(roster.columns if roster else PLAIN_IDENTITY), *exercises, "Total"])
        for key, graded in _entries(rows).items():
            verdicts = {r["exercise"]: r["verdict"] for r in graded}
            points = [int(verdicts.get(e) == "pass") for e in exercises]
            if roster is None:
                name = graded[0]["submission"].removeprefix("'").removesuffix(".ipynb")
                identity = [name, name]
            elif (person := roster.who(entry_name(key))) is not None:
                identity = [person[c] for c in roster.columns]
            else:
                continue
            out.writerow([*map(csv_cell, identity), *points, sum(points)])


def _plot(rows: list[dict], exercises: list[str]) -> str:
    """Each exercise's verdicts as a stacked bar, a PNG as a data URI."""
    from matplotlib.figure import Figure  # no pyplot: no backend, no window

    counts = {e: Counter(r["verdict"] for r in rows if r["exercise"] == e) for e in exercises}
    entries = max(1, len(_entries(rows)))
    figure = Figure(figsize=(8, 0.45 * len(exercises) + 1.4), dpi=100)
    axes = figure.subplots()
    left = [0.0] * len(exercises)
    for verdict in VERDICTS:
        shares = [100 * counts[e][verdict] / entries for e in exercises]
        if any(shares):
            axes.barh(exercises, shares, left=left, color=COLOURS[verdict], label=verdict)
            left = [a + b for a, b in zip(left, shares, strict=True)]
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel(f"% of {entries} submissions")
    if left != [0.0] * len(exercises):
        axes.legend(ncols=4, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _primary(row: dict) -> str:
    """A row's primary diagnosis (the cause: the CSV lists it first), else its verdict."""
    return (row["codes"].split() or [row["verdict"]])[0]


def students_table(
    rows: list[dict], exercises: list[str], roster: Roster | None = None
) -> list[str]:
    """Every submission's verdict and primary diagnosis per exercise, as HTML table rows: the
    most exercises not passed first, then by name; the full detail on hovering a cell."""
    e = html.escape
    table = []
    for key, graded in _entries(rows).items():
        file = shown_name(entry_name(key))
        person = roster.who(file) if roster else None
        name = next((v for v in (person or {}).values() if v), None) or graded[0]["submission"]
        by_exercise = {r["exercise"]: r for r in graded}
        whole = by_exercise.get("*")  # an invalid entry: one row for the whole submission
        cells, failed = [], 0
        for exercise in exercises:
            row = by_exercise.get(exercise, whole)
            if row is None:
                cells.append("<td></td>")
                continue
            verdict = row["verdict"]
            failed += verdict != "pass"
            code = _primary(row)
            shown = f"<br><code>{e(code)}</code>" if code != verdict else ""
            cells.append(
                f"<td class='v' style='border-left:4px solid {COLOURS.get(verdict, '#000')}' "
                f"title='{e(row['detail'])}'>{e(verdict)}{shown}</td>"
            )
        table.append((-failed, name.casefold(), name, file, failed, cells))
    table.sort(key=lambda item: item[:2])
    return [
        f"<tr><td>{e(name)}"
        + (f"<br><small>{e(file)}</small>" if name != file else "")
        + f"</td><td class='n'>{failed}</td>{''.join(cells)}</tr>"
        for _, _, name, file, failed, cells in table
    ]


def page(
    rows: list[dict],
    exercises: list[str],
    runs: list[dict],
    source: str,
    roster: Roster | None = None,
) -> str:
    """The report as one HTML page."""
    e = html.escape
    entries = _entries(rows)
    total = max(1, len(entries))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Grades: {e(source)}</title>",
        "<style>body{font-family:sans-serif;max-width:64em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
        "padding:.25em .6em;text-align:left;vertical-align:top}"
        "th{background:#f4f4f4}td.n{text-align:right}code{font-size:90%}"
        ".example{white-space:pre-wrap;overflow-wrap:anywhere}.students{font-size:90%}"
        "</style></head><body>",
        f"<h1>The class at a glance</h1><p>{len(entries)} submissions, "
        f"{len(exercises)} exercises, from <code>{e(source)}</code>.</p>",
        "<h2>Pass rates</h2><table><tr><th>exercise</th><th>pass rate</th>"
        + "".join(f"<th>{v}</th>" for v in VERDICTS)
        + "</tr>",
    ]
    for exercise in exercises:
        counts = Counter(r["verdict"] for r in rows if r["exercise"] == exercise)
        cells = "".join(f"<td class='n'>{counts[v]}</td>" for v in VERDICTS)
        rate = f"{100 * counts['pass'] / total:.0f}%"
        parts.append(f"<tr><td>{e(exercise)}</td><td class='n'>{rate}</td>{cells}</tr>")
    whole = Counter(r["verdict"] for r in rows if r["exercise"] == "*" and r.get("key"))
    if whole:
        parts.append(
            "<tr><td>(whole submission)</td><td></td>"
            + "".join(f"<td class='n'>{whole[v]}</td>" for v in VERDICTS)
            + "</tr>"
        )
    parts.append("</table>")
    if exercises:
        parts.append(f"<img alt='verdicts per exercise' src='{_plot(rows, exercises)}'>")
    parts.append(
        "<h2>Students</h2><p>Each submission's verdict per exercise and, under it, the primary "
        "diagnosis (hover a cell for the detail); the most exercises not passed first.</p>"
        "<table class='students'><tr><th>student</th><th>not passed</th>"
        + "".join(f"<th>{e(x)}</th>" for x in exercises)
        + "</tr>"
    )
    parts += students_table(rows, exercises, roster)
    parts.append("</table>")
    if roster is not None:
        strangers, absent = unmatched(rows, roster)
        parts.append(
            f"<p>Roster: {len(roster.people)} students ({e(', '.join(roster.columns))} in the "
            "LMS export).</p>"
        )
        if strangers:
            parts.append("<p><strong>Not in the roster, so not in the LMS export</strong>: "
                         f"{e(', '.join(strangers))}</p>")  # fmt: skip
        if absent:
            parts.append(f"<p><strong>In the roster, no submission</strong>: "
                         f"{e(', '.join(absent))}</p>")  # fmt: skip
    parts.append("<h2>Most common diagnoses</h2>")
    for exercise in exercises:
        codes: Counter[str] = Counter()
        example: dict[str, dict] = {}
        for row in rows:
            if row["exercise"] == exercise and row["verdict"] != "pass":
                # the primary diagnosis, the cause (the CSV lists it first): a submission counts
                # once, not once more for each symptom that followed from it
                code = _primary(row)
                codes[code] += 1
                example.setdefault(code, row)
        if not codes:
            continue
        parts.append(f"<h3>{e(exercise)}</h3><table><tr><th>diagnosis</th><th>submissions</th>"
                     "<th>one example</th></tr>")  # fmt: skip
        for code, count in codes.most_common(5):
            row = example[code]
            parts.append(
                f"<tr><td><code>{e(code)}</code></td><td class='n'>{count}</td>"
                f"<td class='example'>{e(row['submission'])}: {e(row['detail'])}</td></tr>"
            )
        parts.append("</table>")
    trouble = [r for r in rows if r["verdict"] in TROUBLE and r.get("key")]
    parts.append(f"<h2>Sent to {' or '.join(TROUBLE)}</h2>")
    if trouble:
        parts.append("<table><tr><th>submission</th><th>exercise</th><th>verdict</th>"
                     "<th>detail</th></tr>")  # fmt: skip
        for row in trouble:
            parts.append(
                "<tr>"
                + "".join(f"<td>{e(row[k])}</td>" for k in ("submission", "exercise", "verdict"))
                + f"<td>{e(row['detail'])}</td></tr>"
            )
        parts.append("</table>")
    else:
        parts.append("<p>None.</p>")
    notes = [r for r in rows if not r.get("key")]
    for row in notes:
        parts.append(f"<p><strong>{e(row['verdict'])}</strong>: {e(row['detail'])}</p>")
    parts.append("<h2>Provenance</h2>")
    keys = list(dict.fromkeys(k for run in runs for k in run))
    parts.append("<table><tr><th></th>" + "".join(f"<th>run {i + 1}</th>"
                 for i in range(len(runs))) + "</tr>")  # fmt: skip
    for key in keys:
        values = "".join(f"<td>{e(str(run.get(key, '')))}</td>" for run in runs)
        parts.append(f"<tr><th>{e(key)}</th>{values}</tr>")
    parts.append("</table></body></html>\n")
    return "\n".join(parts)
