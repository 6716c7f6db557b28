"""Plain-words explanations for errors that Triton reports cryptically."""

from __future__ import annotations

from typing import Any

from triton.errors import TritonError

from tmm_course.backend import GPU, INTERPRETER
from tmm_course.ipython import current_shell

_NO_DRIVER = "active drivers"

# The slips a first launch makes, by the words Triton (3.6 to 3.9) or Python says them in, and
# the backend on which those words mean that slip: (words, backend or None for both, sentence).
NO_GRID = (
    "This kernel was called like a Python function, without a grid. A Triton kernel runs as a "
    "grid of programs, and the grid goes in square brackets before the arguments. Fix: "
    "kernel[grid](...), e.g. kernel[(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))](...), "
    "or kernel[(1,)](...) for one program."
)
NUMPY_ARRAY = (
    "A numpy array was given where a torch tensor belongs: Triton kernels (and the course's "
    "launchers) take torch tensors, whose memory and strides they read. Fix: "
    "x = torch.from_numpy(x).to(tmm_course.DEVICE), or make x with torch in the first place."
)
PYTHON_LIST = (
    "A Python list (or tuple) was given where a torch tensor belongs: a kernel reads memory, "
    "and a list has none it can address. Fix: x = torch.tensor(x, device=tmm_course.DEVICE)."
)
WRONG_DEVICE = (
    "A tensor on the CPU was given to a kernel compiled for the GPU, which cannot read the "
    "CPU's memory. Fix: x = x.to(tmm_course.DEVICE) for every tensor the kernel touches (or "
    "make them with device=tmm_course.DEVICE)."
)
DESCRIPTOR_STRIDES = (
    "A tensor descriptor was built over a tensor whose rows are not contiguous or do not start "
    "every 16 bytes: Triton says 'strides must be 16-byte aligned'. A transposed view such as "
    "w.t() is one (its last stride is not 1). Fix: describe the tensor as it lies, "
    "TensorDescriptor.from_tensor(w, [BLOCK_N, BLOCK_K]) for an N x K w, and turn its tiles in "
    "the kernel; a tensor whose rows are not whole 16 bytes needs them padded."
)
DOT_SHAPES = (
    "tl.dot(x, y) multiplies an [M, K] tile by a [K, N] one: x's last size must equal y's "
    "first. A tile loaded from the rows of an N x K tensor is [N, K]: turn it first, "
    "tl.trans(tile); otherwise a block shape (a descriptor's, or an arange's length) is not "
    "the tile you meant."
)
INT_GRID = (
    "The grid was given as a bare int, kernel[n](...): Triton wants a tuple of program counts, "
    "one per axis, even for a 1-D grid. Fix: kernel[(triton.cdiv(n, BLOCK),)](...) (the comma "
    "makes it a tuple), or a function of the meta-parameters that returns one."
)
SLIPS: tuple[tuple[str, str | None, str], ...] = (
    (NO_GRID, INTERPRETER, NO_GRID),  # raised by guard_gridless_calls
    (INT_GRID, None, INT_GRID),  # raised by tmm_course.check.launches.recording
    ("Cannot call @triton.jit'd outside of the scope of a kernel", GPU, NO_GRID),
    ("'numpy.ndarray' object has no attribute", None, NUMPY_ARRAY),
    ("'list' object has no attribute", None, PYTHON_LIST),
    ("'tuple' object has no attribute", None, PYTHON_LIST),
    ("cannot be accessed from Triton (cpu tensor?)", GPU, WRONG_DEVICE),
    ("strides must be 16-byte aligned", None, DESCRIPTOR_STRIDES),
    ("input and other must have equal reduction dimensions", None, DOT_SHAPES),  # Triton 3.9
    ("are not compatible for matmul", None, DOT_SHAPES),  # Triton 3.6
)


def slip(error: BaseException, backend: str) -> str | None:
    """The plain sentence for a first-timer's slip (no grid, numpy or a list for a tensor, a
    tensor on the wrong device) that ``error`` says in Triton's words, or None."""
    texts = []
    while error is not None and len(texts) < 8:  # the error and what it was raised from
        texts.append(f"{type(error).__name__}: {error}")
        error = error.__cause__ or error.__context__
    for words, where, sentence in SLIPS:
        if (where is None or where == backend) and any(words in text for text in texts):
            return sentence
    return None


def explain(error: BaseException, backend: str) -> str | None:
    """A sentence or two for a learner about ``error``, or None if we have nothing to add."""
    text = str(error)
    if _NO_DRIVER in text and backend == INTERPRETER:
        return (
            "This kernel was compiled for a GPU, but this machine has none. Triton decides "
            "between the GPU and its CPU interpreter when `@triton.jit` runs, and this kernel "
            "was decorated before `import tmm_course` chose the interpreter. Fix: restart the "
            "kernel and run the cells from the top, so that `import tmm_course` comes before "
            "any `@triton.jit`."
        )
    if "outside of the scope of a kernel" in text and backend == INTERPRETER:
        return (
            "Triton was imported before `import tmm_course`, so its helpers (tl.zeros, ...) were "
            "set up for a GPU while your kernels run on the interpreter. Fix: restart the kernel "
            "and make `import tmm_course` the first import."
        )
    if (said := slip(error, backend)) is not None:
        return said
    if "only 0-dimensional arrays can be converted" in text and backend == INTERPRETER:
        return (
            "This Triton interpreter does not work with numpy >= 2.4 when a loop bound is a "
            "runtime integer. Fix: pip install 'numpy<2.4' (or 'triton>=3.7') and restart."
        )
    return None


def guard_gridless_calls(backend: str) -> bool:
    """On the interpreter, a kernel called without a grid runs as a device function on the
    host's tensors and fails deep inside Triton, in words that change from version to version
    ('grid_idx', 'is_ptr', 'scalar'). A device function called from a kernel never receives a
    torch tensor (the launch turns every tensor into a pointer), so one that does was called
    from Python without ``[grid]``: say so, with the fix."""
    if backend != INTERPRETER:
        return False
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    original = InterpretedFunction.__call__
    if getattr(original, "guards_gridless_calls", False):
        return True

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if any(isinstance(value, torch.Tensor) for value in (*args, *kwargs.values())):
            raise TypeError(f"{self.__name__}: {NO_GRID}")
        return original(self, *args, **kwargs)

    __call__.guards_gridless_calls = True  # type: ignore[attr-defined]
    InterpretedFunction.__call__ = __call__
    return True


def install_ipython_hint(backend: str) -> bool:
    """Inside IPython/Jupyter, append :func:`explain`'s words to matching tracebacks."""
    shell = current_shell()
    if shell is None:
        return False

    def handler(self: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None):
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)
        hint = explain(value, backend)
        if hint:
            print(f"\ntmm_course: {hint}")

    # Triton's interpreter wraps what it meets in InterpreterError; Python says AttributeError
    shell.set_custom_exc(
        (RuntimeError, TypeError, ValueError, AttributeError, TritonError), handler
    )
    return True
