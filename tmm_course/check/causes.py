"""Which cause explains a failed case, asked before its symptoms are ranked.

A symptom (cells never written, lanes loaded outside an input, wrong values on ragged shapes)
has several causes, and the learner needs the one line to change. Each function here takes
plain data, :class:`Seen` (what the learner's launches did to one case: their grids, the tile
each program stored, where a load or a store first left its view), and returns a
:class:`Cause`: the code the case gets and one sentence naming the line to change; or None
when the data do not point to that cause. They read no global state and launch nothing, so
the check and the grader can call them on the facts either has.

:func:`seen` builds the facts from the memory guard's record (:class:`~.memory_guard.Trace`);
:func:`idle_programs` counts, from the same record, the programs that touched no memory (the
facts of :func:`tmm_course.check.verdict.too_many_programs`, in the check and the grader's
replay worker alike).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from tmm_course.check.launches import Launch, grid_of
from tmm_course.check.memory_guard import Trace

Program = tuple[int, int, int]
# (first row, last row, first column, last column) of the cells a program stored; a 1-D output
# is one column
Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class Cause:
    """A case's cause: its code, the sentence naming the line to change, and the codes found
    beside it that it explains (a grid too small also fails only ragged shapes)."""

    code: str
    sentence: str
    explains: tuple[str, ...] = ()
    ambiguous: bool = False  # the sentence names two causes the record cannot tell apart


@dataclass(frozen=True)
class Stray:
    """The first lane of a load or a store that left its view: the view's name and shape and
    where the lane fell, (row, column) in the view's coordinates (a 1-D view is one row),
    None when it fell between cells (a stride, not an edge)."""

    kind: str  # "load" or "store"
    tensor: str
    shape: tuple[int, ...]
    cell: tuple[int, int] | None
    lanes: int
    # the load or store that strayed first also had lanes inside the view: an index that runs
    # across the view's end (not a whole tile past it)
    straddles: bool = False


# an exercise's (sentence, ambiguous) for a stray load whose cause it knows, or None
StrayCause = Callable[[Stray], "tuple[str, bool] | None"]


@dataclass(frozen=True)
class Seen:
    """What the learner's launches did to one case, as plain data."""

    output: str
    shape: tuple[int, ...]  # the output's
    # each learner launch's grid and, per program that stored into the output, its Box
    launches: Sequence[tuple[Program, Mapping[Program, Box]]]
    # (rows, columns) when the stored cells are exactly rows < rows and columns < columns
    # (a 1-D output: columns is 1), else None
    leading: tuple[int, int] | None
    unwritten: int
    strays: Sequence[Stray] = ()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _block(boxes: Iterable[Box]) -> tuple[int, int]:
    """(height, width) of the programs' tiles: the tallest and widest stored box."""
    boxes = list(boxes)
    return max(b[1] - b[0] + 1 for b in boxes), max(b[3] - b[2] + 1 for b in boxes)


def _axes(boxes: Mapping[Program, Box]) -> tuple[int, int]:
    """(grid axis that walks the rows, grid axis that walks the columns): read from two
    programs that differ on one axis only; Triton's convention (0 rows, 1 columns) when the
    grid has one program on an axis."""
    rows_axis, cols_axis = 0, 1
    found = {}
    for p, box in boxes.items():
        for axis in (0, 1):
            q = list(p)
            q[axis] += 1
            other = boxes.get((q[0], q[1], q[2]))
            if other is None or axis in found:
                continue
            if other[0] != box[0]:
                found[axis] = "rows"
            elif other[2] != box[2]:
                found[axis] = "columns"
    if found.get(0) == "columns" or found.get(1) == "rows":
        rows_axis, cols_axis = 1, 0
    return rows_axis, cols_axis


