"""The checks on mistakes they were not written against (tests/bug_bank.py): at least 95% of
the bank's bugs get the diagnosis a teacher would give first, and no correct launcher fails.
On a GPU the bugs that only read lanes never stored are out of sight (the table says so)."""

from __future__ import annotations

import bug_bank

import tmm_course


def test_the_bank_covers_every_check_with_forty_bugs_and_correct_alternatives():
    bugs = [e for e in bug_bank.BANK if e.intended != bug_bank.PASS]
    correct = [e for e in bug_bank.BANK if e.intended == bug_bank.PASS]
    assert len(bugs) >= 40 and len(correct) >= 10
    assert {e.check for e in bugs} == {e.check for e in correct} == set(bug_bank.CHECKS)


def test_bugs_are_diagnosed_and_correct_launchers_pass():
    outcomes = bug_bank.run()
    print(bug_bank.table(outcomes))
    bugs = [o for o in outcomes if o.entry.intended != bug_bank.PASS]
    assert len(bugs) >= 40
    false_alarms = [
        o.entry.name for o in outcomes if o.entry.intended == bug_bank.PASS and not o.right
    ]
    assert false_alarms == []
    seen = bug_bank.visible(outcomes)  # on a GPU, loads whose values are never stored are not
    assert all(not o.passed for o in seen), [o.entry.name for o in seen if o.passed]
    assert sum(o.right for o in seen) >= 0.95 * len(seen), bug_bank.table(outcomes)
    if tmm_course.BACKEND == "interpreter":
        assert seen == bugs
