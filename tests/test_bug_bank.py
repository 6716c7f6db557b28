"""The checks on mistakes they were not written against (tests/bug_bank.py): at least 95% of
the bank's bugs get the diagnosis a teacher would give first, and no correct launcher fails.
On a GPU the loads are judged by replaying each case through the interpreter, so every bug is
in sight on both backends.

The bank runs once here (the ``bank`` fixture); the tests that read more of one entry's
verdict than its first code (its message, what it compiled to) and the comparison with the
grader and the nbgrader path (tests/grade_parity.py) read that run rather than checking the
same launcher again."""

from __future__ import annotations

import importlib.util

import bug_bank
import pytest
from conftest import skip_for_missing
from grade_parity import (
    entries,
    graded_by_the_grader,
    graded_in_full,
    graded_on_nbgrader,
    nbgrader_sample,
)

import tmm_course

INTERPRETER = tmm_course.BACKEND == "interpreter"


@pytest.fixture(scope="module")
def bank() -> list[bug_bank.Outcome]:
    return bug_bank.run()


def result_of(bank, check: str, name: str):
    """The check's result for the bank entry ``name`` of ``check``."""
    (found,) = [o.result for o in bank if o.entry.check == check and o.entry.name == name]
    return found


def test_the_bank_covers_every_check_with_forty_bugs_and_correct_alternatives():
    bugs = [e for e in bug_bank.BANK if e.intended != bug_bank.PASS]
    correct = [e for e in bug_bank.BANK if e.intended == bug_bank.PASS]
    assert len(bugs) >= 40 and len(correct) >= 10
    assert {e.check for e in bugs} == {e.check for e in correct} == set(bug_bank.CHECKS)


def test_bugs_are_diagnosed_and_correct_launchers_pass(bank):
    outcomes = bank
    print(bug_bank.table(outcomes))
    bugs = [o for o in outcomes if o.entry.intended != bug_bank.PASS]
    assert len(bugs) >= 40
    false_alarms = [
        o.entry.name for o in outcomes if o.entry.intended == bug_bank.PASS and not o.right
    ]
    assert false_alarms == []
    assert all(not o.passed for o in bugs), [o.entry.name for o in bugs if o.passed]
    assert sum(o.right for o in bugs) >= 0.95 * len(bugs), bug_bank.table(outcomes)


# --- the learner's check, the batch grader and the nbgrader path agree -------------------------
@pytest.fixture(scope="module")
def by_the_grader(tmp_path_factory) -> dict:
    return graded_by_the_grader(entries(), tmp_path_factory.mktemp("parity"))


@pytest.fixture(scope="module")
def on_nbgrader() -> dict:
    if importlib.util.find_spec("nbgrader") is None:
        skip_for_missing("nbgrader (make test installs it: pip install -e '.[grade]')")
    return graded_on_nbgrader(nbgrader_sample(entries()))


def agree(bank, entry, verdict: str, codes: list[str]) -> None:
    checked = result_of(bank, entry.check, entry.name)
    assert (verdict == "pass") == checked.passed, (verdict, codes, checked.codes)
    if not checked.passed:
        assert codes[:1] == checked.codes[:1], (codes, checked.codes)


@pytest.mark.parametrize("entry", entries(), ids=lambda e: f"{e.check}-{e.name}")
def test_the_check_and_the_grader_agree(bank, by_the_grader, entry):
    agree(bank, entry, *by_the_grader[(entry.check, entry.name)])


@pytest.mark.parametrize("entry", nbgrader_sample(entries()), ids=lambda e: f"{e.check}-{e.name}")
def test_the_check_and_the_nbgrader_path_agree(bank, on_nbgrader, entry):
    agree(bank, entry, *on_nbgrader[(entry.check, entry.name)])


# the rules that weigh more than one replay, decided by the one judge (check.verdict) for both
def checked_and_graded(name: str):
    """The check's result for vector_add's bank entry ``name``, and the grader's (verdict,
    codes, detail): its case loop, as the grader's command and nbgrader's cells run it."""
    (entry,) = [e for e in bug_bank.BANK if e.check == "vector_add" and e.name == name]
    (checked,) = bug_bank.run([entry])
    return checked.result, graded_in_full("vector_add", entry.launcher)


@pytest.mark.skipif(not INTERPRETER, reason="the grader counts idle programs on the interpreter")
def test_the_grader_fails_a_grid_of_idle_programs_as_the_check_does():
    """One program per element for a kernel whose program adds a BLOCK: right values, most
    programs idle. The replay worker counts them as the check does, and the one judge's
    too_many_programs weighs them over the cases for both (the grader passed it)."""
    checked, (state, codes, detail) = checked_and_graded("grid of n programs")
    assert checked.codes[:1] == ["too_many_programs"], str(checked)
    assert (state, codes[:1]) == ("fail", checked.codes[:1]), detail
    assert checked.primary.message in detail


