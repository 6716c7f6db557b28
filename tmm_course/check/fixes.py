"""Lesson 9's "find the bug": the learner's kernel must be the broken kernel they were given,
fixed, not any matmul that passes.

:func:`check_fix` runs lesson 4's matmul cases on the learner's launcher, with every launch
recorded, and then compares the source of the kernel it launched with the broken one: a fix is a
small edit (at most :data:`MOST_LINES_CHANGED` statements, counted with every variable name,
the loop variable's included, and the layout left out), and the edited kernel passes. Each
broken kernel is written in a style of its own, so lesson 4's kernel pasted in its place differs
by more than a fix. :func:`symptoms` and a failing :func:`check_fix` describe the failure's
pattern (which cases pass, which fail) and leave the repair to the learner.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from tmm_course.check import launches, record, verdict
from tmm_course.check.engine import run_exercise
from tmm_course.check.exercises import check_matmul
from tmm_course.check.result import Case, CheckResult, Diagnosis
from tmm_course.exercises import fixes
from tmm_course.source import parse, source_of

MOST_LINES_CHANGED = 5  # statements; lesson 9 states it before the first mystery

# The patterns a failing fix can show, each a predicate on a case's (M, N, K) and BLOCK_K, and
# the sentence that says which cases pass: a symptom, not a repair.
PATTERNS: tuple[tuple[str, Callable[[int, int, int, int], bool]], ...] = (
    ("only the cases with one K step (K <= BLOCK_K) pass; every longer K fails",
     lambda m, n, k, bk: k <= bk),
    ("only the cases whose K is a multiple of BLOCK_K pass; every other K fails",
     lambda m, n, k, bk: k % bk == 0),
    ("the cases fail whose K takes more than one step and ends in a partial one; a K that fits "
     "one step, or is a multiple of BLOCK_K, passes",
     lambda m, n, k, bk: k <= bk or k % bk == 0),
    ("only the 1x1x1 case passes: every C with more than one cell is wrong",
     lambda m, n, k, bk: m * n == 1),
)  # fmt: skip
UNNAMED_PATTERN = "the failing cases share no simple pattern of M, N and K"


def _function(kernel: Any) -> ast.FunctionDef:
    src = getattr(kernel, "src", None)  # a compiled kernel keeps its own
    tree = parse(src if isinstance(src, str) else source_of(kernel))
    fn = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    fn.name = "kernel"
    fn.decorator_list = []
    return fn


def _in_order(fn: ast.FunctionDef) -> list[ast.stmt]:
    nodes = [node for node in ast.walk(fn) if isinstance(node, ast.stmt) and node is not fn]
    return sorted(nodes, key=lambda node: (node.lineno, node.col_offset))


def _rename(node: ast.AST, names: dict[str, str]) -> None:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in names:
            sub.id = names[sub.id]
        elif isinstance(sub, ast.arg) and sub.arg in names:
            sub.arg = names[sub.arg]


def _definitions(fn: ast.FunctionDef) -> list[tuple[str, str]]:
    """(name, what defines it) in source order: ``name = value`` by its value, the n-th loop
    variable by its place."""
    found, loops = [], 0
    for node in _in_order(fn):
        if isinstance(node, ast.Assign) and [type(t) for t in node.targets] == [ast.Name]:
            found.append((node.targets[0].id, ast.unparse(node.value)))
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            found.append((node.target.id, f"loop {loops}"))
            loops += 1
    return found


def _statements(kernel: Any, like: Any = None) -> list[str]:
    """The kernel's body, one normalised statement per line, in source order: comments,
    layout and the function's own name left out, parameters named by their place; with
    ``like``, each variable that ``like`` defines the same way (the same value, or the same
    loop) takes ``like``'s name, so renaming it, the loop variable included, costs nothing."""
    fn = _function(kernel)
    _rename(fn, {arg.arg: f"arg{i}" for i, arg in enumerate(fn.args.args)})
    if like is not None:
        other = _function(like)
        _rename(other, {arg.arg: f"arg{i}" for i, arg in enumerate(other.args.args)})
        theirs = _definitions(other)
        names: dict[str, str] = {}
        for name, how in _definitions(fn):  # each in the light of the names mapped so far
            if name in names:
                continue
            value = parse(how).body[0] if not how.startswith("loop ") else None
            if value is not None:
                _rename(value, names)
                how = ast.unparse(value)
            taken = set(names.values())
            match = next((n for n, h in theirs if h == how and n not in taken), None)
            if match is not None:
                names[name] = match
        _rename(fn, names)
    # a compound statement by its header
    return [ast.unparse(fn.args)] + [ast.unparse(node).splitlines()[0] for node in _in_order(fn)]


def lines_changed(broken: Any, fixed: Any) -> int:
    """How many statements differ between two kernels (an edit of one line counts once;
    renaming a variable, the loop variable included, costs nothing)."""
    a, b = _statements(broken), _statements(fixed, like=broken)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return sum(
        max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    )


