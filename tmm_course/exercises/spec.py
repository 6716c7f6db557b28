"""The types an exercise is written in: what the learner's function is called with, the cases
it is judged on, the right answer and the known mistakes, and where it lives in the notebooks.

An exercise module (``tmm_course.exercises.matmul``, say) defines one :class:`Exercise`. Its
:attr:`Exercise.cases` draws the cases from a ``torch.Generator``: the learner's check draws
fresh ones on every call, the batch grader draws secret ones from its own seed. Each
:class:`Case` holds CPU tensors laid out as the case says (a transposed view is a transposed
view), the float64 reference and how far a cell may be from it, and :meth:`Case.again` draws
the same case (shapes, layouts, scalars) with new values: what a replay of the learner's
launches runs on. Nothing here launches anything, allocates on a GPU or reads global state:
two processes that draw from the same seed get the same cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import torch

from tmm_course.compile_ahead import Compiled, Launched

if TYPE_CHECKING:
    from tmm_course.perf.knobs import Knobs

BLOCK = 64  # "aligned" means a multiple of this on every axis (blocks up to 64 fit)
SCALAR_BITS = 64 * 64  # sixty-four int64 arguments: more than a launch passes by hand

# (out, *inputs) -> (code, sentence) for a subtler fault once the values are right, or None
Probe = Callable[..., "tuple[str, str] | None"]


def ragged(**sizes: int) -> tuple[str, ...]:
    """The axes whose size is not a multiple of :data:`BLOCK`: ``ragged(M=33, N=64) == ("M",)``."""
    return tuple(axis for axis, size in sizes.items() if size % BLOCK)


def beyond_scalars(values: int, largest: int) -> bool:
    """Whether an answer of ``values`` numbers up to ``largest`` needs more bits than
    :data:`SCALAR_BITS`. Where the answer depends on the shape alone (a fill, the grouped
    order), the replay on the same shape reproduces one computed on the host and packed into
    the launch's scalars: only a case this large tells it from the kernel's own work."""
    return values * max(largest, 1).bit_length() > SCALAR_BITS


def label(shape: tuple[int, ...], note: str = "") -> str:
    """'33x17 ragged, sliced view': the shape, aligned or ragged, and a note."""
    kind = "ragged" if ragged(**dict(zip("MNK", shape, strict=False))) else "aligned"
    return "x".join(map(str, shape)) + f" {kind}" + (f", {note}" if note else "")


@dataclass(frozen=True)
class Mistake:
    """A known mistake: what it would have stored, and the sentence that names its cause."""

    code: str
    value: torch.Tensor  # float64, the output's shape (NaN where nothing would land)
    cause: str
    # the diagnoses this cause explains away when both are found (alpha and beta swapped
    # also reads C in the beta = 0 case)
    explains: tuple[str, ...] = ()
    # True: the same values follow from another mistake too (its sentence names both)
    ambiguous: bool = False
    # given the record of loads and stores (a check's Trace), a sentence that tells the two
    # apart, or None
    refine: Callable[[object], str | None] | None = None


@dataclass(frozen=True)
class Output:
    """The output a case hands the learner: its shape and dtype, and a gap between rows that
    makes it non-contiguous (its row stride is then N + row_gap)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    row_gap: int = 0


@dataclass
class Case:
    """One call of the learner's function: its inputs, the output it fills, the right answer."""

    label: str
    shape: tuple[int, ...]  # (M, N, K), (M, N) or (n,): what the labels and messages say
    inputs: tuple[torch.Tensor | float, ...]  # in the launcher's order, before the output
    output: Output
    expected: torch.Tensor  # float64, the output's shape
    atol: float | torch.Tensor = 0.0  # allowed |out - expected|, per cell if a tensor
    mistakes: list[Mistake] = field(default_factory=list)
    ragged: tuple[str, ...] = ()  # axes that are not multiples of BLOCK
    strided: tuple[str, ...] = ()  # tensors (by name) that are not contiguous
    # what the output holds before the call (C = alpha*A@B + beta*C); None: poisoned
    initial: torch.Tensor | None = None
    probe: Probe | None = None  # a last look once the values are right (the long-K probe)
    only_if_all_passed: bool = False  # run only when every earlier case passed
    output_must_not_be_read: bool = False  # beta == 0: C must not be loaded
    # the same case with new values, drawn from a generator (set by the exercise)
    redraw: Callable[[torch.Generator], Case] | None = field(default=None, repr=False)

    def again(self, gen: torch.Generator) -> Case:
        """This case (shapes, layouts, scalars, flags) with new random values."""
        if self.redraw is None:
            return self
        fresh = self.redraw(gen)
        return replace(fresh, label=self.label, only_if_all_passed=self.only_if_all_passed)

    @property
    def tensors(self) -> list[torch.Tensor]:
        return [x for x in self.inputs if isinstance(x, torch.Tensor)]