def grid(seen: Seen) -> Cause | None:
    """Cells never written, all past a leading block of rows or columns, by a grid with
    fewer programs than the output has tiles (``M // BLOCK_M``), or with its axes swapped."""
    if not seen.unwritten or seen.leading is None or len(seen.launches) != 1:
        return None
    ((g, boxes),) = seen.launches
    if not boxes:
        return None
    one_d = len(seen.shape) == 1
    rows, cols = (seen.shape[0], 1) if one_d else seen.shape[:2]
    height, width = _block(boxes.values())
    rows_axis, cols_axis = (0, 1) if one_d else _axes(boxes)
    need_rows, need_cols = _cdiv(rows, height), _cdiv(cols, width)
    have_rows, have_cols = g[rows_axis], g[cols_axis] if not one_d else 1
    out = seen.output
    # a grid rounded down gives each program a whole tile to store: where some stored nothing,
    # a mask or an offset kept them out, and "too small" would be wrong (swapped axes aside)
    busy = len(boxes) == g[0] * g[1] * g[2]
    if one_d:
        if have_rows >= need_rows or height == 1 or not busy:  # one element a program: no cdiv
            return None
        return Cause("unwritten", (
            f"the grid is too small: its {have_rows} program(s) of {height} elements cover "
            f"{have_rows * height} of the {rows} elements of {out}, and the last "
            f"{rows - have_rows * height} have no program. Launch triton.cdiv(n, BLOCK) "
            "programs, not n // BLOCK: the last, partial block needs a program too (its mask "
            "keeps it inside)."), ("ragged_edge",))  # fmt: skip
    # one axis of programs for rows and columns of tiles: a 1-D grid, or a 2-D one whose axis 1
    # was rounded down to one program
    one_axis = g[1] == g[2] == 1 and need_cols > 1 and height > 1 and width > 1
    if one_axis and g[0] >= need_rows * need_cols:  # programs enough: mapped to tiles wrongly
        return None
    if not one_axis and not _tiled(boxes, rows_axis, cols_axis, height, width):
        return None  # the stores did not land tile by tile: an offset or a stride, not the grid
    if (have_rows, have_cols) == (need_cols, need_rows) and need_rows != need_cols:
        return Cause("unwritten", (
            f"the grid's axes are swapped: program_id({rows_axis}) walks the rows of {out} "
            f"({height} each) and program_id({cols_axis}) its columns ({width} each), but the "
            f"grid gives axis {rows_axis} the column tiles' count ({have_rows}) and axis "
            f"{cols_axis} the row tiles' ({have_cols}). Launch "
            f"{_grid_text(rows_axis, 'triton.cdiv(M, BLOCK_M)', 'triton.cdiv(N, BLOCK_N)')}."
        ), ("ragged_edge",))  # fmt: skip
    if not busy:
        return None
    if one_axis:
        tiles = need_rows * need_cols
        return Cause("unwritten", (
            f"the grid is too small: {g[0]} program(s) for the {tiles} tiles of {height} x "
            f"{width} that cover {out} ({need_rows} down, {need_cols} across). Round each "
            "count up: (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N)) on a 2-D grid, their "
            "product on a 1-D one; M // BLOCK_M leaves the last, partial tiles without a program."
        ), ("ragged_edge",))  # fmt: skip
    short = []
    if have_rows < need_rows:
        short.append((rows_axis, have_rows, height, rows, "rows", "M", "BLOCK_M"))
    if have_cols < need_cols:
        short.append((cols_axis, have_cols, width, cols, "columns", "N", "BLOCK_N"))
    if not short or any(size == 1 for _, _, size, *_ in short):  # a program per row: no cdiv
        return None
    said = "; ".join(
        f"axis {axis} has {have} program(s) of {size} {what}, {have * size} of the {total} "
        f"{what} of {out}, so the last {total - have * size} have no program"
        for axis, have, size, total, what, *_ in short
    )
    fix = ", and ".join(f"triton.cdiv({n}, {block}), not {n} // {block}"
                        for *_, n, block in short)  # fmt: skip
    return Cause("unwritten", f"the grid is too small: {said}. Build it with {fix}.",
                 ("ragged_edge",))  # fmt: skip


def one_axis_for_both(seen: Seen) -> Cause | None:
    """Cells never written because one program id placed both the rows and the columns of
    each program's tile (``offs_n`` built from ``program_id(0)``): only the tiles where the two
    counts meet are stored, and the other axis's programs repeat them."""
    if not seen.unwritten or len(seen.launches) != 1 or len(seen.shape) != 2:
        return None
    ((g, boxes),) = seen.launches
    if len(boxes) < 2:
        return None
    height, width = _block(boxes.values())
    for axis, other in ((0, 1), (1, 0)):
        if g[other] > 1 and all((b[0], b[2]) == (p[axis] * height, p[axis] * width)
                                for p, b in boxes.items()):  # fmt: skip
            wrong, right = ("column", "row") if axis == 0 else ("row", "column")
            return Cause("unwritten", (
                f"program_id({axis}) places both the rows and the columns of each tile of "
                f"{seen.output}: the programs with program_id({axis}) = i all store tile (i, i), "
                f"so only the tiles on the diagonal are written, {g[other]} times each. Build "
                f"the {wrong} offsets from program_id({other}), the {right} offsets from "
                f"program_id({axis})."), ("ragged_edge",))  # fmt: skip
    return None


