"""Compile a Triton kernel ahead of time for a named NVIDIA GPU, on any machine.

Triton's compiler runs on the CPU: given a kernel, the types of its arguments and its
``tl.constexpr`` values, ``triton.compile`` produces the GPU's real intermediate code, PTX and
binary (``ptxas`` ships inside the Triton wheel), with no GPU in the machine. That is how the
course answers "would a GPU accept this kernel, and what would it run?" without a rule written by
hand: the compiler's own verdict, shared memory, registers and instructions, per GPU.

    from tmm_course.compile_ahead import compile_for, specialize
    launch = specialize(kernel, (a, b, c, M, N, K, ...), {"BLOCK_M": 64, ...})
    compiled = compile_for(kernel, launch, "sm_80", num_warps=4, num_stages=3)
    compiled.ok, compiled.error, compiled.shared_bytes, compiled.registers, compiled.matrix_unit
    compiled.spilled_bytes, compiled.tensor_memory, compiled.occupancy.programs

Works on the interpreter too: the kernel (and every kernel it calls) is compiled from its source.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
import types
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import triton

from tmm_course import gpus

# the GPUs the course names (tmm_course.gpus.TARGETS), by the compute capability Triton compiles for
GPUS: dict[str, int] = {target: int(target.removeprefix("sm_")) for target in gpus.TARGETS}
GPU_NAMES: dict[str, str] = {target: gpus.described(target) for target in gpus.TARGETS}

_POINTER_TYPES: dict[torch.dtype, str] = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.float8_e4m3fn: "fp8e4nv",
    torch.float8_e5m2: "fp8e5",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "i1",
}


@dataclass(frozen=True)
class Occupancy:
    """How many programs (blocks) of one kernel an SM holds at once, and what each resource
    alone would allow: ``programs`` is the smallest, ``limited_by`` names it."""

    programs: int
    by_registers: int
    by_shared: int
    by_warps: int
    limited_by: str  # "registers", "shared memory", "warps" or "tensor memory": the fewest
    by_tensor_memory: int | None = None  # None: the kernel holds no tensor memory

    def summary(self) -> str:
        held = (
            f"registers allow {self.by_registers}, shared memory {self.by_shared}, "
            + (f"tensor memory {self.by_tensor_memory}, " if self.by_tensor_memory is not None
               else "")
            + f"warps {self.by_warps}"
        )  # fmt: skip
        if not self.programs:
            return f"no program fits on an SM ({self.limited_by} allow none: {held})"
        return (
            f"{self.programs} program{'s' * (self.programs != 1)} per SM (limited by "
            f"{self.limited_by}: {held})"
        )


def occupancy(
    gpu: str, registers: int, shared_bytes: int, num_warps: int, tensor_memory: int = 0
) -> Occupancy:
    """Programs per SM of a kernel with ``registers`` per thread, ``shared_bytes`` per program,
    ``num_warps`` warps and ``tensor_memory`` columns of tensor memory, on ``gpu``, as the CUDA
    occupancy calculator counts them: registers go to each warp in steps of 256 and a warp lives
    in one quarter of the SM's register file; shared memory goes in steps, with the driver's
    reserve per program; tensor memory (Blackwell's 10.x) in powers of two of at least 32
    columns, of the SM's 512 (the figures: :mod:`tmm_course.gpus`)."""
    limits = gpus.for_target(gpu)
    per_warp = -(-registers * 32 // 256) * 256
    quarter = limits.registers // 4
    warps_by_registers = 4 * (quarter // per_warp) if per_warp else limits.warps
    by_registers = warps_by_registers // num_warps
    unit = limits.shared_unit
    per_program = -(-(shared_bytes + limits.reserved_shared) // unit) * unit
    by_shared = limits.shared_per_sm // per_program if per_program else limits.programs
    by_warps = min(limits.warps // num_warps, limits.programs)
    found = {"registers": by_registers, "shared memory": by_shared, "warps": by_warps}
    if tensor_memory:
        columns = max(32, 1 << (tensor_memory - 1).bit_length())  # what tcgen05.alloc hands out
        found["tensor memory"] = limits.tensor_memory // columns
    programs = min(found.values())
    limited_by = min(found, key=found.get)
    return Occupancy(programs, by_registers, by_shared, by_warps, limited_by,
                     found.get("tensor memory"))  # fmt: skip


@dataclass(frozen=True)
class Compiled:
    """What the compiler made of one kernel for one GPU (``ok`` False: ``error`` says why)."""

    gpu: str
    ok: bool
    error: str | None = None
    shared_bytes: int | None = None
    registers: int | None = None
    spilled_bytes: int | None = None  # per thread, the binary's stack: registers spilled
    matrix_unit: str | None = None  # a key of tmm_course.gpus.MATRIX_UNITS: "tcgen05", "wgmma",
    # "mma" (tensor cores), "fma" (none), "none" (no tl.dot)
    tensor_memory: int | None = None  # columns of tensor memory a program allocates (10.x)
    scratch_bytes: int | None = None  # global memory a launch asks the allocator for
    ptx: str = ""
    ttgir: str = ""
    num_warps: int = 4
    ttir: str = ""

    @property
    def occupancy(self) -> Occupancy | None:
        """Programs per SM from registers, shared memory and warps (None: not compiled, or
        no ``cuobjdump`` to read the registers with)."""
        if not self.ok or self.registers is None or self.shared_bytes is None:
            return None
        return occupancy(
            self.gpu, self.registers, self.shared_bytes, self.num_warps, self.tensor_memory or 0
        )

    @property
    def gpu_name(self) -> str:
        return GPU_NAMES.get(self.gpu, self.gpu)

    def figures(self) -> dict[str, Any]:
        """The figures as plain data (the compiler's texts left out): what a worker sends."""
        return {name: getattr(self, name) for name in FIGURES}

    @classmethod
    def of_figures(cls, data: Mapping[str, Any]) -> Compiled:
        """The :class:`Compiled` whose :meth:`figures` are ``data``."""
        return cls(**{name: data[name] for name in FIGURES if name in data})

    def summary(self) -> str:
        """One line for a learner: the verdict, and what the GPU would run."""
        if not self.ok:
            return f"{self.gpu}: refused by the compiler: {self.error}"
        held = self.occupancy
        # a thread may hold 255 registers; a spill below that is ptxas's choice of local memory
        below = self.spilled_bytes and self.registers and self.registers < 255
        chose = " (to local memory, though a thread may have 255 registers)" if below else ""
        return (
            f"{self.gpu}: compiles; {self.shared_bytes / 1024:.1f} KB shared memory, "
            f"{self.registers} registers per thread, {self.spilled_bytes} bytes spilled{chose}, "
            + (f"{self.tensor_memory} columns of tensor memory, " if self.tensor_memory else "")
            + f"tl.dot on {gpus.MATRIX_UNITS[self.matrix_unit or 'none']}"
            + (f"; {held.summary()}" if held else "")
        )


@dataclass(frozen=True)
class Launched:
    """One launch of a learner's kernel as the compiler saw it, not run: the kernel's name,
    its grid, the integer ``tl.constexpr`` values and launch options it was given, and what it
    compiled to for each GPU (:class:`~tmm_course.compile_ahead.Compiled`, by target)."""

    kernel: str
    grid: tuple[int, int, int]
    constants: Mapping[str, int]
    num_warps: int
    num_stages: int
    compiled: Mapping[str, Compiled]

    @property
    def programs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def data(self) -> dict[str, Any]:
        """Plain data (what the grader's worker sends): :meth:`of_data` reads it back."""
        return {"kernel": self.kernel, "grid": list(self.grid), "constants": dict(self.constants),
                "num_warps": self.num_warps, "num_stages": self.num_stages,
                "compiled": {t: c.figures() for t, c in self.compiled.items()}}  # fmt: skip

    @classmethod
    def of_data(cls, data: Mapping[str, Any]) -> Launched:
        g = [int(x) for x in data["grid"]]
        return cls(str(data["kernel"]), (g[0], g[1], g[2]),
                   {str(k): int(v) for k, v in data["constants"].items()},
                   int(data["num_warps"]), int(data["num_stages"]),
                   {str(t): Compiled.of_figures(c)
                    for t, c in data["compiled"].items()})  # fmt: skip


# the fields of a Compiled that are figures (the rest are the compiler's texts)
FIGURES = ("gpu", "ok", "error", "shared_bytes", "registers", "spilled_bytes", "matrix_unit",
           "scratch_bytes", "num_warps", "tensor_memory")  # fmt: skip


def _type_of(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        if value.dtype not in _POINTER_TYPES:
            raise TypeError(f"no Triton pointer type for a {value.dtype} tensor")
        return "*" + _POINTER_TYPES[value.dtype]
    if hasattr(value, "block_shape") and isinstance(getattr(value, "base", None), torch.Tensor):
        block = ", ".join(str(size) for size in value.block_shape)  # a host tensor descriptor
        return f"tensordesc<{_type_of(value.base)[1:]}[{block}]>"
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(
        f"cannot compile ahead for an argument of type {type(value).__name__}: expected a "
        "tensor, a tensor descriptor, an int, a float or a bool"
    )


def _python_function(kernel: Any) -> types.FunctionType:
    """The Python function under a ``@triton.jit`` kernel (compiled or interpreted)."""
    fn = getattr(kernel, "fn", kernel)
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"expected a @triton.jit kernel, got {type(kernel).__name__}")
    return fn


def _as_jit(kernel: Any, seen: dict[int, Any] | None = None) -> triton.runtime.JITFunction:
    """A compilable ``JITFunction`` of ``kernel``, whatever backend decorated it.

    On the interpreter every ``@triton.jit`` function is an ``InterpretedFunction``, which the
    compiler does not take; the kernel and each kernel it calls are rebuilt from their source.
    """
    if isinstance(kernel, triton.runtime.JITFunction):
        return kernel
    seen = {} if seen is None else seen
    fn = _python_function(kernel)
    if id(fn) in seen:
        return seen[id(fn)]
    names = fn.__code__.co_names
    needs = {
        name: value
        for name, value in fn.__globals__.items()
        if name in names and _is_interpreted(value)
    }
    if not needs:
        jit = triton.runtime.JITFunction(fn)
        seen[id(fn)] = jit
        return jit
    scope = dict(fn.__globals__)
    rebuilt = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    rebuilt.__module__ = fn.__module__
    rebuilt.__qualname__ = fn.__qualname__
    rebuilt.__annotations__ = dict(fn.__annotations__)
    rebuilt.__kwdefaults__ = fn.__kwdefaults__
    jit = triton.runtime.JITFunction(rebuilt)
    seen[id(fn)] = jit
    for name, value in needs.items():
        scope[name] = _as_jit(value, seen)
    return jit


def _is_interpreted(value: Any) -> bool:
    return type(value).__name__ == "InterpretedFunction"


# id of a Triton library function's Python function -> its compilable JITFunction
_LIBRARY: dict[int, Any] = {}


@contextlib.contextmanager
def _compiler_view() -> Iterator[None]:
    """Give the compiler Triton's language as it was before the interpreter touched it.

    On the interpreter, Triton's own ``@jit`` library functions (``tl.zeros``, ``tl.cdiv``,
    ...) are interpreted ones, which the compiler cannot call; and a kernel that has run leaves
    some of ``triton.language.core``'s functions replaced by the interpreter's (a call into a
    library function patches that module and never restores it). For the duration of a compile,
    both are put back as the compiler needs them; afterwards everything is left as it was."""
    swapped: list[tuple[Any, str, Any]] = []
    seen = _LIBRARY  # Triton's own functions live as long as the process: rebuilt once
    language = sys.modules.get("triton.language")
    owners: list[Any] = [
        m for name, m in list(sys.modules.items()) if name.startswith("triton.language")
    ]
    core = sys.modules.get("triton.language.core")
    owners += [
        getattr(core, cls) for cls in ("tensor", "tensor_descriptor_base") if hasattr(core, cls)
    ]
    try:
        for owner in owners:
            for name, value in list(vars(owner).items()):
                if _is_interpreted(value):
                    replacement = _as_jit(value, seen)
                elif _is_interpreter_patch(value):
                    replacement = _unpatched(name, value, language)
                    if replacement is None:
                        continue
                else:
                    continue
                swapped.append((owner, name, value))
                setattr(owner, name, replacement)
        yield
    finally:
        for owner, name, value in reversed(swapped):
            setattr(owner, name, value)


def _is_interpreter_patch(value: Any) -> bool:
    qualname = getattr(value, "__qualname__", "")
    return isinstance(qualname, str) and qualname.startswith("_patch") and "<locals>" in qualname


def _unpatched(name: str, value: Any, language: Any) -> Any:
    """The function the interpreter's patch replaced, where it can be found."""
    while _is_interpreter_patch(value) and "member" in (
        getattr(value, "__kwdefaults__", None) or {}
    ):
        value = value.__kwdefaults__["member"]
    if not _is_interpreter_patch(value):
        return value
    original = getattr(language, name, None) if language is not None else None
    return None if original is None or _is_interpreter_patch(original) else original


def parameters(kernel: Any) -> list[tuple[str, bool]]:
    """(name, is constexpr) for each parameter of the kernel, in order."""
    fn = _python_function(kernel)
    if fn not in _PARAMETERS:
        _PARAMETERS[fn] = [(p.name, bool(p.is_constexpr)) for p in _as_jit(kernel).params]
    return _PARAMETERS[fn]


_PARAMETERS: dict[types.FunctionType, list[tuple[str, bool]]] = {}


@dataclass(frozen=True)
class Specialization:
    """What the compiler is told about one launch: the type of each argument, the constexpr
    values, and which pointers and integers are multiples of 16 (as a real launch tells it, so
    that loads are vectorised and pipelined the same way)."""

    signature: dict[str, str]
    constexprs: dict[str, Any]
    divisible_by_16: tuple[int, ...] = ()

    def key(self) -> tuple:
        return (
            tuple(self.signature.items()),
            tuple((name, repr(value)) for name, value in self.constexprs.items()),
            self.divisible_by_16,
        )


def specialize(
    kernel: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None
) -> Specialization:
    """The compiler's view of a launch ``kernel[grid](*args, **kwargs)``.

    As Triton's launcher does, an integer equal to 1 becomes a constant, and a pointer or
    integer that is a multiple of 16 is marked so. Launch options (``num_warps``,
    ``num_stages``) in ``kwargs`` are left out: pass them to :func:`compile_for`.
    """
    kwargs = dict(kwargs or {})
    params = parameters(kernel)
    values: dict[str, Any] = dict(zip([name for name, _ in params], args, strict=False))
    for name, _ in params[len(args) :]:
        if name in kwargs:
            values[name] = kwargs[name]
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    divisible: list[int] = []
    for index, (name, is_constexpr) in enumerate(params):
        if name not in values:
            raise TypeError(f"the launch gives no value for the kernel's argument '{name}'")
        value = values[name]
        if is_constexpr or value is None or (type(value) is int and value == 1):
            signature[name] = "constexpr"
            constexprs[name] = value
            continue
        signature[name] = _type_of(value)
        if isinstance(value, torch.Tensor):
            if value.data_ptr() % 16 == 0:
                divisible.append(index)
        elif type(value) is int and value % 16 == 0:
            divisible.append(index)
    return Specialization(signature, constexprs, tuple(divisible))


def compile_for(
    kernel: Any,
    specialization: Specialization,
    gpu: str,
    num_warps: int = 4,
    num_stages: int = 3,
) -> Compiled:
    """Compile ``kernel`` for ``gpu`` (a target of :data:`GPUS`: ``"sm_75"`` ... ``"sm_120"``)
    and report it.

    Results are cached per kernel, specialization, GPU and launch options."""
    _known(gpu)
    key = (id(_python_function(kernel)), specialization.key(), gpu, num_warps, num_stages)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = _compile(kernel, specialization, gpu, num_warps, num_stages)
    return _CACHE[key]


_CACHE: dict[tuple, Compiled] = {}
_CACHE_LIMIT = 512


def forget() -> None:
    """Forget every kernel :func:`compile_for` compiled: the next asks the compiler again."""
    _CACHE.clear()


def _known(gpu: str) -> None:
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU '{gpu}': expected one of {', '.join(GPUS)}")


def _options(num_warps: int, num_stages: int) -> dict[str, Any]:
    # fusion on, as a launch on Triton 3.6-3.9 defaults to; said so, Triton does not warn on
    # stderr (which a grader such as nbgrader counts as a failed cell)
    return {"num_warps": num_warps, "num_stages": num_stages, "enable_fp_fusion": True}


@contextlib.contextmanager
def _compiling(kernel: Any, specialization: Specialization, gpu: str) -> Iterator[tuple]:
    """(target, source): what Triton compiles ``kernel`` from for ``gpu``, inside the
    compiler's view of its language (:func:`_compiler_view`), its warnings silenced."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    with _compiler_view(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        attrs = {(i,): [["tt.divisibility", 16]] for i in specialization.divisible_by_16}
        source = ASTSource(
            _as_jit(kernel),
            specialization.signature,
            constexprs=specialization.constexprs,
            attrs=attrs,
        )
        yield GPUTarget("cuda", GPUS[gpu], 32), source


def _compile(
    kernel: Any,
    specialization: Specialization,
    gpu: str,
    num_warps: int,
    num_stages: int,
) -> Compiled:
    try:
        with _compiling(kernel, specialization, gpu) as (target, source):
            options = _options(num_warps, num_stages)
            compiled = triton.compile(source, target=target, options=options)
    except Exception as error:  # the compiler's refusal is the verdict
        return Compiled(gpu=gpu, ok=False, error=compiler_message(error))
    ptx = compiled.asm.get("ptx", "")
    registers, spilled = _resource_usage(compiled.asm.get("cubin", b""))
    return Compiled(
        gpu=gpu,
        ok=True,
        shared_bytes=int(compiled.metadata.shared),
        registers=registers,
        spilled_bytes=spilled,
        matrix_unit=matrix_unit(ptx),
        scratch_bytes=int(getattr(compiled.metadata, "global_scratch_size", 0)),
        tensor_memory=int(getattr(compiled.metadata, "tmem_size", 0) or 0),
        ptx=ptx,
        ttgir=compiled.asm.get("ttgir", ""),
        # warp specialization (Blackwell) adds warps of its own: the program's real count
        num_warps=int(getattr(compiled.metadata, "num_warps", num_warps) or num_warps),
        ttir=compiled.asm.get("ttir", ""),
    )


def front_end(kernel: Any, specialization: Specialization, gpu: str, num_warps: int = 4,
              num_stages: int = 3) -> Compiled:  # fmt: skip
    """Whether Triton's front end takes ``kernel`` as specialized for ``gpu``: its code
    generation and Triton IR passes, where a constant (a size-1 integer is one) is folded and
    a kernel that divides by it or asserts on it breaks. No GPU layout, no binary: about a
    fifth of :func:`compile_for`'s time, and a result that says only ``ok`` or ``error``."""
    from triton._C.libtriton import ir
    from triton.compiler import make_backend

    _known(gpu)
    try:
        with _compiling(kernel, specialization, gpu) as (target, source):
            backend = make_backend(target)
            options = backend.parse_options(_options(num_warps, num_stages))
            context = ir.context()
            ir.load_dialects(context)
            backend.load_dialects(context)
            module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                                    backend.get_module_map(), context)  # fmt: skip
            stages: dict = {}
            backend.add_stages(stages, options, source.language)
            stages["ttir"](module, {})
    except Exception as error:  # the compiler's refusal is the verdict
        return Compiled(gpu=gpu, ok=False, error=compiler_message(error))
    return Compiled(gpu=gpu, ok=True)


def compiler_message(error: BaseException) -> str:
    """The compiler's own sentence, without the source listing Triton puts before it."""
    text = str(error).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    # Triton's CompilationError: "at L:C:", the source, a caret line, then the message
    if lines and re.match(r"^at \d+:\d+:", lines[0]):
        caret = max((i for i, line in enumerate(lines) if set(line.strip()) == {"^"}), default=-1)
        if 0 <= caret < len(lines) - 1:
            lines = lines[caret + 1 :]
    message = " ".join(lines)
    wrapped = re.fullmatch(r"\w+Error\(([\'\"])(.*)\1\)", message)
    if wrapped:  # AssertionError("the compiler's sentence")
        message = wrapped.group(2)
    cause = error.__cause__
    if cause is not None and str(cause).strip() and str(cause).strip() not in message:
        message = f"{message} ({compiler_message(cause)})" if message else compiler_message(cause)
    return message or type(error).__name__


def matrix_unit(ptx: str) -> str:
    """Which units the PTX multiplies tiles on (a key of :data:`tmm_course.gpus.MATRIX_UNITS`)."""
    if re.search(r"\btcgen05\.mma\b", ptx):
        return "tcgen05"
    if "wgmma.mma_async" in ptx:
        return "wgmma"
    if re.search(r"\bmma\.sync\b", ptx):
        return "mma"
    if re.search(r"\bfma\.rn\.f(16|32)", ptx):
        return "fma"
    return "none"


def _cuobjdump() -> Path | None:
    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return path if path.exists() else None


def _resource_usage(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers per thread, bytes spilled per thread) of a compiled binary.

    ``cuobjdump -res-usage`` reports spilled registers as the function's ``STACK`` (the bytes
    of local memory each thread's frame takes), not as ``LOCAL``, which stays 0 for them."""
    tool = _cuobjdump()
    if tool is None or not cubin:
        return None, None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        run = subprocess.run(
            [str(tool), "-res-usage", str(path)], capture_output=True, text=True, timeout=60
        )
    registers = re.search(r"REG:(\d+)", run.stdout)
    stack = re.search(r"STACK:(\d+)", run.stdout)
    return (
        int(registers.group(1)) if registers else None,
        int(stack.group(1)) if stack else None,
    )


def compile_everywhere(
    kernel: Any,
    specialization: Specialization,
    num_warps: int = 4,
    num_stages: int = 3,
    targets: Sequence[str] = tuple(GPUS),
) -> dict[str, Compiled]:
    """:func:`compile_for` for every GPU the course names (or those of ``targets``)."""
    return {gpu: compile_for(kernel, specialization, gpu, num_warps, num_stages) for gpu in targets}
