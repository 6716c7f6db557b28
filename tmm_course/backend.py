"""Choose compiled Triton or Triton's interpreter, before any kernel is decorated.

Triton reads ``TRITON_INTERPRET`` when ``@triton.jit`` runs, so this module must set it
before any kernel module is imported. ``tmm_course/__init__.py`` calls :func:`choose` first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

BACKEND_VARIABLE = "TMM_BACKEND"
GPU = "gpu"
INTERPRETER = "interpreter"
_AUTO = ("", "auto")


class BackendError(RuntimeError):
    """The requested backend cannot be used on this machine."""


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "on", "yes")


def choose(environ: Mapping[str, str], cuda_available: Callable[[], bool]) -> str:
    """Return ``"gpu"`` or ``"interpreter"`` from ``TMM_BACKEND`` and the hardware.

    Unset (or ``auto``): compiled Triton on a CUDA GPU, else the interpreter; a
    ``TRITON_INTERPRET=1`` already in the environment is honoured.
    """
    requested = environ.get(BACKEND_VARIABLE, "").strip().lower()
    if requested not in (*_AUTO, GPU, INTERPRETER):
        raise BackendError(
            f"{BACKEND_VARIABLE}={environ[BACKEND_VARIABLE]!r} is not a backend. "
            f"Expected '{GPU}', '{INTERPRETER}' or 'auto' (the default). "
            f"Fix: unset it, or run `%env {BACKEND_VARIABLE}={INTERPRETER}` before "
            "`import tmm_course` and restart the kernel."
        )
    if requested == INTERPRETER:
        return INTERPRETER
    if requested == GPU:
        if not cuda_available():
            raise BackendError(
                f"{BACKEND_VARIABLE}=gpu, but PyTorch sees no CUDA GPU on this machine. "
                "Expected an NVIDIA GPU with a CUDA build of torch. Fix: unset "
                f"{BACKEND_VARIABLE} to run on the CPU with Triton's interpreter, or on "
                "Colab pick Runtime > Change runtime type > GPU."
            )
        return GPU
    if _flag(environ.get("TRITON_INTERPRET")):
        return INTERPRETER
    return GPU if cuda_available() else INTERPRETER


_chosen: list[str] = []  # the backend import tmm_course chose (see remember)


def remember(backend: str) -> None:
    """Keep ``backend`` as the one ``import tmm_course`` chose, for :func:`chosen`."""
    _chosen[:] = [backend]


def chosen() -> str | None:
    """The backend ``import tmm_course`` chose, or None before it ran."""
    return _chosen[-1] if _chosen else None


def apply(backend: str, environ: dict[str, str] | os._Environ = os.environ) -> None:
    """Set ``TRITON_INTERPRET`` so that kernels decorated from now on use ``backend``."""
    if backend == INTERPRETER:
        environ["TRITON_INTERPRET"] = "1"
    else:
        environ.pop("TRITON_INTERPRET", None)


def require_fresh_triton(backend: str, modules: Mapping[str, object]) -> None:
    """On the interpreter, Triton must not have been imported before the backend was chosen:
    its own helpers (``tl.zeros``, ``tl.cdiv``, ...) were then compiled for a GPU and fail
    inside interpreted kernels with "Cannot call @triton.jit'd outside of the scope of a kernel"."""
    language = modules.get("triton.language")
    if backend != INTERPRETER or language is None:
        return
    if type(getattr(language, "zeros", None)).__name__ == "JITFunction":
        raise BackendError(
            "triton was imported before tmm_course, so Triton set itself up for a GPU, but this "
            "machine runs kernels on the interpreter. Expected `import tmm_course` before "
            "`import triton`. Fix: restart the kernel and make `import tmm_course` the first "
            "import (or set TRITON_INTERPRET=1 before Python starts)."
        )


def device_for(backend: str) -> str:
    """The torch device that tensors for ``backend`` live on."""
    return "cuda" if backend == GPU else "cpu"


def skip_dead_overflow_checks() -> None:
    """Triton's interpreter computes an overflow check for every integer add, subtract and
    multiply of a kernel (both sides cast to int64, the result compared with the bounds), then
    drops it: its options never turn debug on, and without debug the assertion is not made
    (Triton 3.6 to 3.9). That dead work is about a tenth of an interpreted transpose or matmul;
    from here on it is skipped. Integers wrap as before, as on a GPU."""
    import dataclasses

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if not builder.options.debug:
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)


def autotune_by_the_clock(backend: str) -> None:
    """On the interpreter, ``@triton.autotune`` without a ``do_bench`` of its own times each
    configuration by the wall clock of one call: Triton's own benchmarker asks the GPU's
    driver, and without a GPU every autotuned launch raised "0 active drivers" (Triton 3.6
    and 3.9 alike). On a GPU Triton's benchmarker stays."""
    if backend != INTERPRETER:
        return
    import functools
    import time

    from triton.runtime.autotuner import Autotuner

    def one_call(fn: Callable[[], object], quantiles=None, **_: object):
        start = time.perf_counter()
        fn()
        ms = (time.perf_counter() - start) * 1e3
        return [ms] * len(quantiles) if quantiles else ms

    def do_bench(self):
        return one_call if self._do_bench is None else self._do_bench

    timed = functools.cached_property(do_bench)
    timed.__set_name__(Autotuner, "do_bench")
    Autotuner.do_bench = timed