def not_a_repair(
    broken: Any,
    launched: Sequence[tuple[str, Any]],
    helpers: Mapping[str, Sequence[Any]] | None = None,
) -> tuple[str, int] | None:
    """Why the kernels a launcher started are not ``broken`` repaired (a sentence, and the
    statements changed in the kernel it names), or None when they are. ``launched``: each
    distinct learner kernel it launched, (its name, the kernel or anything with its source as
    ``src``); ``helpers``: by a kernel's name, the learner's ``@triton.jit`` functions it calls
    (the mysteries call none: every statement of one is an edit). Every one must be ``broken``
    with a small edit: a second kernel beside the repair (writing over the output, or doing
    the work while the repair runs on scratch), or a call to one, is not the fix."""
    name = getattr(getattr(broken, "fn", broken), "__name__", "the kernel")
    if not launched:
        return "no kernel of yours was launched", 0
    for kernel_name, kernel in launched:
        called = (helpers or {}).get(kernel_name, ())
        try:
            changed = lines_changed(broken, kernel)
            changed += sum(len(_statements(helper)) for helper in called)
        except (OSError, TypeError, SyntaxError, ValueError, StopIteration, RecursionError):
            return f"the source of {kernel_name} could not be read", 0
        if changed == 0:
            return f"{kernel_name} is {name} unchanged", 0
        if changed > MOST_LINES_CHANGED:
            beside = (
                f" (beside {len(launched) - 1} other kernel(s) of yours: the output must come "
                f"from {name} repaired, alone)"
                if len(launched) > 1
                else ""
            )
            calls = " with the @triton.jit functions it calls" if called else ""
            return (
                f"{kernel_name}{calls} differs from {name} in {changed} statements (a fix "
                f"changes at most {MOST_LINES_CHANGED}): it is another kernel, not {name} "
                f"fixed{beside}",
                changed,
            )
    return None


def check_fix(fn: Callable[..., object], broken: Any) -> CheckResult:
    """``fn(a, b, c)`` must launch ``broken`` (one of ``pitfalls.MYSTERIES``) with its bug fixed
    by a small edit, and no other kernel of its own, and pass lesson 4's matmul check."""
    name = getattr(getattr(broken, "fn", broken), "__name__", "the kernel")
    (exercise,) = [e for e in fixes.EXERCISES if e.fix_of == name]  # lesson 4's cases
    recorder = record.Recorder({})  # every kernel launched, and what each calls
    with launches.recording() as seen:
        seen.listeners.append(recorder.note)
        result = run_exercise(exercise, fn)
    result.exercise = f"fix {name}"
    if not result.passed:
        return _as_symptom(result, seen)
    data = recorder.record()
    launched = {x["kernel"] for x in data["launches"]}
    mine = [e for key, e in data["kernels"].items() if key in launched and not e["course"]]
    label = f"{' and '.join(e['name'] for e in mine) or 'your kernel'} is {name} with a small fix"
    found = verdict.not_the_fix(exercise, data)
    if found is not None:
        return _fail(result, found, name, label)
    changed = max(
        (lines_changed(broken, SimpleNamespace(src=e["source"])) for e in mine), default=0
    )
    result.cases.append(Case(label, (), passed=True, problem=f"{changed} statement(s) changed"))
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


def symptoms(broken: Any, block_k: int = 32) -> CheckResult:
    """Lesson 4's matmul check on ``broken`` as lesson 9 launches it (``pitfalls.launcher``),
    its diagnosis the pattern of what fails: where to look, not what to change."""
    from tmm_course.kernels.pitfalls import launcher

    with launches.recording() as seen:
        result = check_matmul(launcher(broken, block_k=block_k), allow_course_kernels=True)
    result.exercise = f"symptoms of {getattr(getattr(broken, 'fn', broken), '__name__', 'it')}"
    return _as_symptom(result, seen)


def _block_k(seen: launches.Launches) -> int | None:
    """The BLOCK_K every recorded launch used, if they agree."""
    values = {launch.kwargs.get("BLOCK_K") for launch in seen.seen} - {None}
    return values.pop() if len(values) == 1 else None


def pattern(result: CheckResult, block_k: int | None) -> str:
    """Which cases pass and which fail, in a sentence from :data:`PATTERNS`."""
    ran = [c for c in result.cases if c.passed or c.problem != "not run: fix the other cases first"]
    if block_k is None or not ran or len(ran[0].shape) != 3:
        return UNNAMED_PATTERN
    for sentence, passes in PATTERNS:
        if all(passes(*case.shape, block_k) == case.passed for case in ran):
            return sentence
    return _layout_pattern(ran) or UNNAMED_PATTERN


def _layout_pattern(ran: Sequence[Case]) -> str | None:
    """The sentence when exactly the cases with some tensors strided (not contiguous: a
    transposed or sliced view, rows padded) fail, or None."""
    names = sorted({name for case in ran for name in case.strided})
    alike = [n for n in names if all((n in case.strided) != case.passed for case in ran)]
    if not alike:
        return None
    which, be = " and ".join(n.upper() for n in alike), "is" if len(alike) == 1 else "are"
    return (f"only the cases where {which} {be} not contiguous (a view with other strides, or "
            f"rows padded) fail; every case with a contiguous {which} passes")  # fmt: skip


def _as_symptom(result: CheckResult, seen: launches.Launches) -> CheckResult:
    """``result`` with its diagnoses' repair advice replaced by the pattern of the failure
    (the codes stay; a crash or a kernel never launched keeps its own words)."""
    if result.passed or any(d.code in ("crashed", "not_implemented") for d in result.diagnoses):
        return result
    said = pattern(result, _block_k(seen))
    first = next((c for c in result.cases if not c.passed), None)
    where = f" The first failing case: {first.label}: {first.problem}." if first else ""
    codes = ", ".join(d.code for d in result.diagnoses)
    result.diagnoses = [
        Diagnosis(
            result.diagnoses[0].code if result.diagnoses else "wrong_values",
            f"The pattern: {said}.{where} (the check's findings: {codes}; the case list below "
            "says what each case saw.) Find the statement that breaks exactly these cases.",
        )
    ]
    return result