def _tiled(boxes: Mapping[Program, Box], rows_axis: int, cols_axis: int, height: int,
           width: int) -> bool:  # fmt: skip
    """Whether each program stored inside the tile its program ids name: its cells start at
    row ``pid[rows_axis] * height`` and column ``pid[cols_axis] * width``."""
    return all(
        (b[0], b[2]) == (p[rows_axis] * height, p[cols_axis] * width) for p, b in boxes.items()
    )


def _grid_text(rows_axis: int, rows: str, cols: str) -> str:
    return f"({rows}, {cols})" if rows_axis == 0 else f"({cols}, {rows})"


def _edge(stray: Stray) -> tuple[str, str] | None:
    """(where the lane fell, the index that must be masked) for a lane past an edge of its
    view; None for one that fell between its cells (a stride, not a mask)."""
    if stray.cell is None:
        return None
    row, col = stray.cell
    name = stray.tensor
    if len(stray.shape) == 1:
        if col < 0 or col >= stray.shape[0]:
            return (f"element {col} ({name} has {stray.shape[0]})",
                    f"its offsets below {name}'s length, offs < n")  # fmt: skip
        return None
    rows, cols = stray.shape[0], stray.shape[1]
    if 0 <= row < rows and not 0 <= col < cols:  # a column past an edge, inside the rows
        side = "right of the last column" if col >= cols else "left of the first column"
        return (f"column {col} of row {row} ({side}; {name} has {cols})",
                f"its column offsets below {name}.shape[1]")  # fmt: skip
    if row < 0:
        return (f"row {row} (above the first row)", "its row offsets at 0 or more")
    if row >= rows:  # past the last element: rows, or the last row's columns, overran
        lanes = ": the K lanes of a product too" if stray.kind == "load" else ""
        return (f"row {row}, column {col}, past its last element",
                f"every offset it steps along below its size ({name}.shape[0] for the rows, "
                f"{name}.shape[1] for the columns{lanes})")  # fmt: skip
    return None


def _tiles_divide(seen: Seen) -> bool:
    """Whether the output is a whole number of its programs' tiles on each axis, more than one
    on some axis (the tallest and widest tile stored are the block): no lane of a right kernel
    leaves a tensor there, mask or none."""
    if len(seen.launches) != 1 or not seen.launches[0][1] or len(seen.shape) != 2:
        return False
    height, width = _block(seen.launches[0][1].values())
    rows, cols = seen.shape[0], seen.shape[1]
    return rows % height == 0 and cols % width == 0 and (rows > height or cols > width)


def stray(seen: Seen, strided: bool = False) -> Cause | None:
    """Lanes that left their view past an edge: a load whose mask is missing (every store in
    bounds: ``out_of_bounds_read``, ahead of what the ragged shapes also show) or a store whose
    mask is missing or lets the edge through (``out_of_bounds_write``). A lane beside a row of
    a strided view may be the stride's doing: ``strided`` cases name no mask there."""
    if strided and any(s.cell is not None and 0 <= s.cell[0] < s.shape[0] for s in seen.strays
                       if len(s.shape) == 2):  # fmt: skip
        return None
    stores = [s for s in seen.strays if s.kind == "store"]
    loads = [s for s in seen.strays if s.kind == "load"]
    first = (stores or loads)[:1]  # a tensor of the output's shape: no K a block may overrun
    same = first and tuple(first[0].shape) == tuple(seen.shape)
    if same and _tiles_divide(seen) and (edge := _edge(first[0])):
        verb = "tl.store into" if stores else "tl.load of"
        code = "out_of_bounds_write" if stores else "out_of_bounds_read"
        return Cause(code, (
            f"the {verb} {first[0].tensor} went outside it, first at {edge[0]}, on a shape its "
            f"tiles divide exactly, where no lane of a right kernel leaves {first[0].tensor}: an "
            "index runs past the edge (the last row is M - 1, the last column N - 1), not a "
            "mask. Check what each lane computes for its row and column."))  # fmt: skip
    if stores:
        edge = _edge(stores[0])
        if edge is None:
            return None
        where, index = edge
        also = (f" The loads strayed too ({loads[0].tensor}): give them the same masks, with "
                "other=0.0.") if loads else ""  # fmt: skip
        return Cause("out_of_bounds_write", (
            f"the tl.store into {seen.output} wrote outside it, first at {where}: its mask is "
            f"missing or lets that edge through. Mask the store so that it keeps {index} "
            f"(a strict <, on every axis).{also}"))  # fmt: skip
    if not loads:
        return None
    edge = _edge(loads[0])
    if edge is None:
        return None
    where, index = edge
    name = loads[0].tensor
    return Cause("out_of_bounds_read", (
        f"the tl.load of {name} read outside it, first at {where}, while every store stayed "
        f"inside {seen.output}: that load's mask is missing or too loose. Mask it so that it "
        f"keeps {index}, with other=0.0 (tl.load(ptrs, mask=..., other=0.0))."))  # fmt: skip


