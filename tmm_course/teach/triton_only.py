"""What the judge replays must be Triton: a learner's kernels, and nothing else of their Python.

A kernel's source is still the learner's code, and Triton runs Python twice on it: its compiler
calls whatever a kernel body names (``tl.core.builtins.exec(...)`` runs while compiling), and
the interpreter executes the body as Python. So before a replay worker defines a kernel the
judge reads each source (here, with ``ast`` only: nothing of it runs) and refuses one that
reaches beyond Triton (:func:`problem`): a definition with defaults or annotations that are not
constants or names, a body that names anything but its parameters and locals, the other
kernels of the launch, ``tl``/``triton.language`` and the few Python builtins Triton's compiler
knows, or reaches a private attribute or a tensor's ``handle`` (the interpreter's raw data).
The replay worker then defines the kernels with no other builtins (:func:`define`) and compiles
every launch for a GPU before it runs (:func:`strict`: the compiler refuses to call anything
that is not Triton's language or a kernel).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import linecache
import types
from collections.abc import Iterator, Mapping

from tmm_course.source import parse

# the Python names Triton's compiler gives a kernel (its ``builtin_namespace``)
COMPILER_BUILTINS = ("len", "list", "range", "float", "int", "isinstance", "print", "min", "max")
MOST_SOURCE = 64 * 1024  # characters per kernel
MOST_KERNELS = 32


MODULES = ("triton", "triton.language")  # the only modules a replayed kernel may name
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32",
          "int64", "bool")  # fmt: skip
MOST_LAUNCHES = 256
MOST_BUFFER_BYTES = 1 << 30


def record_problem(data: object) -> str | None:
    """Why a launch record (untrusted: it came from the learner's worker) cannot be replayed,
    or None. Its kernels must be sources :func:`problem` accepts; everything else plain data
    of the record's schema (:mod:`tmm_course.check.record`)."""
    try:
        return _record_problem(data)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        return f"the launch record is malformed ({type(error).__name__}: {error})"[:300]


def _record_problem(data) -> str | None:
    if not isinstance(data, dict) or data.get("version") != 1:
        return "the launch record is not one the judge reads (version 1)"
    kernels, launches, buffers = data["kernels"], data["launches"], data["buffers"]
    if not launches:
        return None  # no launch: the judge says so
    if len(launches) > MOST_LAUNCHES:
        return f"{len(launches)} launches (at most {MOST_LAUNCHES})"
    if not isinstance(kernels, dict) or not 0 < len(kernels) <= MOST_KERNELS:
        return f"between 1 and {MOST_KERNELS} kernels"
    if sum(int(b["bytes"]) for b in buffers) > MOST_BUFFER_BYTES:
        return "the launcher's buffers are over 1 GiB"
    for buffer in buffers:
        if buffer["dtype"] not in DTYPES or int(buffer["bytes"]) < 0:
            return f"a buffer of {buffer['dtype']} ({buffer['bytes']} bytes)"
    for key, entry in kernels.items():
        why = kernel_problem(entry, kernels)
        if why:
            return f"the kernel {entry.get('name', key)} {why}"
    for launch in launches:
        if launch["kernel"] not in kernels:
            return "a launch of a kernel the record does not carry"
        grid = launch["grid"]
        if len(grid) != 3 or not all(type(g) is int and 0 <= g < 2**31 for g in grid):
            return f"a launch grid {grid!r}"
    return None


def kernel_problem(entry: Mapping, kernels: Mapping) -> str | None:
    """Why one kernel of a record (its name, source, the kernels it calls, its globals) is
    not Triton, or None."""
    name, source = entry["name"], entry["source"]
    if not isinstance(source, str) or not source or len(source) > MOST_SOURCE:
        return f"has no source of at most {MOST_SOURCE} characters"
    known = {kernels[c]["name"] for c in entry["calls"]}
    modules = {"tl": "triton.language", "triton": "triton"}
    for gname, value in entry["globals"].items():
        if "module" in value:
            if value["module"] not in MODULES:
                return f"reads the module {value['module']} (kernels see Triton's language only)"
            modules[gname] = value["module"]
        elif type(value.get("constexpr", value.get("value"))) not in (int, float, bool):
            return f"reads the global {gname}, which is not a number"
        if not gname.isidentifier():
            return f"reads {gname}"
        known.add(gname)
    return _kernel_problem(name, source, known, modules)


def _kernel_problem(
    name: str, source: str, known: set[str], modules: Mapping[str, str]
) -> str | None:
    if not isinstance(name, str) or not name.isidentifier():
        return "has no name"
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return f"does not parse: {error}"
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return "is not one function definition"
    fn = tree.body[0]
    if fn.name != name or fn.decorator_list:
        return "is not a plain definition of that name"
    args = fn.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if args.vararg or args.kwarg:
        return "takes *args or **kwargs"
    for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
        if not _constant(default):
            return "has a default value that is not a constant"
    for arg in every:
        if arg.annotation is not None and not _annotation(arg.annotation):
            return f"annotates {arg.arg} with something other than a name"
    if fn.returns is not None:
        return "annotates its return value"
    local = {a.arg for a in every} | _assigned(fn)
    allowed = local | known | set(modules) | set(COMPILER_BUILTINS)
    try:
        for node in ast.walk(fn):
            if node is fn:
                continue
            if isinstance(node, ast.Name) and node.id not in allowed:
                return f"uses {node.id}, which is not Triton (kernels see tl and their own names)"
            if isinstance(node, ast.Attribute) and (
                node.attr.startswith("_") or node.attr == "handle"
            ):
                return f"reaches .{node.attr}, which is not Triton's language"
            root = _root(node) if isinstance(node, ast.Attribute) else None
            if root in modules and root not in local:
                why = _language_problem(node, modules[root])
                if why:
                    return why
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                return "defines a function inside itself"
            if isinstance(node, ast.ClassDef | ast.Import | ast.ImportFrom | ast.Global):
                return f"has a {type(node).__name__} statement"
            if isinstance(node, ast.Nonlocal | ast.Await | ast.Yield | ast.YieldFrom):
                return f"has a {type(node).__name__} statement"
    except RecursionError:
        return "is nested too deeply"
    return None


def _constant(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool, str)


def _annotation(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and all(p.isidentifier() for p in node.value.split("."))
    return _dotted(node) is not None and not any(p.startswith("_") for p in _dotted(node) or [])


def _dotted(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _assigned(fn: ast.FunctionDef) -> set[str]:
    found = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            found.add(node.id)
    return found


def _language_problem(node: ast.Attribute, module: str) -> str | None:
    """``tl.x.y``: every step must stay inside ``triton.language``."""
    import triton.language as tl

    parts = _dotted(node)
    if parts is None:  # tl.f(x).attr: the call's result is a Triton value
        return None
    value: object = tl
    steps = parts[1:]
    if module == "triton":
        if not steps or steps[0] != "language":
            return f"uses {'.'.join(parts)}: inside a kernel, use triton.language (tl)"
        steps = steps[1:]
    for index, step in enumerate(steps):
        value = getattr(value, step, None)
        if value is None or not _of_the_language(value):
            return f"uses {'.'.join(parts[: index + 2])}, which is not Triton's language"
    return None


def _of_the_language(value: object) -> bool:
    if getattr(value, "__triton_builtin__", False):
        return True
    if type(value).__name__ in ("JITFunction", "InterpretedFunction"):  # tl.zeros, tl.cdiv
        value = getattr(value, "fn", value)
    if isinstance(value, types.ModuleType):
        return value.__name__.startswith("triton.language")
    if type(value) in (int, float, bool, str):
        return True
    module = getattr(value, "__module__", None) or getattr(type(value), "__module__", "")
    return isinstance(module, str) and module.startswith("triton.language")


def define_record(data: Mapping) -> dict:
    """The record's kernels (key -> ``@triton.jit`` kernel), each defined from its checked
    source in a scope of its own that holds the modules and numbers it reads, the kernels it
    calls, and only the builtins Triton's compiler knows. Check with :func:`record_problem`
    first: this runs each ``def`` statement."""
    import importlib

    import triton

    allowed = {name: getattr(builtins, name) for name in COMPILER_BUILTINS}
    kernels = data["kernels"]
    built: dict = {}
    scopes: dict[str, dict] = {}
    for key, entry in kernels.items():
        # the interpreter wants triton.language among every kernel's globals
        scope: dict = {"__name__": "submitted_kernels", "__builtins__": allowed,
                       "tl": triton.language, "triton": triton}  # fmt: skip
        for gname, value in entry["globals"].items():
            if "module" in value:
                scope[gname] = importlib.import_module(value["module"])
            elif "constexpr" in value:
                scope[gname] = triton.language.constexpr(value["constexpr"])
            else:
                scope[gname] = value["value"]
        filename = f"<kernel {entry['name']}>"
        source = entry["source"]
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), scope)  # a checked def: nothing else runs
        built[key] = triton.jit(scope[entry["name"]])
        scopes[key] = scope
    for key, entry in kernels.items():  # each kernel sees the kernels it calls by name
        for callee in entry["calls"]:
            scopes[key][kernels[callee]["name"]] = built[callee]
    return built


class NotTriton(RuntimeError):
    """A kernel body asked the compiler to call something that is not Triton."""


@contextlib.contextmanager
def strict() -> Iterator[None]:
    """Inside the block, Triton's compiler refuses to call anything but Triton's language,
    ``@triton.jit`` functions and the Python builtins it knows (it would call anything)."""
    from triton.compiler import code_generator as cg

    original = cg.CodeGenerator.call_Function
    builtin_values = tuple(cg.CodeGenerator.builtin_namespace.values())
    jit_types = tuple(
        t for t in (getattr(cg, "JITCallable", None), getattr(cg, "JITFunction", None)) if t
    )

    def call_Function(self, node, fn, args, kws):  # Triton's name
        inner = getattr(fn, "__func__", fn)
        if not (
            isinstance(inner, jit_types)
            or any(inner is b for b in builtin_values)
            or _of_the_language(inner)
        ):
            what = getattr(inner, "__qualname__", None) or type(inner).__name__
            raise NotTriton(f"the kernel calls {what}, which is not Triton's language")
        return original(self, node, fn, args, kws)

    cg.CodeGenerator.call_Function = call_Function
    try:
        yield
    finally:
        cg.CodeGenerator.call_Function = original
