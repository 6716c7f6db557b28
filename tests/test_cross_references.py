"""Every "lesson N" in the notebooks, the README, docstrings, comments and messages names the
lesson that teaches what follows it; every command the stored runs or a lesson name runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT

# What each lesson teaches, as words a reference to it is followed by: a reference
# "lesson N's <four words>" (or "lesson N (<four words>") whose first such word belongs to another
# lesson points at the wrong one. Words two lessons share ("kernel", "knobs": lesson 4's, which
# lesson 6 turns) are left out.
TOPICS: dict[int, tuple[str, ...]] = {
    0: ("start here", "tiers", "print inside a kernel", "breakpoint"),
    1: ("tile fill", "fill", "program_id", "column-major"),
    2: ("broadcast", "outer product"),
    3: ("stride", "strided", "byte address", "views"),
    4: ("tiled matmul", "matmul()", "`matmul`", "matmul check", "k-loop", "cases", "battery",
        "variant", "linear layer", "settings", "tl.dot"),
    5: ("homework", "transposes", "coalesc"),
    6: ("roofline", "intensity", "bigger tiles", "num_stages", "stage sweep", "grouped",
        "group_m", "autotun", "sweep", "dram bytes", "tuning"),
    7: ("persistent", "tensor descriptor", "descriptor", "tma", "waves", "quantisation",
        "split-k"),
    8: ("matmul_fast", "capstone", "racing", "plan", "prediction", "inductor", "where it loses"),
    9: ("pitfall", "find the bug", "mystery", "not_the_fix", "float16 accumulator", "tf32",
        "broken", "launcher"),
    10: ("low precision", "float8", "fp8", "e4m3", "block-scaled", "dot_scaled", "mxfp"),
}  # fmt: skip
NOUNS = ("kernel", "kernels", "knobs", "check", "race", "own", "exercise")
OWNER = {word: lesson for lesson, words in TOPICS.items() for word in words}
REFERENCE = re.compile(r"\b[Ll]esson (\d+)(?:'s)?\b(?!\s*(?:and|-|to|,)\s*\d)")
END = re.compile(r"[.;:!?\n]|\b[Ll]essons? \d")


def texts() -> dict[str, str]:
    """Every place a learner or an instructor reads: cells, the README, the package's source."""
    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            found[f"{path.name} cell {cell.get('id')}"] = "".join(cell["source"])
    found["README.md"] = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "tmm_course").rglob("*.py")):
        found[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return found


def first_topic(words: str) -> tuple[str, int] | None:
    """The first word of :data:`TOPICS` in ``words``, and the lesson it belongs to."""
    lowered = words.lower()
    hits = [(lowered.find(word), -len(word), word) for word in OWNER if word in lowered]
    if not hits:
        return None
    _, _, word = min(hits)
    return word, OWNER[word]


def references() -> list[tuple[str, int, str]]:
    """(where, N, the words after it up to the clause's end) for every "lesson N"."""
    found = []
    for where, text in texts().items():
        for match in REFERENCE.finditer(text):
            rest = text[match.end() : match.end() + 70]
            stop = END.search(rest)
            clause = rest[: stop.start()] if stop else rest
            words = clause.split()[:4]
            # "lesson N's kernel ported to ...": the words after a noun every lesson has are
            # about that noun, not about lesson N
            heads = [i for i, word in enumerate(words) if word.strip("`,()") in NOUNS]
            words = words[: heads[0] + 1] if heads else words
            found.append((where, int(match.group(1)), " " + " ".join(words)))
    return found


def test_every_lesson_named_exists_and_teaches_what_follows_its_name():
    lessons = {int(p.name[:2]) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert lessons == set(TOPICS)
    refs = references()
    assert len(refs) > 100  # the scan sees them
    wrong = []
    for where, lesson, after in refs:
        topic = first_topic(after)
        if lesson not in lessons or (topic is not None and topic[1] != lesson):
            wrong.append(
                f"{where}: lesson {lesson}{after!r} ({topic[0]!r} is lesson {topic[1]}'s)"
                if topic
                else f"{where}: lesson {lesson} does not exist"
            )
    assert not wrong, "\n".join(wrong)


def test_the_check_catches_a_stale_number():
    assert first_topic("'s rule that tensor descriptors need") == ("tensor descriptor", 7)
    assert first_topic("'s `matmul_fast` does not read") == ("matmul_fast", 8)


def commands() -> dict[str, str]:
    """``python -m X`` of every stored run's provenance and of every lesson and the README:
    module -> where it is named."""
    found = {}
    places = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
              for p in (ROOT / "tmm_course" / "perf" / "data").glob("*.json")}  # fmt: skip
    places.update({k: v for k, v in texts().items() if not k.endswith(".py")})
    for where, text in places.items():
        for module in re.findall(r"python3? -m (tmm_course[\w.]*)", text):
            found.setdefault(module, where)
    return found


HELP = """
import contextlib, io, runpy, sys
for module in sys.argv[1:]:
    said = io.StringIO()
    sys.argv = [module, "--help"]
    with contextlib.redirect_stdout(said):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = stop.code
    print(module, code, "usage:" in said.getvalue())
"""


def test_every_command_named_is_a_module_with_a_command_line():
    named = commands()
    assert "tmm_course.perf.bench" in named and "tmm_course.perf.pitfalls" in named
    # --help only: each prints its usage and runs nothing (one interpreter for all of them)
    done = subprocess.run([sys.executable, "-c", HELP, *named], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    answers = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    for module, where in named.items():
        assert answers.get(module) == "0 True", (module, where, answers.get(module))


@pytest.mark.parametrize("stale", ["python -m tmm_course.bench", "tmm_course.pitfall_data"])
def test_no_stored_run_names_a_module_that_is_gone(stale):
    for path in (ROOT / "tmm_course" / "perf" / "data").glob("*.json"):
        assert stale + " " not in path.read_text(encoding="utf-8"), path.name
