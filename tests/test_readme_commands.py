"""Every shell line of the README's code blocks works as printed, from a fresh clone.

The clone is made from this checkout, its ``.venv`` this test's own environment (the one
``make test`` set up: nothing is installed again). Each block runs top to bottom in one bash
session, from the clone (the first block from its parent, where ``git clone`` leaves you), so an
activation line counts for the lines below it and a line that needs one without it fails:

- ``make ...``: ``make -n`` must know the target and its variables; each command of the recipe
  is then checked as below (the set-up of ``.venv`` aside: it exists).
- ``python ...`` (and ``.venv/bin/python ...``): ``python`` must be the environment's at that
  point (activated), and the module, script or code must run: with ``--help`` appended, so
  that nothing long starts; ``python -c`` runs whole. These run together in one process (one
  import of torch), after the shell has walked the block.
- any other program (``jupyter``, ``ruff``, ``nbgrader``, ``pip`` ...): run with ``--help``.
- ``source``, ``cd``: run as they are.
- a block that starts with ``pip install`` is for an environment of your own, active: here,
  ``.venv``, activated first.
- lines for another machine (``ssh`` on your laptop, ``sbatch`` on a Slurm cluster, ``docker``
  where a daemon runs: tests/test_grader_image.py builds the image there) are not run: the
  files and commands they name are checked instead.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^( *)```(?:bash|sh|shell)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
PYTHONS = {"python", "python3", ".venv/bin/python"}
ELSEWHERE = {"ssh": "your laptop", "sbatch": "a Slurm cluster", "docker": "a docker daemon"}
SETUP = ("tools/setup-venv.sh", "touch .venv/")  # make's set-up of .venv: reused, not rerun


def blocks() -> list[list[str]]:
    """The README's shell code blocks, each a list of its lines (comments, blanks dropped)."""
    found = []
    for match in BLOCK.finditer(README):
        body = textwrap.dedent(match.group(2))
        lines = [line for line in body.splitlines() if shlex.split(line, comments=True)]
        found.append(lines)
    return found


def commands(line: str) -> list[list[str]]:
    """The simple commands of a line, as words (comments dropped; split at ``&&``)."""
    words = shlex.split(line, comments=True)
    parts, current = [], []
    for word in words:
        if word == "&&":
            parts.append(current)
            current = []
        else:
            current.append(word)
    return [*parts, current]


def split_env(words: list[str]) -> tuple[list[str], list[str]]:
    """Leading ``NAME=value`` assignments, and the command."""
    at = 0
    while at < len(words) and re.match(r"^[A-Za-z_]\w*=", words[at]):
        at += 1
    return words[:at], words[at:]


class Walk:
    """A block turned into a bash script, and what the Python process must run after it."""

    def __init__(self, venv_python: Path) -> None:
        self.script = ["set -euo pipefail", f"VENV_PY={shlex.quote(str(venv_python))}"]
        self.python: list[dict] = []  # what runs in Python: see python_line
        self.makes: list[str] = []  # the make lines, whose recipes the script writes

    def fail(self, what: str) -> str:
        return f"{{ echo {shlex.quote('README: ' + what)} >&2; exit 1; }}"

    def line(self, line: str) -> None:
        if re.match(r"^\w+=\$\(.*\)$", line):  # jobid=$(sbatch ...): the command inside
            self.command(shlex.split(line.split("$(", 1)[1][:-1]), line)
            return
        for words in commands(line):
            self.command(words, line)

    def command(self, words: list[str], line: str) -> None:
        env, argv = split_env(words)
        program = argv[0]
        if program == "git" and argv[1] == "clone":
            url = argv[2]
            assert url in README and url.endswith("/tmm-course"), url
            return  # the test made the clone, from this checkout
        if program in ("cd", "source", "deactivate"):
            self.script.append(shlex.join(argv) + " || " + self.fail(f"{line} failed"))
        elif program in ELSEWHERE:
            self.elsewhere(argv, line)
        elif program in PYTHONS:
            self.python_line(argv, line)
        elif program == "make":
            self.make(env, argv, line)
        else:
            self.script.append(
                f"{shlex.join([*env, *argv, '--help'])} >/dev/null 2>&1 || "
                + self.fail(f"{line}: {program} --help failed")
            )

    def python_line(self, argv: list[str], line: str) -> None:
        program = argv[0]
        if program.startswith(".venv/"):
            check = f"[ -x {program} ] || {self.fail(f'{line}: no {program}')}"
        else:  # PATH's python must be the environment's: an activation line above it
            check = (
                f'[ "$(dirname "$(command -v {program})")" -ef "$(dirname "$VENV_PY")" ] || '
                + self.fail(f"{line}: {program} is not .venv's python here (activate it first)")
            )
        self.script.append(check)
        if argv[1] == "-c":
            entry = {"kind": "code", "target": argv[2], "argv": ["-c"]}
        elif argv[1] == "-m":
            entry = {"kind": "module", "target": argv[2], "argv": [argv[2], *argv[3:], "--help"]}
        else:
            entry = {"kind": "script", "target": argv[1], "argv": [argv[1], *argv[2:], "--help"]}
        entry["line"] = line
        index = len(self.python)
        self.python.append(entry)
        # where it runs: the shell's folder at that point
        self.script.append(f'echo "{index} $PWD" >> "$PYTHON_AT"')

    def make(self, env: list[str], argv: list[str], line: str) -> None:
        dry = [*env, "make", "-n", "--no-print-directory", *argv[1:]]
        self.script.append(
            f"recipe=$({shlex.join(dry)}) || {self.fail(f'{line}: make does not know it')}"
        )
        # the recipe's commands are known only once make has said them: a second pass
        key = len(self.makes)
        self.makes.append(line)
        self.script.append(f'printf "%s\\n" "$recipe" > "$RECIPES/{key}"')
        self.script.append(f'echo "{key} $PWD" >> "$MAKES"')

    def elsewhere(self, argv: list[str], line: str) -> None:
        """A line for another machine: the command it wraps and the files it names."""
        wrap = argv[argv.index("--wrap") + 1] if "--wrap" in argv else None
        if wrap:
            self.line(wrap)
        scripts = [a for a in argv if a.startswith("tools/")]
        for path in scripts:
            self.script.append(f"[ -f {path} ] || " + self.fail(f"{line}: no {path}"))
        if argv[0] != "ssh":
            assert wrap or scripts or argv[1] == "run", f"{line}: nothing to check here"


