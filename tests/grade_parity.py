"""The learner's check and the batch grader give the same verdict and the same primary
diagnosis for the same launcher: every check of the bug bank (tests/bug_bank.py) through both.

The grader's side runs here in one process (no sandbox: the bank is ours): each case recorded
on a decoy, read as the judge reads a record, replayed on the case and judged from what was
stored, exactly as :mod:`tmm_course.teach.grade` does across its two workers. CI runs one
entry per check; ``TMM_PARITY=all`` runs the whole bank. The test is in tests/test_bug_bank.py,
which runs the checks' side once for the bank and this comparison both.
"""

from __future__ import annotations

import os

import bug_bank

import tmm_course
from tmm_course.exercises import BY_NAME
from tmm_course.exercises.spec import generator
from tmm_course.teach import judge, worker

SPEC_OF = {"transpose_part1": "transpose_v1"}


def graded(name: str, fn, seed: int = 5) -> tuple[str, list[str]]:
    """(verdict, codes) the grader gives ``fn`` on exercise ``name``."""
    spec = BY_NAME[name]
    cases = spec.draw(generator(seed), tmm_course.BACKEND)
    decoys = generator(seed + 1)
    replayer = worker.Replayer()
    defined: dict[str, str] = {}
    results, last = [], None
    for case in cases:
        if case.only_if_all_passed and not all(r.passed for r in results):
            results.append(judge.result(case, code="skipped", problem="not run"))
            continue
        header, blobs = judge.Trial.of(spec, case.again(decoys)).request("record")
        try:
            data = worker._record(fn, header, blobs)
        except NotImplementedError:
            results.append(judge.result(case, code="not_implemented"))
            break
        except Exception as error:  # the launcher's own error, as the worker reports it
            results.append(judge.result(case, code="crashed", problem=str(error)))
            continue
        record = judge.read_record(data)
        if isinstance(record, tuple):
            results.append(judge.result(case, code=record[0], problem=record[1]))
            continue
        last = record
        trial = judge.Trial.of(spec, case)
        early = judge.judge_record(trial, record)
        if early is not None:
            results.append(early)
            continue
        kernels = {k: e["source"] for k, e in record["kernels"].items()}
        if any(defined.get(k) != v for k, v in kernels.items()):
            replayer.define(record)
            defined.update(kernels)
        header, blobs = trial.request("replay", [data])
        header["plan"] = 0
        try:
            facts, returned = replayer.replay(header, blobs)
        except Exception as error:
            facts, returned = {"ok": False, "error_type": type(error).__name__,
                               "error": str(error)}, None  # fmt: skip
        results.append(judge.judge_replay(trial, facts, returned if facts.get("ok") else None))
        if results[-1].code == "timed_out":
            break
    for case in cases[len(results) :]:
        results.append(judge.result(case, code="skipped", problem="not run"))
    verdict, codes, _ = judge.verdict(spec, results, last)
    return verdict, codes


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