def test_the_grader_names_a_buffer_that_needed_zeros_as_the_check_does():
    """A kernel that adds into a buffer of the launcher's that holds zeros by chance: wrong
    once the replay refills it with poison, right once it is zeroed. The grader replays it
    zeroed too, and the one judge's uninitialised says so for both (the grader said
    wrong_values)."""
    checked, (state, codes, detail) = checked_and_graded("adds into leftover zeros")
    assert checked.codes[:1] == ["uninitialised_buffer"], str(checked)
    assert (state, codes[:1]) == ("fail", checked.codes[:1]), detail
    assert checked.primary.message in detail


# --- what the checks say, read from the bank's run (were in tests/test_check_verdicts.py) ------
def test_small_m_and_n_tiles_pass_8x8(bank):
    """test_check_verdicts.py's small-tile test for (8, 8, 16): the bank's "correct, 8x8x16"."""
    result = result_of(bank, "matmul", "correct, 8x8x16")
    assert result.passed, str(result)
    units = {row["gpu"]: row["matrix_unit"] for row in result.compiled}
    assert units["A100 (sm_80)"] == "mma" and units["T4 (sm_75)"] == "fma"


def test_a_float16_loop_carried_accumulator_is_refused_in_the_compilers_words(bank):
    result = result_of(bank, "matmul", "float16 acc += float32 tl.dot")
    assert result.primary.code == "gpu_would_reject", str(result)
    message = result.primary.message
    assert "Loop-carried variable acc has initial type" in message
    assert "fp16" in message and "re-assigned to" in message and "fp32" in message
    assert "every GPU the course names" in result.primary.message


def test_a_static_range_over_a_runtime_k_is_refused(bank):
    result = result_of(bank, "matmul", "tl.static_range over a runtime K")
    assert result.primary.code == "gpu_would_reject", str(result)
    assert "static_range" in result.primary.message or "constexpr" in result.primary.message


def test_block_k_of_8_names_the_compilers_rule(bank):
    result = result_of(bank, "matmul", "BLOCK_K = 8")
    assert result.primary.code == "gpu_would_reject"
    assert "K >= 16" in result.primary.message


@pytest.mark.parametrize(
    ("name", "code", "says"),
    [
        ("decoy launch, then torch", "no_triton_kernel", "after your kernel's last launch"),
        ("torch writes over the kernel's C", "no_triton_kernel", "after your kernel's last launch"),
        ("torch's answer moved by a kernel", "no_triton_kernel", "never loaded"),
        ("torch only for the long-K probe", "no_triton_kernel", "after your kernel's last launch"),
        ("torch's answer moved by a kernel", "no_triton_kernel", "computed some other way"),
        ("course matmul and an epilogue", "course_kernel", "course's"),
    ],
)
def test_torch_or_the_course_doing_the_work_fails(bank, name, code, says):
    result = result_of(bank, "matmul", name)
    assert not result.passed
    assert result.primary.code == code, str(result)
    assert says in result.primary.message


def test_a_host_copy_of_a_strided_input_is_named(bank):
    result = result_of(bank, "transpose", "x.contiguous() on the host")
    assert result.primary.code == "host_copy", str(result)
    assert ".contiguous()" in result.primary.message


@pytest.mark.parametrize(
    ("name", "code", "says"),
    [
        ("K loop of K // BLOCK_K trips", "ragged_edge", "K // BLOCK_K"),
        ("acc = tl.dot(a, b): the sum restarts", "wrong_values", "only the last K-slab"),
        ("pointers never advance along K", "wrong_values", "every step reloads the first"),
    ],
)
def test_k_loop_mistakes_are_named(bank, name, code, says):
    result = result_of(bank, "matmul", name)
    assert result.primary.code == code and says in result.primary.message, str(result)


def test_a_swapped_broadcast_is_one_cause_on_every_shape(bank):
    """``x[None, :] * y[:, None]`` transposes each square tile, on ragged and oblong outputs
    too (a masked lane loads 0): one diagnosis, no "wrong values" beside it."""
    result = result_of(bank, "outer_product", "[:, None] and [None, :] swapped")
    assert result.codes == ["transposed"], str(result)
    assert all("transpose of the right tile" in c.problem for c in result.cases if not c.passed)


def test_alpha_and_beta_swapped_is_named_not_reading_c(bank):
    result = result_of(bank, "scaled_matmul", "alpha and beta swapped")
    assert result.primary.code == "wrong_values", str(result)
    assert "alpha and beta are swapped" in result.primary.message
    assert "reads_c_when_beta_zero" not in result.codes


def test_transpose_part_one_names_the_row_stride_not_a_mask(bank):
    result = result_of(bank, "transpose_part1", "out's row stride taken from x")
    assert result.primary.code == "out_of_bounds_write", str(result)
    assert "row stride" in result.primary.message and "mask" not in result.primary.message


@pytest.mark.skipif(not INTERPRETER, reason="read from the interpreter's record of loads")
def test_a_column_major_load_is_blamed_not_the_store(bank):
    result = result_of(bank, "transpose", "load reads x column-major")
    assert result.primary.code == "transposed", str(result)
    assert "reads x column-major" in result.primary.message
    assert "keep it as it is" not in result.primary.message


def test_unwritten_is_judged_from_stored_cells_not_from_equal_values_seed_0(bank):
    """Seed 0 of test_check_verdicts.py's test of the same name (the bank seeds each entry 0)."""
    assert result_of(bank, "scaled_matmul", "correct").passed
