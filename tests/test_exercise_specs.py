"""The exercises wing (tmm_course.exercises): one spec per exercise, drawn from a seeded
generator alike in any process, with the notebook cells it lives in."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import NOTEBOOKS

from tmm_course.exercises import EXERCISES
from tmm_course.exercises.spec import Exercise, generator

# the exercises with cases (lesson 9's are matmul's); an answer that is data has none
FAMILIES = list({id(e.cases): e for e in EXERCISES if isinstance(e, Exercise)}.values())


def _values(cases) -> list[torch.Tensor]:
    return [x for c in cases for x in (*c.tensors, c.expected)]


@pytest.mark.parametrize("exercise", FAMILIES, ids=[e.name for e in FAMILIES])
def test_the_same_seed_draws_the_same_secret_cases(exercise):
    first = exercise.draw(generator(7), "interpreter", secret=True)
    again = exercise.draw(generator(7), "interpreter", secret=True)
    assert [c.label for c in first] == [c.label for c in again]
    assert all(torch.equal(a, b) for a, b in zip(_values(first), _values(again), strict=True))


def test_secret_sizes_differ_from_the_checks_and_keep_square_cases_square():
    from tmm_course.exercises import matmul

    listed = [c.shape for c in matmul.EXERCISE.draw(generator(1), "interpreter")]
    secret = [c.shape for c in matmul.EXERCISE.draw(generator(1), "interpreter", secret=True)]
    assert secret != listed
    assert secret[0][0] == secret[0][1] == secret[0][2]  # "square" stays square
    assert secret[2] == (1, 1, 1)


def test_secret_sizes_keep_unequal_sizes_unequal_and_in_order():
    from tmm_course.exercises import transpose

    # the M/N-swapping transpose passes every square case: part 1's 64 x 128 must stay oblong
    for seed in range(300):
        shapes = [c.shape for c in transpose.PART_1.draw(generator(seed), "interpreter", True)]
        assert shapes[0][0] == shapes[0][1] and shapes[1][0] < shapes[1][1], (seed, shapes)


def test_a_case_drawn_again_keeps_its_shapes_and_layouts_with_new_values():
    from tmm_course.exercises import transpose

    case = transpose.EXERCISE.draw(generator(1), "interpreter", secret=True)[5]
    fresh = case.again(generator(2))
    (x,), (y,) = case.tensors, fresh.tensors
    assert (fresh.label, x.shape, x.stride()) == (case.label, y.shape, y.stride())
    assert not torch.equal(x, y)


def test_every_exercise_names_its_notebook_cells():
    cells = {
        path.stem: {c.get("id") for c in json.loads(path.read_text(encoding="utf-8"))["cells"]}
        for path in NOTEBOOKS
    }
    for exercise in EXERCISES:
        where = exercise.cells
        if where is None:  # lesson 4's kernel: lessons 8 and 9 judge with it, no cell its own
            assert exercise.name == "matmul"
            continue
        assert {where.exercise, where.solution, where.check} <= cells[where.notebook], exercise.name


PRODUCTS = [
    e for e in FAMILIES if e.predicts is None and len(e.cases(generator(0), "x")[0].shape) == 3
]


@pytest.mark.parametrize("exercise", PRODUCTS, ids=[e.name for e in PRODUCTS])
def test_a_k_loop_of_a_fixed_trip_count_meets_a_longer_k(exercise):
    """A loop of a fixed trip count passes every case whose K it covers: each product has a
    case whose K is 8 times any K judged before it, and 4096 at least (a grader's sizes keep
    it: the long-K case is never resized)."""
    cases = exercise.draw(generator(3), "interpreter")
    first = max(c.shape[2] for c in cases if not c.only_if_all_passed)
    assert max(c.shape[2] for c in cases) >= max(8 * first, 4096)
