"""Lesson 9's "find the bug": the learner's kernel must be the broken kernel they were given,
fixed, not any matmul that passes.

:func:`check_fix` runs lesson 4's matmul check on the learner's launcher, with every launch
recorded, and then compares the source of the kernel it launched with the broken one: a fix is a
small edit (at most :data:`MOST_LINES_CHANGED` lines, names and layout aside from the kernel's
own name), and the edited kernel passes. Each broken kernel is written in a style of its own,
so lesson 4's kernel pasted in its place differs by more than a fix.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from typing import Any

from tmm_course.check import launches
from tmm_course.check.exercises import check_matmul
from tmm_course.check.result import Case, CheckResult, Diagnosis
from tmm_course.source import source_of

MOST_LINES_CHANGED = 4


def _statements(kernel: Any) -> list[str]:
    """The kernel's body, one normalised statement per line: comments, layout and the
    function's own name left out."""
    src = getattr(kernel, "src", None)  # a compiled kernel keeps its own
    tree = ast.parse(src if isinstance(src, str) else source_of(kernel))
    fn = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    fn.name = "kernel"
    fn.decorator_list = []
    lines = [ast.unparse(fn.args)]
    for node in ast.walk(fn):
        if isinstance(node, ast.stmt) and node is not fn:  # a compound one by its header
            lines.append(ast.unparse(node).splitlines()[0])
    return lines


def lines_changed(broken: Any, fixed: Any) -> int:
    """How many statements differ between two kernels (an edit of one line counts once)."""
    a, b = _statements(broken), _statements(fixed)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return sum(
        max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    )


def check_fix(fn: Callable[..., object], broken: Any) -> CheckResult:
    """``fn(a, b, c)`` must launch ``broken`` (one of ``pitfalls.MYSTERIES``) with its bug fixed
    by a small edit, and pass lesson 4's matmul check."""
    name = getattr(getattr(broken, "fn", broken), "__name__", "the kernel")
    with launches.recording() as seen:
        result = check_matmul(fn)
    result.exercise = f"fix {name}"
    if not result.passed:
        return result
    mine = [x.jit for x in seen.seen if not x.from_the_course and x.jit is not None]
    distinct = list({id(getattr(k, "fn", k)): k for k in mine}.values())
    try:
        changes = sorted((lines_changed(broken, k), k) for k in distinct)
    except (OSError, TypeError, SyntaxError) as error:  # a kernel whose source is not at hand
        return _fail(result, f"the kernel's source could not be read ({error})", name)
    if not changes:
        return _fail(result, "no kernel of yours was launched", name)
    changed, kernel = changes[0]
    kernel_name = getattr(getattr(kernel, "fn", kernel), "__name__", "your kernel")
    label = f"{kernel_name} is {name} with a small fix"
    if changed == 0:
        return _fail(result, f"{kernel_name} is {name} unchanged", name, label)
    if changed > MOST_LINES_CHANGED:
        return _fail(
            result,
            f"{kernel_name} differs from {name} in {changed} lines (a fix changes at most "
            f"{MOST_LINES_CHANGED}): it passes, but it is another kernel, not {name} fixed",
            name,
            label,
        )
    result.cases.append(Case(label, (), passed=True, problem=f"{changed} line(s) changed"))
    return result


def _fail(result: CheckResult, problem: str, broken: str, label: str = "") -> CheckResult:
    result.passed = False
    result.cases.append(Case(label or f"a fixed {broken}", (), problem=problem, code="not_the_fix"))
    result.diagnoses = [
        Diagnosis(
            "not_the_fix",
            f"{problem}. The exercise is to find the bug in {broken}: copy it (show() prints "
            "its source), rename it, and fix it with a small edit.",
        )
    ]
    return result
