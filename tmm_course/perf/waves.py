"""Waves and quantisation: how the tiles of a product fill the GPU's SMs, wave after wave."""

from __future__ import annotations

from dataclasses import dataclass

from tmm_course import gpus, validate


@dataclass(frozen=True)
class Waves:
    """``tiles`` programs on ``slots`` SMs (one program per SM at a time)."""

    tiles: int
    slots: int

    @property
    def waves(self) -> float:
        """Tiles per slot: 2.03 means two full waves and a last one 3% full."""
        return self.tiles / self.slots

    @property
    def full_waves(self) -> int:
        return self.tiles // self.slots

    @property
    def last_wave_tiles(self) -> int:
        """Tiles in the last wave (a full wave if the slots divide the tiles)."""
        return self.tiles % self.slots or min(self.tiles, self.slots)

    @property
    def last_wave_use(self) -> float:
        """Share of the SMs busy in the last wave."""
        return self.last_wave_tiles / self.slots

    @property
    def use(self) -> float:
        """Share of SM time busy over all waves, if every tile takes as long."""
        rounds = -(-self.tiles // self.slots)
        return self.tiles / (rounds * self.slots)


def waves(m: int, n: int, block_m: int, block_n: int, sms: int = gpus.CARDS["H200"].sms) -> Waves:
    """The tiles of an ``m x n`` product in ``block_m x block_n`` tiles, on ``sms`` SMs."""
    for name, value in (("m", m), ("n", n), ("block_m", block_m), ("block_n", block_n),
                        ("sms", sms)):  # fmt: skip
        validate.positive(name, value)
    return Waves(-(-m // block_m) * -(-n // block_n), sms)
