"""A time limit for the cases of a check: a kernel that never finishes must not hang the notebook.

On the interpreter a kernel is Python, run one program after another, so a timer signal
(``SIGALRM``, every half second) can stop it between two numpy operations. Both limits count
work, not the wall clock, so a loaded machine or a slow laptop gives the same verdict as an
idle one, only later:

- one *program* may run for :data:`PROGRAM_SECONDS` of CPU time (the memory guard notes which
  program each load and store belongs to, :func:`note_program`; the CPU time is that of the
  thread that runs it, the main thread or a worker thread a launcher starts its kernels from),
  however many programs came before it: a long K loop makes progress, a loop whose counter
  never advances does not;
- a whole *case* may make :data:`CASE_OPERATIONS` loads and stores (each ``tl.load`` or
  ``tl.store`` of a program counts one, whatever its lanes): a launch of many short programs,
  one per cell or a grid of fixed size, ends there.

Where there is no such signal (Windows) or the check does not run on the main thread, cases
run without a limit.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

PROGRAM_SECONDS = 20.0  # one program of a check's case needs well under a second
# a whole case: lesson 4's matmul with one program per output cell and 16 lanes of K a load
# makes about 140,000 on its longest case (16x16 cells, K = 4096)
CASE_OPERATIONS = 1_000_000
TICK_SECONDS = 0.5


class CaseTimedOut(BaseException):
    """A case ran past its time limit (a BaseException, so a learner's ``except Exception``
    cannot swallow it)."""

    def __init__(self, limit: str, program: tuple[int, ...] | None) -> None:
        self.limit = limit  # "20 s of CPU time", "1,000,000 loads and stores"
        self.program = program
        where = f"program {program}" if program is not None else "the case"
        super().__init__(f"{where} did not finish within {limit}")


def _cpu_seconds(thread: int) -> float | None:
    """The CPU time of the thread ``thread`` (an ident), from any thread; None when it cannot
    be read (no such clock here, or the thread has ended)."""
    if thread == threading.get_ident():
        return time.thread_time()
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread))
    except (AttributeError, OSError):
        return None


class _Clock:
    """Which program runs now, in which thread and since when (that thread's CPU time), and
    how many loads and stores the case has made."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.since = time.thread_time()
        self.started = {self.thread: self.since}  # thread -> its CPU time when first seen
        self.last = dict(self.started)  # thread -> its CPU time when last read
        self.program: tuple[int, ...] | None = None
        self.operations = 0  # loads and stores of the case so far

    def note(self, program: tuple[int, ...]) -> None:
        self.operations += 1
        thread = threading.get_ident()
        if program != self.program or thread != self.thread:
            self.program, self.thread, self.since = program, thread, time.thread_time()
            self.started.setdefault(thread, self.since)

    def _now(self, thread: int) -> float:
        seconds = _cpu_seconds(thread)
        if seconds is not None:
            self.last[thread] = seconds
        return self.last.get(thread, self.started.get(thread, 0.0))

    def program_seconds(self) -> float:
        return self._now(self.thread) - self.since


_CLOCK: _Clock | None = None


def note_program(program: tuple[int, ...]) -> None:
    """Called by the memory guard on every load and store: ``program`` is running."""
    if _CLOCK is not None:
        _CLOCK.note(program)


def can_limit() -> bool:
    """Whether this process can stop a case that runs too long."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_limit(on: bool = True) -> Iterator[None]:
    """Raise :class:`CaseTimedOut` inside the block once one program has run for
    :data:`PROGRAM_SECONDS` of CPU time, or the block has made :data:`CASE_OPERATIONS` loads
    and stores."""
    global _CLOCK
    if not on or not can_limit():
        yield
        return
    clock = _Clock()
    program_seconds, case_operations = PROGRAM_SECONDS, CASE_OPERATIONS

    def tick(signum, frame):  # the handler runs on the main thread
        if clock.program_seconds() > program_seconds:
            raise CaseTimedOut(f"{program_seconds:g} s of CPU time", clock.program)
        if clock.operations > case_operations:
            raise CaseTimedOut(f"{case_operations:,} loads and stores", None)

    previous, outer = signal.signal(signal.SIGALRM, tick), _CLOCK
    _CLOCK = clock
    signal.setitimer(signal.ITIMER_REAL, TICK_SECONDS, TICK_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _CLOCK = outer