@dataclass(frozen=True)
class Cells:
    """Where an exercise lives: its notebook and the ids of its exercise, solution and check
    cells."""

    notebook: str
    exercise: str
    solution: str
    check: str


@dataclass(frozen=True)
class Exercise:
    """One exercise: how the learner's function is called, its cases and its messages.

    ``cases(gen, backend, resize)`` returns every case of one check (``backend`` is
    ``tmm_course.backend``'s ``"gpu"`` or ``"interpreter"``: a float32 product on a GPU is
    allowed TF32's error; ``resize`` maps the sizes the exercise lists to the ones drawn). The
    learner's function is called ``fn(*case.inputs, out)`` with the output last, unless
    :attr:`call` reorders (``fn(a, b, c, alpha, beta)``).
    """

    name: str  # the check's name, also its notebook tag (check:NAME)
    lesson: int
    function: str  # the learner's function the exercise cell defines
    signature: str  # how it is called, as the lesson writes it
    tensors: tuple[str, ...]  # names of the tensors among the inputs, then the output's
    cases: Callable[..., list[Case]]
    cells: Cells | None = None
    messages: Mapping[str, str] = field(default_factory=dict)  # sentences for this exercise
    # the order the learner's function takes (inputs..., out) in: indices into that tuple
    call: Sequence[int] | None = None
    # lesson 9: the broken course kernel (in tmm_course.kernels.pitfalls) the cell repairs,
    # and the name of the repaired kernel it defines
    fix_of: str | None = None
    kernel: str | None = None
    # what the compiled kernels must show beyond their values (lesson 7: descriptor loads)
    requires: Requirement | None = None
    # what they compile to on a problem too large to run here (lesson 8: split-K's figures)
    at_scale: AtScale | None = None
    # course kernels (module.name) a lesson prints for this exercise to start from: a learner's
    # copy of one, its names changed or not, here or reused in a later exercise, is judged by
    # what it stores, not called course_kernel (launching the course's own still is)
    solution_kernels: tuple[str, ...] = ()
    # whether a copy of an input in another dtype, made on the host, is still that input (kept
    # at replay); False where the dtype is the exercise (lesson 10: float8 reaches the kernel)
    converts: bool = True
    # an answer that is data, judged against the compiler (lesson 6: predict a knob's effect):
    # no function is called, no case drawn
    predicts: Prediction | None = None
    # the GPUs the check's compile gate covers (None: every GPU the course names)
    gpus: tuple[str, ...] | None = None
    # a sentence for a stray load whose cause the exercise knows (given the check's Stray:
    # its tensor, shape and cell), with True where it names two causes; None: the mask's
    stray_cause: Callable[[object], tuple[str, bool] | None] | None = None
    # once the values are right, how each launch's programs shared the reading of the inputs
    # (from the record of their loads, on the interpreter): a sentence when they did not share
    # it as the exercise asks (lesson 8: each K-slice of a tile reads its own share of K)
    work: Callable[[Reads], str | None] | None = None

    def arguments(self, inputs: Sequence[object], out: object) -> list[object]:
        """The learner's arguments for one case, in the order its function takes them."""
        everything = [*inputs, out]
        return everything if self.call is None else [everything[i] for i in self.call]

    def draw(self, gen: torch.Generator, backend: str, secret: bool = False) -> list[Case]:
        """The cases of one check. ``secret``: sizes drawn from ``gen`` too (see
        :func:`secret_sizes`), for a grader whose cases a learner cannot know."""
        return self.cases(gen, backend, secret_sizes(gen) if secret else same)


@dataclass(frozen=True)
class Reads:
    """What one launch's programs loaded of the inputs, as plain data: its grid, its integer
    arguments by name, and per input (its shape), per program, the row-major flat indices of
    the cells that program loaded."""

    grid: tuple[int, int, int]
    constants: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]
    cells: Mapping[str, Mapping[tuple[int, int, int], Sequence[int]]]

    @property
    def programs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass(frozen=True)
