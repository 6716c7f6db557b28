"""The checks on mistakes they were not written against (tests/bug_bank.py): at least 95% of
the bank's bugs get the diagnosis a teacher would give first, and no correct launcher fails.
On a GPU the loads are judged by replaying each case through the interpreter, so every bug is
in sight on both backends."""

from __future__ import annotations

import bug_bank


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
    assert all(not o.passed for o in bugs), [o.entry.name for o in bugs if o.passed]
    assert sum(o.right for o in bugs) >= 0.95 * len(bugs), bug_bank.table(outcomes)
