"""The learner's check and the batch grader give the same verdict and the same primary
diagnosis for the same launcher: bug bank entries (tests/bug_bank.py) through both.

The grader's side is the grader's own case loop (:func:`tmm_course.teach.clients.grade_exercise`:
cases drawn from a secret seed, each recorded on a decoy, the record read as the judge reads
it, replayed on the secret case and judged by the one judge), with its two worker clients
answered by a worker session in this process (:class:`tmm_course.teach.worker.Session`, the
code a sandboxed worker runs) instead of across a pipe: the bank is ours, and its launchers are
functions, not cells. CI runs one entry per check; ``TMM_PARITY=all`` runs the whole bank. The
test is in tests/test_bug_bank.py, which runs the checks' side once for the bank and this
comparison both.
"""

from __future__ import annotations

import math
import os
from types import SimpleNamespace

import bug_bank

from tmm_course.exercises import BY_NAME
from tmm_course.teach import clients, worker

SPEC_OF = {"transpose_part1": "transpose_v1"}


class _Here:
    """A worker client's channel answered in this process."""

    session: worker.Session

    def start(self, deadline: float) -> None:
        self.running = SimpleNamespace(process=SimpleNamespace(poll=lambda: None))

    def ask(self, header: dict, blobs: list[bytes], deadline: float, sizes: list[int]):
        return self.session.answer(header, blobs)

    def stop(self) -> None:
        self.running = None


class Recorder(_Here, clients.Worker):
    """The recording client, its namespace holding the launcher under the exercise's name."""

    def __init__(self, name: str, fn) -> None:
        clients.Worker.__init__(self, None, "recorder", setup=False)
        self.session = worker.Session()
        self.session.namespace[name] = fn

    def record(self, header: dict, blobs: list[bytes], deadline: float) -> tuple[dict, bytes]:
        reply, out = self.ask(header, blobs, deadline, [])
        return reply, out[0] if out else b""


class Replayer(_Here, clients.Replayer):
    """The replay client, answered by a session that ran no cell."""

    def __init__(self) -> None:
        clients.Replayer.__init__(self, None, "replayer", math.inf)
        self.session = worker.Session()

    def stop(self) -> None:
        self.defined = {}
        _Here.stop(self)


def graded(name: str, fn) -> tuple[str, list[str]]:
    """(verdict, codes) the grader's case loop gives ``fn`` on exercise ``name``."""
    spec = BY_NAME[name]
    state, codes, _ = clients.grade_exercise(
        spec, [], Recorder(spec.function, fn), Replayer(), math.inf
    )
    return state, codes


def entries() -> list:
    """The whole bank with ``TMM_PARITY=all``; else one entry per check, a bug for every
    other check and a correct launcher for the rest (CI's share of the time)."""
    if os.environ.get("TMM_PARITY") == "all":
        return bug_bank.BANK
    chosen = []
    for index, check in enumerate(bug_bank.CHECKS):
        bugs = [e for e in bug_bank.BANK if e.check == check and e.intended != bug_bank.PASS]
        right = [e for e in bug_bank.BANK if e.check == check and e.intended == bug_bank.PASS]
        chosen += (right or bugs)[:1] if index % 2 else (bugs or right)[:1]
    return chosen