# --- the facts, from the memory guard's record ------------------------------------------------
def seen(
    trace: Trace, views: Mapping[str, object], learner: set[int], grids: Mapping[int, Program]
) -> Seen:
    """:class:`Seen` of one case from the guard's ``trace``: ``learner`` numbers the launches
    that are the learner's (an index into ``trace.launches``), ``grids`` their grids."""
    names = list(views)
    output = names[-1]
    out = trace.views[output]
    shape = tuple(out.shape)
    cols = shape[1] if len(shape) == 2 else 1
    boxes: dict[int, dict[Program, list[int]]] = {}
    for a in trace.accesses:
        if a.launch not in learner:
            continue
        if a.kind == "store" and a.tensor == output and a.cells.size:
            rows_, cols_ = a.cells // cols, a.cells % cols
            box = [int(rows_.min()), int(rows_.max()), int(cols_.min()), int(cols_.max())]
            old = boxes.setdefault(a.launch, {}).get(a.program)
            if old is not None:
                box = [min(old[0], box[0]), max(old[1], box[1]),
                       min(old[2], box[2]), max(old[3], box[3])]  # fmt: skip
            boxes[a.launch][a.program] = box
    stored = trace.cells("store", output, learner)
    leading = None
    if bool(stored.any()):
        grid2 = stored.reshape(shape[0], cols)
        rows_hit = int(grid2.any(dim=1).nonzero().max()) + 1
        cols_hit = int(grid2.any(dim=0).nonzero().max()) + 1
        want = torch.zeros_like(grid2)
        want[:rows_hit, :cols_hit] = True
        if bool((grid2 == want).all()):
            leading = (rows_hit, cols_hit)
    launches = [
        (grids[i], {p: (b[0], b[1], b[2], b[3]) for p, b in boxes.get(i, {}).items()})
        for i in sorted(learner)
        if i in grids and i in boxes
    ]
    strays = []
    for kind in ("store", "load"):
        for name, lanes in trace.outside(kind).items():
            first = trace.first_straying(kind, name)
            strays.append(Stray(kind, name, tuple(trace.views[name].shape),
                                first.strays[0] if first else None, lanes,
                                straddles=bool(first and first.cells.size)))  # fmt: skip
    return Seen(output, shape, launches, leading, int((~stored).sum()), strays)


def idle_programs(trace: Trace, learner: set[int], grids: Mapping[int, Program]) -> tuple[int, int]:
    """(programs, idle): how many programs the launches numbered in ``learner`` ran (those
    with a grid in ``grids``), and how many of them touched no memory at all."""
    active: dict[int, set[Program]] = {}
    for a in itertools.chain(trace.accesses, trace.scratch):
        if a.launch in learner:
            active.setdefault(a.launch, set()).add(a.program)
    programs = sum(g[0] * g[1] * g[2] for i, g in grids.items() if i in learner)
    busy = sum(len(active.get(i, ())) for i in learner if i in grids)
    return programs, max(programs - busy, 0)


def grids_of(launches: Sequence[Launch]) -> dict[int, Program]:
    """Each launch's grid by its index (launches whose grid is not made of ints left out)."""
    found = {}
    for index, launch in enumerate(launches):
        try:
            found[index] = grid_of(launch)
        except (TypeError, ValueError):
            continue
    return found


def first(
    facts: Seen, code: str | None, strided: bool = False, own: StrayCause | None = None
) -> Cause | None:
    """The cause that explains a case's ``code`` (its symptom), or None; ``strided``: the case
    has a tensor that is not contiguous; ``own``: the exercise's sentence for a stray load it
    knows the cause of (lesson 10: a scale's K-group index), ahead of the mask."""
    if code == "unwritten":
        return grid(facts) or one_axis_for_both(facts)
    if code in ("out_of_bounds_read", "out_of_bounds_write"):
        found = stray(facts, strided)
        loads = [s for s in facts.strays if s.kind == "load"]
        if found is not None and found.code == "out_of_bounds_read" and own and loads:
            said = own(loads[0])
            found = found if said is None else Cause(found.code, said[0], ambiguous=said[1])
        return found if found is not None and found.code == code else None
    return None