class Requirement:
    """What a kernel must show once compiled for :attr:`target`, beyond the values it stores:
    ``shows(ttir, ptx)`` reads the compiler's output (lesson 7: loads through descriptors, TMA
    copies). Judged on the kernels the learner's function launched, never on their source."""

    code: str  # the diagnosis when no launched kernel shows it
    asks: str  # what the case list says
    target: str  # the GPU it is compiled for ("sm_90")
    shows: Callable[[str, str], bool]
    fix: str  # the sentence that says what to change


@dataclass(frozen=True)
class AtScale:
    """What the learner's kernels compile to on a problem too large for the interpreter,
    judged by the compiler alone: the learner's function is called on :attr:`problem`'s
    tensors with every launch noted and skipped (nothing runs), each kernel written in the
    notebook is compiled ahead for :attr:`targets`, and :attr:`judge` reads their figures
    (the launches in order; none when no kernel of the learner's was launched)."""

    asks: str  # what the case list says: "compiled at 512x512x16384 float16"
    problem: Callable[[], Case]  # the tensors it is called on (their values do not matter)
    targets: tuple[str, ...]
    judge: Callable[[Sequence[Launched]], list[Goal]]

    def failed(self, said: str) -> list[Goal]:
        """The one goal when the launches could not be read: ``said`` says why."""
        return [Goal(self.asks, False, said[:300], "crashed", f"{self.asks}: {said}"[:400])]


@dataclass(frozen=True)
class Prediction:
    """An exercise whose answer is data: the value its cell binds (:attr:`name`), a
    prediction of what the compiler makes of a launch of lesson 4's kernel on a float16
    ``size^3`` product for :attr:`target`. :attr:`judge` reads the value, asking for what it
    is judged against as it needs it: ``judge(value, compiled)``, ``compiled(knobs)`` being
    the :class:`~tmm_course.compile_ahead.Compiled` of that launch (never called on a value
    that cannot be judged)."""

    name: str
    target: str
    size: int
    judge: Callable[[object, Callable[[Knobs], Compiled]], list[Goal]]


@dataclass(frozen=True)
class Goal:
    """One thing a launch is judged on beyond its values (its figures at scale, the clock):
    what it asks, whether it is met, what was seen and, when missed, the diagnosis code and
    the sentence that says what to change."""

    asks: str
    met: bool
    seen: str = ""
    code: str = "wrong_values"
    fix: str = ""


Resize = Callable[[tuple[int, ...]], tuple[int, ...]]


def same(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The check's sizes, as the exercise lists them."""
    return sizes


def secret_sizes(gen: torch.Generator) -> Resize:
    """Sizes of the same kind as the listed ones, drawn from ``gen``: 1 stays 1, a multiple
    of :data:`BLOCK` becomes another one, any other size another ragged one near it. Sizes
    keep their order: equal sizes stay equal (a square case stays square) and unequal ones
    unequal, the smaller still the smaller (a 64 x 128 case never turns square, where a kernel
    that swaps M and N would pass), so each case keeps what it tests."""
    drawn: dict[int, int] = {}

    def draw(size: int, widen: int) -> int:
        if size % BLOCK == 0:
            blocks = torch.randint(1, max(2, size // BLOCK) + 2 + widen, (1,), generator=gen)
            return BLOCK * int(blocks)
        low, high = max(2, size // 2), size + size // 2 + 2 + widen * BLOCK
        value = int(torch.randint(low, high, (1,), generator=gen))
        return value + 1 if value % BLOCK == 0 else value

    def in_order(size: int, value: int) -> bool:
        return all((size > s) == (value > v) and (size < s) == (value < v)
                   for s, v in drawn.items())  # fmt: skip

    def pick(size: int) -> int:
        if size <= 1:
            return size
        if size not in drawn:
            value = draw(size, 0)
            for attempt in range(1, 200):  # widen the range until the order can be kept
                if in_order(size, value):
                    break
                value = draw(size, attempt // 8)
            drawn[size] = value if in_order(size, value) else size
        return drawn[size]

    def resize(sizes: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(pick(s) for s in sizes)

    return resize


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed`` (any int)."""
    gen = torch.Generator()
    gen.manual_seed(seed % (2**63))
    return gen


def fresh_generator() -> torch.Generator:
    """A generator seeded from torch's global one: fresh on every call, repeatable under
    ``torch.manual_seed``."""
    return generator(int(torch.randint(0, 2**62, (1,))))


def randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)
