"""A plain `make test` says which tests it skipped for something this machine lacks, and what:
the browser test without Chromium prints the word chromium, not just an `s`."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

from conftest import MISSING, ROOT, pytest_terminal_summary


def test_a_missing_chromium_is_named_at_the_end_of_a_quiet_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TMM_REQUIRE_BROWSER"}
    env["TMM_CHROMIUM"] = str(tmp_path / "no-chromium-here")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "tests/test_browser.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = done.stdout[done.stdout.index("skipped: missing on this machine") :]
    assert f"chromium at {env['TMM_CHROMIUM']} (sudo apt install chromium)" in summary
    assert "tests skipped, missing" in summary


class Reporter:
    """The part of pytest's terminal reporter the summary hook uses."""

    def __init__(self, reasons: list[str]) -> None:
        self.stats = {
            "skipped": [SimpleNamespace(longrepr=("x.py", 1, f"Skipped: {r}")) for r in reasons]
        }
        self.lines: list[str] = []

    def section(self, title: str, **markup: bool) -> None:
        self.lines.append(f"== {title}")

    def line(self, text: str) -> None:
        self.lines.append(text)


def test_only_skips_for_something_missing_are_listed():
    reporter = Reporter(["needs a GPU", f"{MISSING}frob (apt install frob)",
                         f"{MISSING}frob (apt install frob)", f"{MISSING}knob"])  # fmt: skip
    pytest_terminal_summary(reporter)
    assert reporter.lines == [
        "== skipped: missing on this machine",
        "2 tests skipped, missing frob (apt install frob)",
        "1 test skipped, missing knob",
    ]


def test_no_section_without_such_skips():
    reporter = Reporter(["needs a GPU"])
    pytest_terminal_summary(reporter)
    assert reporter.lines == []
