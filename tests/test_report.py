"""The class report names students: a students x exercises table (most failures first), example
texts whole, and an LMS export whose identities come from a roster (``--roster``)."""

from __future__ import annotations

import csv

import pytest

from tmm_course.teach import grade, report
from tmm_course.teach.safe_io import clipped, entry_key

EXERCISES = ["transpose_v1", "transpose"]
LONG = "the kernel stores " + " ".join(f"lane{i}" for i in range(200)) + " past the edge."


def row(file: str, exercise: str, verdict: str, codes: str = "", detail: str = "") -> dict:
    return {"submission": file, "exercise": exercise, "verdict": verdict, "codes": codes,
            "detail": detail, "isolation": "isolated", "key": entry_key(file)}  # fmt: skip


ROWS = [
    row("ada.ipynb", "transpose_v1", "pass"),
    row("ada.ipynb", "transpose", "fail", "ragged_edge out_of_bounds_write", LONG),
    row("bob.ipynb", "transpose_v1", "pass"),
    row("bob.ipynb", "transpose", "pass"),
    row("cy.ipynb", "transpose_v1", "not_implemented", "not_implemented"),
    row("cy.ipynb", "transpose", "timeout", "", "gave up after 300 s"),
    row("dee.ipynb", "*", "invalid", "", "not a readable notebook"),
]


def students(html: str) -> list[str]:
    """The student table's rows, as HTML."""
    table = html.split("<table class='students'>")[1].split("</table>")[0]
    return table.split("<tr>")[2:]


def test_the_student_table_has_each_verdict_and_primary_code_most_failures_first():
    html = report.page(ROWS, EXERCISES, [], "grades.csv")
    rows = students(html)
    order = [r.split("</td>")[0].removeprefix("<td>") for r in rows]
    assert order == ["cy.ipynb", "dee.ipynb", "ada.ipynb", "bob.ipynb"]
    ada = rows[2]
    assert "<td class='n'>1</td>" in ada  # one exercise not passed
    assert "fail<br><code>ragged_edge</code>" in ada  # the cause, not its symptom
    assert "out_of_bounds_write" not in ada.split("title=")[0]
    assert ada.count(">pass<") == 1
    assert rows[1].count(">invalid<") == len(EXERCISES)  # a whole-submission row fills each


def test_example_texts_are_whole_and_wrap():
    html = report.page(ROWS, EXERCISES, [], "grades.csv")
    example = html.split("Most common diagnoses")[1]
    assert f"<td class='example'>ada.ipynb: {LONG}</td>" in example
    assert ".example{white-space:pre-wrap;overflow-wrap:anywhere}" in html


def test_a_long_detail_is_clipped_at_a_word_never_mid_word():
    text = clipped(LONG, 100)
    assert len(text) <= 100 and text.endswith("…")
    assert LONG.startswith(text[:-1]) and LONG[len(text) - 1] == " "
    assert clipped("short", 100) == "short"


CANVAS = "file,Student,ID,SIS User ID,SIS Login ID\n"


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_the_roster_maps_files_to_the_lms_identities(tmp_path):
    roster = report.read_roster(write(tmp_path / "roster.csv", CANVAS
        + "ada.ipynb,\"Lovelace, Ada\",101,s1,ada@uni\nbob,\"Boole, George\",102,s2,bob@uni\n"
        + "eve,\"Eve, Eve\",103,s3,eve@uni\n"))  # fmt: skip
    lms = tmp_path / "grades-lms.csv"
    report.write_lms(lms, ROWS, EXERCISES, roster)
    with lms.open(newline="") as f:
        got = list(csv.reader(f))
    assert got[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", *EXERCISES, "Total"]
    assert got[1:] == [["Lovelace, Ada", "101", "s1", "ada@uni", "1", "0", "1"],
                       ["Boole, George", "102", "s2", "bob@uni", "1", "1", "2"]]  # fmt: skip
    html = report.page(ROWS, EXERCISES, [], "grades.csv", roster)
    assert "Lovelace, Ada<br><small>ada.ipynb</small>" in html
    assert "not in the LMS export</strong>: cy.ipynb, dee.ipynb" in html
    assert "In the roster, no submission</strong>: eve" in html


def test_without_a_roster_the_file_name_is_the_student(tmp_path):
    lms = tmp_path / "grades-lms.csv"
    report.write_lms(lms, ROWS, EXERCISES)
    with lms.open(newline="") as f:
        got = list(csv.reader(f))
    assert got[0] == ["Student", "SIS Login ID", *EXERCISES, "Total"]
    assert [r[:2] for r in got[1:]] == [
        ["ada", "ada"],
        ["bob", "bob"],
        ["cy", "cy"],
        ["dee", "dee"],
    ]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Student,ID\nAda,1\n", "'file' column"),
        ("file\nada\n", "no identity column"),
        ("file,Student\nada,A\nada.ipynb,B\n", "line 3: ada is named twice"),
        ("file,Student\n,A\n", "line 2: no file name"),
    ],
)
def test_a_bad_roster_says_what_is_wrong(tmp_path, text, said):
    with pytest.raises(report.RosterError, match=said):
        report.read_roster(write(tmp_path / "roster.csv", text))


def test_grade_and_merge_refuse_a_bad_roster_before_any_work(tmp_path, capsys):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    bad = str(write(tmp_path / "roster.csv", "Student\nAda\n"))
    merge = ["merge", "grades.0-of-1.csv", "--inbox", str(inbox)]
    for command in ([str(inbox), "--roster", bad], [*merge, "--roster", bad]):
        with pytest.raises(SystemExit) as stopped:
            grade.main(command)
        assert stopped.value.code == 2
        assert "'file' column" in capsys.readouterr().err
    assert not list(tmp_path.glob("grades*"))


def test_merge_writes_the_lms_export_under_the_rosters_identities(tmp_path):
    """The command end to end, from a shard's CSV: `grade merge ... --roster`."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shard = tmp_path / "grades.0-of-1.csv"
    rows = [r for r in ROWS if r["submission"] in ("ada.ipynb", "bob.ipynb")]
    for name in ("ada.ipynb", "bob.ipynb"):
        (inbox / name).write_text("{}")
    with shard.open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=list(rows[0]))
        out.writeheader()
        out.writerows(rows)
    roster = write(tmp_path / "roster.csv", "file,Email address\nada,ada@uni\nbob,bob@uni\n")
    merged = tmp_path / "grades.csv"
    command = ["merge", str(shard), "--inbox", str(inbox), "--out", str(merged)]
    assert grade.main([*command, "--roster", str(roster)]) == 0
    with report.companions(merged)["lms"].open(newline="") as f:
        got = list(csv.reader(f))
    assert got == [["Email address", *EXERCISES, "Total"], ["ada@uni", "1", "0", "1"],
                   ["bob@uni", "1", "1", "2"]]  # fmt: skip
    page = report.companions(merged)["html"].read_text()
    assert "<h2>Students</h2>" in page and "ada@uni<br><small>ada.ipynb</small>" in page
