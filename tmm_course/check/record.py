"""The kernels a launcher launched, as plain data, and their replay on tensors the judge owns.

A verdict is what the learner's kernels compute when the judge launches them itself. The
launcher runs once, only to show which ``@triton.jit`` kernels it launches, with what grid,
constexprs, scalars and tensors; then the judge launches those kernels in the same order on
fresh inputs of its own, every buffer the launcher made refilled with poison, and judges what
they stored. Work the launcher did in torch or numpy, an answer handed in as an argument, a
cache, a hook: none of it reaches the judged output.

In one process (the learner's check)::

    recorder = Recorder({"a": a, "b": b, "c": c})  # the case's tensors by name, output last
    with launches.recording() as seen:
        seen.listeners.append(recorder.note)
        launcher(a, b, c)
    data = recorder.record()                       # plain data: json.dumps(data) works
    replay(data, {"a": a2, "b": b2, "c": c2}, recorder.kernels)

A worker that only records: ``data = recorded(lambda: launcher(a, b, c), {"a": a, ...})``.

From another process (the batch grader: the worker records, the judge replays), ship
``json.dumps(data)``; the judge rebuilds every kernel from the source the record carries and
replays on tensors it drew itself::

    data = json.loads(text)
    kernels = rebuild(data)                        # key -> @triton.jit kernel, from source
    replay(data, {"a": a2, "b": b2, "c": c2}, kernels)

The record (``data``), version 1::

    {"version": 1,
     "tensors": ["a", "b", "c"],                     # the case's tensors, output last
     "launches": [{"kernel": KEY, "grid": [g0, g1, g2],
                   "args": [VALUE, ...], "kwargs": {"BLOCK_M": VALUE, "num_warps": VALUE},
                   "hooks": {"zero": ["c"], "restore": ["c"]}}],  # @triton.autotune's
                   # reset_to_zero (before the launch) and restore_value (after it), by name
     "buffers": [{"bytes": 4096, "dtype": "float32",
                  "fill": {"kind": "poison"}
                        | {"kind": "constant", "value": 0.0}
                        | {"kind": "copy", "of": "a", "layout": "same",
                           "view": VIEW}}],            # a .clone() / .float() / .t() copy
     "host_work": true,                              # optional: the launcher may stage
                                                     # inputs (the course's own launchers)
     "kernels": {KEY: {"name": "my_kernel", "module": "__main__", "file": "...",
                       "course": false,               # shipped with tmm_course
                       "source": "def my_kernel(...):\\n ...",
                       "calls": [KEY, ...],           # @triton.jit functions it calls
                       "globals": {"BLOCK": {"constexpr": 64}, "tl": {"module": "..."}}}}}

    VALUE: {"tensor": {"case": "a", "byte_offset": 0, "shape": [...], "strides": [...],
                       "dtype": "float16"}}        # a case tensor or a view of one
         | {"tensor": {"buffer": 0, "byte_offset": 0, "shape": [...], "strides": [...],
                       "dtype": "float32"}}        # memory the launcher allocated
         | {"descriptor": {"base": VALUE, "shape": [...], "strides": [...],
                           "block_shape": [...], "padding": "zero"}}
         | {"int": 7} | {"float": 1.5} | {"bool": true} | {"none": null} | {"str": "while"}
         | {"tl_dtype": "fp16"} | {"tuple": [VALUE, ...]}     # a tuple (a constexpr, say)

Floats that are not finite are written as strings ("nan", "inf", "-inf").
"""

from __future__ import annotations

import inspect
import math
import re
import textwrap
import types
from collections.abc import Callable, Mapping
from typing import Any

import torch

from tmm_course.check import launches
from tmm_course.check.launches import Launch, from_the_course, grid_of

VERSION = 1
# modules a kernel's source may name, rebuilt by name in the judge's process
MODULES = ("triton", "triton.language", "math")
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "debug")
POISON_INT = -(2**30)  # what an integer buffer holds at replay: far from any index


class Unrecordable(TypeError):
    """A launch the record cannot describe as plain data (an argument of an unknown type)."""


def layout(copy: torch.Tensor, of: torch.Tensor) -> str:
    """How a copy holding ``of``'s values lies: ``"same"`` (its strides, on every axis longer
    than one; a contiguous copy of a contiguous input), else ``"other"`` (permuted, or
    gathered from a strided view)."""
    moved = [a != b for a, b, n in zip(copy.stride(), of.stride(), of.shape, strict=True) if n > 1]
    return "other" if any(moved) else "same"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _from_number(value: float | str) -> float:
    return float(value)


