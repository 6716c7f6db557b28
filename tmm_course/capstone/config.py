"""One launch configuration of the capstone's kernels, stored and matched as data."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One way to launch a kernel: tile sizes, warps per program, pipeline depth, group of
    rows, how many slices K is cut into (grouped kernel), and for the persistent kernel
    whether C is stored in two halves (frees shared memory for one more pipeline stage),
    whether the tiles of a last, partial wave are shared out in K-slices (``split_tail``) and
    whether each tile is computed as C^T = B^T A^T (``swap_ab``: a few rows of A then sit on
    the narrow side of the tensor cores' instruction, whose other side needs 64 rows) and
    whether some warps only load while others compute (``warp_specialize``)."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8
    split_k: int = 1
    subtile: bool = False
    flatten: bool = True  # persistent kernel: let the compiler pipeline across tiles
    split_tail: bool = False
    swap_ab: bool = False
    warp_specialize: bool = False  # persistent kernel: loading warps apart from computing ones

    def __str__(self) -> str:
        text = f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"
        text += f" g{self.group_m}"
        if self.split_k > 1:
            text += f" split-K {self.split_k}"
        text += " subtiled" if self.subtile else ""
        text += " split tail" if self.split_tail else ""
        text += " swapped" if self.swap_ab else ""
        text += " warp-specialized" if self.warp_specialize else ""
        return text + ("" if self.flatten else " unflattened")

    def as_dict(self) -> dict:
        """The configuration as the results files store it: every field by name."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Config:
        """The configuration a results file stored (keys it does not know are left out, so
        that a file with other fields, or a timing's "ms", still reads)."""
        names = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in names})
        except TypeError as exc:
            raise ValueError(
                f"{data!r} does not describe a Config; expected at least block_m, block_n "
                "and block_k, as Config.as_dict() writes them."
            ) from exc