RUNNER = """
import contextlib, io, json, os, runpy, sys
entries, failures = json.load(open(sys.argv[1])), []
for entry in entries:
    os.chdir(entry["cwd"])
    sys.path.insert(0, entry["cwd"])
    sys.argv = entry["argv"]
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            if entry["kind"] == "module":
                runpy.run_module(entry["target"], run_name="__main__", alter_sys=True)
            elif entry["kind"] == "script":
                runpy.run_path(entry["target"], run_name="__main__")
            else:
                exec(compile(entry["target"], "<string>", "exec"), {"__name__": "__main__"})
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException as error:
        code = repr(error)
    finally:
        sys.path.remove(entry["cwd"])
    if code != 0:
        failures.append(f"{entry['line']}: {code}: {said.getvalue()[-600:]}")
print(json.dumps(failures))
"""


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if shutil.which("make") is None or shutil.which("git") is None:
        pytest.skip("needs make and git")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    home = tmp_path_factory.mktemp("fresh")
    path = home / "tmm-course"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(path)], check=True)
    (path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    # make's stamps in .venv must be newer than what they depend on: a clone's files are new
    for name in ("pyproject.toml", "tools/setup-venv.sh", "tools/jupyterlab-overrides.json"):
        os.utime(path / name, (946684800, 946684800))  # 2000-01-01
    return path


def test_the_readme_shows_its_commands_in_code_blocks():
    found = blocks()
    assert len(found) >= 6
    text = "\n".join(line for block in found for line in block)
    for command in ("make course", "make test", "make site", "make grade", "make student",
                    "source .venv/bin/activate", "tmm_course.teach.nbgrader_export",
                    "nbgrader generate_assignment", "tmm_course.perf.bench"):  # fmt: skip
        assert command in text, f"no code block shows {command}"


def test_every_command_in_the_readme_works_as_printed(clone, tmp_path):
    venv_python = clone / ".venv" / "bin" / "python"
    python: list[dict] = []
    problems = []
    helped_already: list[tuple[str, list[str]]] = []
    for number, block in enumerate(blocks()):
        walk = Walk(venv_python)
        if block[0].startswith("pip install"):  # "an existing environment": here, .venv
            walk.line("source .venv/bin/activate")
        for line in block:
            walk.line(line)
        folder = tmp_path / f"block{number}"
        (folder / "recipes").mkdir(parents=True)
        env = {**os.environ, "PYTHON_AT": str(folder / "python"), "MAKES": str(folder / "makes"),
               "RECIPES": str(folder / "recipes")}  # fmt: skip
        for name in ("VIRTUAL_ENV", "PYTHONPATH"):  # a newcomer's shell: nothing activated
            env.pop(name, None)
        env["PATH"] = os.pathsep.join(
            p for p in env["PATH"].split(os.pathsep) if Path(p).resolve() != venv_python.parent
        )
        start = clone.parent if block[0].startswith("git clone") else clone
        done = subprocess.run(["bash", "-c", "\n".join(walk.script)], cwd=start, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        if done.returncode:
            problems.append(done.stderr.strip()[-800:])
            continue
        at = folder / "python"
        for row in at.read_text().splitlines() if at.exists() else []:
            index, cwd = row.split(" ", 1)
            python.append({**walk.python[int(index)], "cwd": cwd})
        makes = folder / "makes"
        for row in makes.read_text().splitlines() if makes.exists() else []:
            key, cwd = row.split(" ", 1)
            line = walk.makes[int(key)]
            recipe = (folder / "recipes" / key).read_text().replace("\\\n", " ").splitlines()
            commands_run = [r for r in recipe if r.strip() and not r.startswith(SETUP)]
            assert commands_run, f"{line}: make would run nothing"
            for command in commands_run:
                words = shlex.split(command)
                if words[0] in PYTHONS:
                    if not (Path(cwd) / words[0]).exists():
                        problems.append(f"{line} -> {command}: no {words[0]}")
                        continue
                    inner = Walk(venv_python)
                    inner.python_line(words, f"{line} -> {command}")
                    python.append({**inner.python[0], "cwd": cwd})
                elif (words[0], words[1:2]) not in helped_already:  # jupyter lab: once
                    helped_already.append((words[0], words[1:2]))
                    helped = subprocess.run([*words, "--help"], cwd=cwd, capture_output=True,
                                            text=True, timeout=120, env=env)  # fmt: skip
                    if helped.returncode:
                        problems.append(f"{line} -> {command} --help: {helped.stderr[-400:]}")
    listing = tmp_path / "python.json"
    listing.write_text(json.dumps(python))
    ran = subprocess.run([str(venv_python), "-c", RUNNER, str(listing)], cwd=clone,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    problems += json.loads(ran.stdout.strip().splitlines()[-1])
    assert not problems, "\n\n".join(problems)
    assert len(python) >= 15, [e["line"] for e in python]
