"""The fit's records: on each fitted problem, what every candidate configuration measured
(:class:`Fitted`), as the results files store it; and the fits the package ships, one per GPU
measured (:func:`measured`), read by the GPU's name (:func:`card_for`)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from tmm_course import gpu
from tmm_course.capstone.config import Config
from tmm_course.capstone.problems import Problem

if TYPE_CHECKING:  # Python 3.10 has it in importlib.abc only
    from importlib.abc import Traversable


@dataclass(frozen=True)
class Fitted:
    """The fit on one problem: the fastest configuration, the fastest grouped one (for tensors
    the persistent kernel cannot read), ratios to torch; ``tried``: each (path, config, ratio)."""

    problem: Problem
    path: str
    config: Config
    ratio: float
    grouped: Config
    grouped_ratio: float
    tried: tuple[tuple[str, Config, float], ...] = ()

    def measured(self) -> dict[tuple[str, Config], float]:
        """(path, config) -> ratio to torch for every candidate timed here (a record stored
        without its candidates: its two winners)."""
        if not self.tried:
            return {(self.path, self.config): self.ratio,
                    ("grouped", self.grouped): self.grouped_ratio}  # fmt: skip
        return {(path, config): ratio for path, config, ratio in self.tried}

    @classmethod
    def best_of(cls, problem: Problem, ratios: dict[tuple[str, Config], float]) -> Fitted | None:
        """``ratios`` ((path, config) -> ratio to torch) as a record; None without a grouped one."""
        grouped = [key for key in ratios if key[0] == "grouped"]
        if not grouped:
            return None
        best, fastest = max(ratios, key=ratios.get), max(grouped, key=ratios.get)
        tried = tuple((path, config, r) for (path, config), r in ratios.items())
        return cls(problem, *best, ratios[best], fastest[1], ratios[fastest], tried)

    @classmethod
    def from_dict(cls, data: dict) -> Fitted:
        tried = tuple((t["path"], Config.from_dict(t["config"]), t["ratio"])
                      for t in data.get("tried", ()))  # fmt: skip
        return cls(
            Problem.from_dict(data["problem"]), data["path"], Config.from_dict(data["config"]),
            data["ratio"], Config.from_dict(data["grouped"]), data["grouped_ratio"], tried,
        )  # fmt: skip

    def as_dict(self) -> dict:
        return {
            "problem": self.problem.as_dict(), "path": self.path,
            "config": self.config.as_dict(), "ratio": self.ratio,
            "grouped": self.grouped.as_dict(), "grouped_ratio": self.grouped_ratio,
            "tried": [{"path": p, "config": c.as_dict(), "ratio": r} for p, c, r in self.tried],
        }  # fmt: skip


@dataclass(frozen=True)
class Card:
    """Whose fit the plan reads on a GPU: ``name`` (a :func:`measured` card), and whether it was
    measured on that very GPU (``derived``: no fit of its own ships, or its own is not read
    (:func:`pays`), so the measured card with the nearest figures stands in: the same compute
    capability, then the nearest SM count); ``why``: where its own ships, why it is not read."""

    name: str
    derived: bool = False
    why: str = ""

    def __str__(self) -> str:
        if not self.derived:
            return f"the {self.name}'s fit"
        return f"derived from the {self.name}'s fit{self.why}"


def _grid_file(card: str) -> Traversable:
    """Where the fit measured on ``card`` (a :data:`gpu.KNOWN` name) ships: its grid file
    (python -m tmm_course.perf.bench fit compare --out grid_<card>.json on that GPU)."""
    return resources.files("tmm_course.perf") / f"data/grid_{card.lower()}.json"


def _grid(card: str) -> dict:
    if card not in _READ:
        _READ[card] = json.loads(_grid_file(card).read_text(encoding="utf-8"))
    return _READ[card]


_READ: dict[str, dict] = {}  # each measured card's grid file, read once


def measured() -> tuple[str, ...]:
    """The GPUs (:data:`gpu.KNOWN` names) whose fit ships with the package."""
    return tuple(name for name in gpu.KNOWN if _grid_file(name).is_file())


THIS_FIT = "matmul_fast, this GPU's fit"  # bench compare's contenders: this, and other_fit's


def other_fit(card: str) -> str:
    """What ``bench compare`` calls the plan from ``card``'s shipped fit."""
    return f"matmul_fast, the {card}'s fit"


QUOTED = "H200"  # the fit the lessons quote: another card's own is read only where it beats it


def pays(card: str) -> bool:
    """Whether the plan reads ``card``'s own fit on it: the :data:`QUOTED` card's, always;
    another's only where its file raced it beside the other cards' fits on every held-out
    problem (``bench compare``) and it was at least as fast as each of them, by the geometric
    means of the ratios to torch.matmul."""
    if card == QUOTED:
        return True
    rows = _grid(card).get("compare", [])
    if not rows:
        return False
    mean = lambda name: statistics.geometric_mean(r["ratio_to_torch"][name] for r in rows)
    others = [name for name in rows[0]["ratio_to_torch"] if name not in ("torch.matmul", THIS_FIT)]
    return all(mean(THIS_FIT) >= mean(name) for name in others)


def card_for(here: gpu.Gpu | None) -> Card:
    """The fit for ``here`` (None, the interpreter: the :data:`QUOTED` card's): its own where
    one ships and :func:`pays`, else the nearest measured card's that pays."""
    cards = measured()
    if here is None:
        return Card(QUOTED)
    own = next((name for name in cards if gpu.KNOWN[name].name == here.name), None)
    if own is not None and pays(own):
        return Card(own)

    def apart(name: str) -> tuple:
        card = gpu.KNOWN[name]
        return (card.capability != here.capability, abs(card.sms - here.sms), name not in here.name)

    why = ""
    if own is not None:
        raced = bool(_grid(own).get("compare"))
        why = (f", which beat the {own}'s own on held-out problems" if raced
               else f" (the {own}'s own is not raced against it yet)")  # fmt: skip
    others = [name for name in cards if name != own and pays(name)]
    return Card(min(others, key=apart), derived=True, why=why)


def shipped(card: str = QUOTED) -> list[Fitted]:
    """The fit measured on ``card`` (one of :func:`measured`) that ships with the package."""
    if card not in measured():
        raise ValueError(f"no fit ships for {card!r}; expected one of {', '.join(measured())}")
    return [Fitted.from_dict(f) for f in _grid(card).get("fit", [])]
