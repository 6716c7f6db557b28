"""One launch configuration of the capstone's kernels, stored and matched as data."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One way to launch a kernel: tile sizes, warps per program, pipeline depth, group of rows,
    K cut into slices (grouped kernel); for the persistent kernel, C stored in two halves (frees
    shared memory for a pipeline stage), a last, partial wave's tiles shared out in K-slices."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8
    split_k: int = 1
    subtile: bool = False
    split_tail: bool = False

    def __str__(self) -> str:
        text = f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"
        text += f" g{self.group_m}" + (f" split-K {self.split_k}" if self.split_k > 1 else "")
        text += " subtiled" if self.subtile else ""
        return text + (" split tail" if self.split_tail else "")

    def for_depth(self, k: int) -> Config:
        """This configuration on a product of depth ``k``: a K-step no deeper than K needs (K
        rounded up to a power of two, 16 at least: tl.dot's least), for past K a step only
        multiplies zeros. On an H200 (grid_h200.json's notes), the plan for 4096x4096x16 float16
        went from 1.13x torch in 64-deep steps to 1.22x in 16-deep ones."""
        deepest = max(16, 1 << max(k - 1, 0).bit_length())
        return dataclasses.replace(self, block_k=deepest) if self.block_k > deepest else self

    def as_dict(self) -> dict:
        """The configuration as the results files store it: every field by name."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Config:
        """The configuration a results file stored. A field it does not know is an error (a
        switch since removed would otherwise make two measured configurations one)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown or not {"block_m", "block_n", "block_k"} <= set(data):
            raise ValueError(
                f"{data!r} does not describe a Config (unknown: {', '.join(unknown) or 'none'}); "
                f"expected block_m, block_n, block_k and any of {', '.join(sorted(names))}, as "
                "Config.as_dict() writes them."
            )
        return cls(**data)