def _storage(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def _geometry(t: torch.Tensor, base_byte: int) -> dict:
    return {
        "byte_offset": t.storage_offset() * t.element_size() - base_byte,
        "shape": list(t.shape),
        "strides": list(t.stride()),
        "dtype": _dtype_name(t.dtype),
    }


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def _is_jit(value: object) -> bool:
    return type(value).__name__ in ("JITFunction", "InterpretedFunction") and hasattr(value, "fn")


def _source(fn: types.FunctionType) -> str:
    """The kernel's source from its ``def`` on (decorators left out)."""
    text = textwrap.dedent(inspect.getsource(fn))
    start = re.search(r"^def\s+\w+\s*\(", text, re.MULTILINE)
    return text[start.start() :] if start else text


class Recorder:
    """Describes every launch it is told of (:meth:`note`, a :class:`Launches` listener) as
    plain data, against the case's tensors ``tensors`` (by name, the output last)."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], host_work: bool = False) -> None:
        self.tensors = dict(tensors)
        self.host_work = host_work  # copies in every layout kept at replay (course launchers)
        self.launches: list[dict] = []
        self.buffers: list[dict] = []
        self.sources: dict[str, dict] = {}
        self.kernels: dict[str, Any] = {}  # key -> the live kernel, in this process
        self.problem: str | None = None  # why a launch could not be recorded
        self._buffer_of: dict[int, int] = {}  # storage address -> buffer index
        self._key_of: dict[int, str] = {}  # id(python function) -> key
        self._case = {_storage(t)[0]: (name, t) for name, t in self.tensors.items()}

    # --- recording -----------------------------------------------------------------------
    def note(self, launch: Launch) -> None:
        """Describe ``launch`` (called just before it runs, so buffers hold what it gets)."""
        if self.problem is not None:
            return
        try:
            self.launches.append(self._launch(launch))
        except Unrecordable as error:
            self.problem = str(error)

    def record(self) -> dict:
        """Everything noted, as plain data (see the module's docstring)."""
        return {
            "version": VERSION,
            "tensors": list(self.tensors),
            "launches": list(self.launches),
            "buffers": list(self.buffers),
            "kernels": dict(self.sources),
            **({"host_work": True} if self.host_work else {}),
        }

    def _launch(self, launch: Launch) -> dict:
        kernel = launch.jit
        key = self._kernel(kernel)
        kwargs = dict(launch.kwargs)
        try:  # a parameter left to its default is written out: the replay names it
            given = launches.arguments(launch)
        except TypeError:
            given = {}
        for name, value in list(given.items())[len(launch.args) :]:
            kwargs.setdefault(name, value)
        found = {
            "kernel": key,
            "grid": self._grid(launch),
            "args": [self._value(a) for a in launch.args],
            "kwargs": {k: self._value(v) for k, v in kwargs.items()},
        }
        if launch.hooks:
            found["hooks"] = {k: [str(n) for n in v] for k, v in launch.hooks.items()}
        return found

    def _grid(self, launch: Launch) -> list[int]:
        try:
            return list(grid_of(launch))
        except ValueError as error:
            raise Unrecordable(str(error)) from error

    def _value(self, value: object) -> dict:
        if isinstance(value, torch.Tensor):
            return {"tensor": self._tensor(value)}
        if hasattr(value, "block_shape") and isinstance(getattr(value, "base", None), torch.Tensor):
            return {
                "descriptor": {
                    "base": self._value(value.base),
                    "shape": [int(s) for s in value.shape],
                    "strides": [int(s) for s in value.strides],
                    "block_shape": [int(s) for s in value.block_shape],
                    "padding": getattr(value, "padding", "zero"),
                }
            }
        if value is None:
            return {"none": None}
        if isinstance(value, bool):
            return {"bool": value}
        if isinstance(value, int) or (hasattr(value, "dtype") and _integer_scalar(value)):
            return {"int": int(value)}  # type: ignore[call-overload]
        if isinstance(value, float) or _float_scalar(value):
            return {"float": _number(float(value))}  # type: ignore[arg-type]
        if isinstance(value, str):
            return {"str": value}
        if isinstance(value, tuple):
            return {"tuple": [self._value(v) for v in value]}
        if type(value).__name__ == "dtype" and type(value).__module__.startswith("triton"):
            return {"tl_dtype": str(value)}
        if type(value).__name__ == "constexpr" and hasattr(value, "value"):
            return self._value(value.value)
        raise Unrecordable(
            f"a kernel argument of type {type(value).__name__} cannot be replayed: pass "
            "tensors, tensor descriptors, ints, floats, bools, strings, tl dtypes or tuples of "
            "them"
        )

    def _tensor(self, t: torch.Tensor) -> dict:
        address, nbytes = _storage(t)
        if address in self._case:
            name, base = self._case[address]
            return {"case": name, **_geometry(t, base.storage_offset() * base.element_size())}
        if address not in self._buffer_of:
            self._buffer_of[address] = len(self.buffers)
            self.buffers.append(
                {"bytes": nbytes, "dtype": _dtype_name(t.dtype), "fill": self._fill(t)}
            )
        return {"buffer": self._buffer_of[address], **_geometry(t, 0)}

    def _fill(self, t: torch.Tensor) -> dict:
        """What a buffer the launcher allocated holds when first handed to a kernel: a copy
        of a case tensor, by its :func:`layout` (kept at replay, from the fresh one, only in
        the same layout), one constant value (kept), or anything else (poison at replay)."""
        for name, case in self.tensors.items():
            if not t.numel() or t.dim() != case.dim():
                continue
            for transposed in (False, True) if t.dim() == 2 else (False,):
                source = case.t() if transposed else case
                if tuple(source.shape) == tuple(t.shape) and _same(t, source.to(t.dtype)):
                    return {
                        "kind": "copy",
                        "of": name,
                        "layout": "transposed" if transposed else layout(t, case),
                        "view": _geometry(t, 0),
                    }
        whole = _whole(t)
        if whole.numel():
            first = whole[:1]
            constant = bool(((whole == first) | (whole.isnan() & first.isnan())).all())
            value = float(first.item())
            if constant:  # torch.ones, torch.zeros, alpha as a one-element tensor: kept
                return {"kind": "constant", "value": _number(value)}
        return {"kind": "poison"}

    def _kernel(self, kernel: Any) -> str:
        fn = getattr(kernel, "fn", kernel)
        if id(fn) in self._key_of:
            return self._key_of[id(fn)]
        name = getattr(fn, "__name__", "kernel")
        key = name
        while key in self.sources:
            key = f"{key}'"
        self._key_of[id(fn)] = key
        self.kernels[key] = kernel
        entry: dict[str, Any] = {
            "name": name,
            "module": getattr(fn, "__module__", "") or "",
            "file": getattr(getattr(fn, "__code__", None), "co_filename", ""),
            "course": from_the_course(fn),
            "source": "",
            "calls": [],
            "globals": {},
        }
        self.sources[key] = entry
        try:
            entry["source"] = _source(fn)
        except (OSError, TypeError):
            entry["source"] = ""  # a kernel whose source is not at hand: the judge refuses it
        for gname, value in _globals_read(fn):
            if _is_jit(value):
                entry["calls"].append(self._kernel(value))
            elif isinstance(value, types.ModuleType):
                entry["globals"][gname] = {"module": value.__name__}
            elif type(value).__name__ == "constexpr" and hasattr(value, "value"):
                entry["globals"][gname] = {"constexpr": _plain(value.value)}
            elif isinstance(value, (bool, int, float, str)):
                entry["globals"][gname] = {"value": _plain(value)}
        return key


def recorded(call: Callable[[], object], tensors: Mapping[str, torch.Tensor]) -> dict:
    """Run ``call()`` (the launcher on the case's ``tensors``) with every launch recorded; the
    record, as plain data. Raises what the launcher raised, or :class:`Unrecordable`."""
    recorder = Recorder(tensors)
    with launches.recording() as seen:
        seen.listeners.append(recorder.note)
        call()
    if recorder.problem is not None:
        raise Unrecordable(recorder.problem)
    return recorder.record()


def _plain(value: object) -> object:
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    return repr(value)


def _integer_scalar(value: object) -> bool:
    dtype = getattr(value, "dtype", None)
    kind = getattr(dtype, "kind", None)  # numpy
    return kind in ("i", "u") and getattr(value, "ndim", 1) == 0


def _float_scalar(value: object) -> bool:
    dtype = getattr(value, "dtype", None)
    return getattr(dtype, "kind", None) == "f" and getattr(value, "ndim", 1) == 0


def _whole(t: torch.Tensor) -> torch.Tensor:
    """Every element of ``t``'s storage, as ``t``'s dtype."""
    storage = t.untyped_storage()
    count = storage.nbytes() // t.element_size()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, 0, (count,), (1,))


def _globals_read(fn: types.FunctionType) -> list[tuple[str, object]]:
    """(name, value) of each global ``fn`` reads, also as ``module.attribute``."""
    scope = getattr(fn, "__globals__", {})
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    names: list[str] = []

    def walk(c: types.CodeType) -> None:
        names.extend(c.co_names)
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    walk(code)
    found = []
    for name in dict.fromkeys(names):
        if name in scope:
            value = scope[name]
            found.append((name, value))
            if isinstance(value, types.ModuleType) and not value.__name__.startswith("triton"):
                found += [
                    (f"{name}.{attr}", getattr(value, attr))
                    for attr in dict.fromkeys(names)
                    if _is_jit(getattr(value, attr, None))
                ]
    return found


def abstracted(source: str) -> str | None:
    """A kernel's source as a key that ignores what a copy may rename: its name, decorators,
    comments, layout, and every name it binds itself (parameters, locals, loop variables,
    numbered in order of first appearance); the globals and attributes it reads (``tl.load``,
    ``BLOCK``) stay. None when it is not a function's source."""
    import ast

    from tmm_course.source import parse

    try:
        tree = parse(textwrap.dedent(source))
    except (SyntaxError, ValueError, RecursionError):
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if fn is None:
        return None
    fn.name, fn.decorator_list, fn.returns = "kernel", [], None
    bound = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.append(node.id)
    names = {name: f"v{i}" for i, name in enumerate(dict.fromkeys(bound))}
    for node in ast.walk(fn):
        if isinstance(node, ast.arg):
            node.arg = names.get(node.arg, node.arg)
        elif isinstance(node, ast.Name) and node.id in names:
            node.id = names[node.id]
        elif isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant):
            node.value.value = ""  # a docstring says nothing about what the kernel does
    return ast.dump(fn)


# --- rebuilding kernels from their source (another process) ---------------------------------
def rebuild(data: Mapping) -> dict[str, Any]:
    """Every kernel of the record built afresh from its source, as ``@triton.jit`` functions
    of this process's backend; each kernel's ``globals`` are what its source reads. Raises
    ``SyntaxError``, ``NameError`` or ``ValueError`` for a kernel that cannot be rebuilt."""
    import importlib

    import triton

    kernels = data["kernels"]
    built: dict[str, Any] = {}
    scopes: dict[str, dict] = {}
    for key, entry in kernels.items():
        if not entry["source"]:
            raise ValueError(f"the record carries no source for {entry['name']}")
        # the interpreter wants triton.language among every kernel's globals
        scope: dict[str, Any] = {
            "__name__": "replayed_kernels",
            "__builtins__": __builtins__,
            "_triton_language": triton.language,
        }
        for gname, value in entry["globals"].items():
            if "module" in value:
                if value["module"] not in MODULES:
                    raise ValueError(f"{entry['name']} reads module {value['module']}")
                scope[gname] = importlib.import_module(value["module"])
            elif "constexpr" in value:
                scope[gname] = triton.language.constexpr(_scalar_back(value["constexpr"]))
            elif "." not in gname:
                scope[gname] = _scalar_back(value["value"])
        scopes[key] = scope
    for key, entry in kernels.items():
        namespace = scopes[key]
        exec(compile(entry["source"], f"<{entry['name']}>", "exec"), namespace)
        built[key] = triton.jit(namespace[entry["name"]])
    for key, entry in kernels.items():  # each kernel sees the kernels it calls by name
        for callee in entry["calls"]:
            scopes[key][kernels[callee]["name"]] = built[callee]
    return built


def _scalar_back(value: object) -> object:
    if value in ("nan", "inf", "-inf"):
        return float(value)  # type: ignore[arg-type]
    return value


# --- replaying ------------------------------------------------------------------------------
def poison_fill(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` with what no computation gives: NaN, or a far-away integer."""
    if t.is_floating_point():
        return t.fill_(math.nan)
    return t.fill_(True if t.dtype == torch.bool else POISON_INT)


def _view(storage: torch.UntypedStorage, byte_base: int, geometry: Mapping, device) -> torch.Tensor:
    dtype = getattr(torch, geometry["dtype"])
    size = torch.empty(0, dtype=dtype).element_size()
    byte = byte_base + geometry["byte_offset"]
    if byte % size:
        raise ValueError(f"a {geometry['dtype']} view at byte {byte} is not aligned")
    return torch.empty(0, dtype=dtype, device=device).set_(
        storage, byte // size, tuple(geometry["shape"]), tuple(geometry["strides"])
    )


class _Memory:
    """The tensors of one replay: the case's (fresh) and the launcher's buffers (refilled)."""

    def __init__(
        self, data: Mapping, tensors: Mapping[str, torch.Tensor], empty: float | None = None
    ) -> None:
        self.data, self.tensors, self.empty = data, tensors, empty
        self.device = next(iter(tensors.values())).device
        self.buffers: dict[int, torch.UntypedStorage] = {}

    def tensor(self, spec: Mapping) -> torch.Tensor:
        if "case" in spec:
            base = self.tensors[spec["case"]]
            return _view(
                base.untyped_storage(), base.storage_offset() * base.element_size(), spec,
                self.device,
            )  # fmt: skip
        return _view(self._buffer(spec["buffer"]), 0, spec, self.device)

    def _buffer(self, index: int) -> torch.UntypedStorage:
        if index not in self.buffers:
            entry = self.data["buffers"][index]
            dtype = getattr(torch, entry["dtype"])
            size = torch.empty(0, dtype=dtype).element_size()
            whole = torch.empty(entry["bytes"] // size, dtype=dtype, device=self.device)
            fill = entry["fill"]
            if fill["kind"] == "constant":
                whole.fill_(_from_number(fill["value"]))
            else:
                poison_fill(whole) if self.empty is None else whole.fill_(self.empty)
            storage = whole.untyped_storage()
            self.buffers[index] = storage
            if fill["kind"] == "copy" and (
                fill.get("layout") == "same" or self.data.get("host_work")
            ):  # else host work, unless allowed
                source = self.tensors[fill["of"]]
                source = source.t() if fill.get("layout") == "transposed" else source
                _view(storage, 0, fill["view"], self.device).copy_(source)
        return self.buffers[index]

    def value(self, spec: Mapping) -> object:
        (kind, value), *_ = spec.items()
        if kind == "tensor":
            return self.tensor(value)
        if kind == "descriptor":
            from triton.tools.tensor_descriptor import TensorDescriptor

            return TensorDescriptor(
                self.value(value["base"]),
                list(value["shape"]),
                list(value["strides"]),
                list(value["block_shape"]),
                value.get("padding", "zero"),
            )
        if kind == "float":
            return _from_number(value)
        if kind == "tuple":
            return tuple(self.value(v) for v in value)
        if kind == "tl_dtype":
            import triton.language as tl

            return getattr(tl, value)
        return value  # int, bool, str, none


def replay(
    data: Mapping,
    tensors: Mapping[str, torch.Tensor],
    kernels: Mapping[str, Any],
    empty: float | None = None,
) -> None:
    """Launch the record's kernels in order on ``tensors`` (the case's, by the record's names:
    fresh inputs and a poisoned output), every buffer the launcher allocated made anew: a
    copy of a case tensor in its layout from the fresh tensor, a constant kept, anything else
    (a transposed or gathered copy too, unless the record allows ``host_work``) poison; an
    autotuner's reset_to_zero and restore_value done around the launches it made them for.
    ``kernels`` maps the record's keys to kernels (:attr:`Recorder.kernels` in the recording
    process, :func:`rebuild` elsewhere). ``empty``: the buffers that would be poisoned hold
    this value instead (0.0: whether the kernels only need them zeroed, as torch.empty's
    memory often is by chance)."""
    if data.get("version") != VERSION:
        raise ValueError(f"a launch record of version {data.get('version')}, not {VERSION}")
    memory = _Memory(data, tensors, empty)
    for launch in data["launches"]:
        kernel = kernels[launch["kernel"]]
        args = [memory.value(a) for a in launch["args"]]
        kwargs = {k: memory.value(v) for k, v in launch["kwargs"].items()}
        hooks = launch.get("hooks") or {}
        named = {**dict(zip(getattr(kernel, "arg_names", ()), args, strict=False)), **kwargs}
        held = {k: v for k, v in named.items() if isinstance(v, torch.Tensor)}
        for name in hooks.get("zero", ()):  # as the autotuner does: reset_to_zero
            if name in held:
                held[name].zero_()
        saved = {n: held[n].clone() for n in hooks.get("restore", ()) if n in held}
        kernel[tuple(launch["grid"])](*args, **kwargs)
        for name, before in saved.items():  # restore_value
            held[name].copy_(before)
    if any(t.device.type == "cuda" for t in tensors.values()):
        torch.cuda.synchronize()


__all__ = [
    "VERSION",
    "Recorder",
    "Unrecordable",
    "from_the_course",
    "rebuild",
    "recorded",
    "replay",
]
