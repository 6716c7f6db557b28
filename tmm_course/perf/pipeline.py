"""A model of software pipelining (``num_stages``): when each K-slab's load and ``tl.dot`` run.

Loads go into a ring buffer of ``buffers`` slots: the load of step ``k`` uses slot
``k % buffers`` and may start only once the ``tl.dot`` that last read that slot is done; the
``tl.dot`` of step ``k`` starts when its slab has arrived and the previous ``tl.dot`` finished.
Times are in units of one ``tl.dot``; a load takes ``load_time`` of them. A model for the
picture, not a measurement (lesson 6's stored sweep is the measurement)."""

from __future__ import annotations

from dataclasses import dataclass

from tmm_course import validate


@dataclass(frozen=True)
class Slab:
    """One K step: its ring-buffer slot, and when its load and its ``tl.dot`` ran."""

    step: int
    slot: int
    load: tuple[float, float]
    dot: tuple[float, float]


def schedule(buffers: int, steps: int = 8, load_time: float = 3.0) -> list[Slab]:
    """The K-loop's timeline with ``buffers`` slabs of A and B in flight at most."""
    validate.positive("buffers", buffers)
    validate.positive("steps", steps)
    slabs: list[Slab] = []
    for k in range(steps):
        slot_free = slabs[k - buffers].dot[1] if k >= buffers else 0.0
        load_start = slot_free  # the copy engine takes as many loads at once as there are slots
        arrived = load_start + load_time
        dot_start = max(arrived, slabs[-1].dot[1] if slabs else 0.0)
        slabs.append(Slab(k, k % buffers, (load_start, arrived), (dot_start, dot_start + 1.0)))
    return slabs


def busy(slabs: list[Slab]) -> float:
    """Share of the time the tensor cores spend in ``tl.dot``."""
    return len(slabs) / slabs[-1].dot[1]
