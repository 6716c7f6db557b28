"""Advice on an exercise cell, read from its parsed code (``ast``), never a verdict.

The verdict is what the cell's kernels compute when the judge replays them
(:mod:`tmm_course.teach.grade`); this module only says, beside a verdict that is not a pass,
what in the cell a person may want to look at: torch or numpy computing on tensors, writes into
tensors from Python, imports beyond :data:`ALLOWED_IMPORTS`, ``exec``/``eval``/``compile``/
``getattr``/``__import__``, private and dunder attributes, classes, IPython magics and ``!``
shell lines (:func:`advice`). Honest but unusual code (helpers, ``float(alpha)``, ``print``,
``with torch.no_grad():``, asserts) is graded on its kernels' values like any other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from tmm_course.source import parse

ALLOWED_IMPORTS = {
    "math",
    "numpy",
    "torch",
    "triton",
    "triton.language",
    "typing",
    "tmm_course",
    "__future__",
}
FORBIDDEN_BUILTINS = {
    "exec",
    "eval",
    "compile",
    "getattr",
    "setattr",
    "delattr",
    "globals",
    "locals",
    "vars",
    "open",
    "__import__",
    "breakpoint",
    "input",
    "type",
    "object",
    "super",
    "dir",
    "memoryview",
    "classmethod",
    "staticmethod",
    "property",
    "exit",
    "quit",
    "help",
    "get_ipython",
}
# what torch may be asked for: allocation, dtypes, the device, and comparisons that return bools
TORCH_ALLOWED = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "arange",
    "randn",
    "rand",
    "randint",
    "manual_seed",
    "allclose",
    "equal",
    "device",
    "Size",
    "dtype",
    "finfo",
    "iinfo",
    "Tensor",
    "is_tensor",
    "cuda.synchronize",
    "cuda.is_available",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "half",
    "float",
    "double",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
    "testing.assert_close",
}
TORCH_ALLOCATES = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones",
                   "ones_like", "full", "is_tensor"}  # fmt: skip
NUMPY_ALLOWED = {
    "prod",
    "ceil",
    "floor",
    "sqrt",
    "log2",
    "pi",
    "e",
    "inf",
    "nan",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "isclose",
}
TRITON_ALLOWED = {"jit", "autotune", "Config", "heuristics", "cdiv", "next_power_of_2"}
COURSE_ALLOWED = {"BACKEND", "DEVICE"}
# attributes a launcher may read or call on its values (tensors, ints, lists, strings)
HOST_ATTRIBUTES = {
    "shape",
    "dtype",
    "device",
    "ndim",
    "is_cuda",
    "stride",
    "size",
    "numel",
    "dim",
    "element_size",
    "is_contiguous",
    "itemsize",
    "append",
    "extend",
    "items",
    "keys",
    "values",
    "get",
    "format",
    "join",
    "split",
    "strip",
    "startswith",
    "endswith",
    "index",
    "count",
    "element_ty",
    "type",
    "value",
    "upper",
    "lower",
    "replace",
}
# what a kernel may read or call on its values: Triton's tensor methods, none that writes
KERNEL_ATTRIBUTES = {
    "to", "reshape", "trans", "permute", "broadcast_to", "expand_dims", "split", "join", "view",
    "sum", "max", "min", "argmax", "argmin", "dtype", "shape", "element_ty", "T", "numel", "type",
    "value", "cast", "ravel", "abs", "exp", "log", "sqrt", "cumsum", "sort", "flip", "scalar",
    "primitive_bitwidth", "is_floating", "is_int", "fp32", "fp16", "bf16",
}  # fmt: skip
# builtins that may see a tensor without reading its values
TENSOR_SAFE_CALLS = {"len", "isinstance", "print", "display", "id"}
KERNEL_MODULES = {"triton", "triton.language", "math"}
DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics"}
SCALAR_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "is_cuda", "element_ty", "itemsize"}
SCALAR_METHODS = {"stride", "size", "numel", "dim", "element_size", "is_contiguous"}
REDUCING_BUILTINS = {
    "sum",
    "max",
    "min",
    "abs",
    "pow",
    "round",
    "sorted",
    "map",
    "filter",
    "divmod",
}


def review_reasons(
    source: str,
    prelude: Iterable[str] = (),
    helpers: Iterable[str] = (),
    launchers: Iterable[str] = (),
    kernels: Iterable[str] = (),
) -> list[str]:
    """Why ``source`` (one exercise cell) needs a person's look; empty when it does not.

    ``prelude``: the source of the reference's setup cell, whose module names (torch, triton,
    tl, tmm_course) the cell may use; its other names are the course's own and may be used only
    when listed in ``helpers``. ``launchers``: the functions the judge calls with tensors (what
    they pass on to other functions counts as a tensor there too). ``kernels``: the
    ``@triton.jit`` functions the submission's other exercise cells define (see
    :func:`kernel_names`), which this cell may launch."""
    if any(_is_magic(line) for line in source.splitlines()):
        return ["contains an IPython magic or a ! shell line"]
    try:
        tree = parse(source)
    except SyntaxError as error:
        return [f"does not parse as Python: {error.msg} (line {error.lineno})"]
    except (RecursionError, MemoryError, ValueError):
        return ["cannot be parsed (nested too deeply, or not text)"]
    modules, course_names = _prelude_names("\n".join(prelude))
    try:
        reviewer = _Reviewer(
            tree, modules, course_names - set(helpers), set(launchers), set(kernels), set(helpers)
        )
    except RecursionError:
        return ["is nested too deeply to check"]
    return sorted(set(reviewer.reasons))


ADVICE_SOURCE = 16 * 1024  # longer cells get no advice: reading them is not worth the time


def advice(source: str, prelude: Iterable[str], carried: Iterable[str], launchers: Iterable[str]):
    """What a person may want to look at in ``source`` (one exercise cell), for the detail of a
    verdict: :func:`review_reasons` with the course's names and the ``carried`` definitions
    allowed. Never a verdict."""
    if len(source) > ADVICE_SOURCE:
        return []
    prelude = list(prelude)
    carried = list(carried)
    _, course = _prelude_names("\n".join(prelude))
    return review_reasons(source, prelude, course, launchers, kernel_names([*carried, source]))


def kernel_names(sources: Iterable[str]) -> set[str]:
    """The ``@triton.jit`` functions that ``sources`` (exercise cells) define."""
    found = set()
    for source in sources:
        try:
            tree = parse(source)
        except SyntaxError:
            continue
        found |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_jit(n)}
    return found


def _is_magic(line: str) -> bool:
    stripped = line.lstrip()
    return stripped.startswith(("%", "!")) and not stripped.startswith("!=")


def _prelude_names(source: str) -> tuple[dict[str, str], set[str]]:
    """The module aliases a setup cell binds, and the other names it binds."""
    modules: dict[str, str] = {}
    others: set[str] = set()
    try:
        tree = parse("\n".join(line for line in source.splitlines() if not _is_magic(line)))
    except SyntaxError:
        return modules, others
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ALLOWED_IMPORTS:
                    modules[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
                else:
                    others.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                others.add(alias.asname or alias.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            others.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            others.add(node.name)
    return modules, others - set(modules)


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"] (None when the chain does not start at a name)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _is_jit(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        parts = _dotted(target)
        if parts and parts[-1] == "jit":
            return True
    return False


class _Reviewer(ast.NodeVisitor):
    def __init__(
        self,
        tree: ast.Module,
        modules: dict[str, str],
        course_names: set[str],
        launchers: set[str],
        kernels: set[str] = frozenset(),
        helpers: set[str] = frozenset(),
    ) -> None:
        self.reasons: list[str] = []
        self.modules = dict(modules)  # alias -> module path
        self.imported: dict[str, str] = {}  # name -> full dotted path (from X import y)
        self.course_names = course_names
        self.jit = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_jit(n)}
        self.launchable = self.jit | set(kernels)
        self.helpers = set(helpers)
        self.bound = self._bound_names(tree)
        self.in_kernel = False
        self.params: list[set[str]] = []
        self.taint: list[set[str]] = []
        self.printed: set[int] = set()  # f-strings handed straight to print() or display()
        self.fed = self._fed_functions(tree, launchers)
        self.taint.append(self._spread(tree.body, set()))
        self.visit(tree)

    def _fed_functions(self, tree: ast.Module, launchers: set[str]) -> set[str]:
        """The host functions that may receive tensors: the launchers, functions used as values
        (not called by name), and functions called with a tensor, to a fixpoint."""
        functions = {
            n.name: n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.name not in self.jit
        }
        called = {
            id(n.func)
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        fed = set(launchers) & set(functions)
        fed |= {
            n.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Name)
            and n.id in functions
            and isinstance(n.ctx, ast.Load)
            and id(n) not in called
        }
        bodies: list[tuple[list[ast.stmt], set[str]]] = []
        changed = True
        while changed:
            changed = False
            bodies = [(tree.body, self._spread(tree.body, set()))]
            for name in fed:
                node = functions[name]
                params = {
                    a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                }
                bodies.append((node.body, self._spread(node.body, params)))
            for body, names in bodies:
                self.taint.append(names)
                for call in [n for statement in body for n in ast.walk(statement)]:
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Name)
                        and call.func.id in functions
                        and call.func.id not in fed
                        and any(
                            self.tainted(a) for a in [*call.args, *(k.value for k in call.keywords)]
                        )
                    ):
                        fed.add(call.func.id)
                        changed = True
                self.taint.pop()
        return fed

    def flag(self, reason: str) -> None:
        self.reasons.append(reason)

    @staticmethod
    def _bound_names(tree: ast.Module) -> set[str]:
        bound = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bound.add(node.name)
        return bound

    # imports --------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_IMPORTS:
                self.flag(f"imports {alias.name}, beyond what an exercise needs")
                continue
            name = alias.asname or alias.name.split(".")[0]
            self.modules[name] = alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module not in ALLOWED_IMPORTS:
            self.flag(f"imports from {module or '.'}, beyond what an exercise needs")
            return
        for alias in node.names:
            if alias.name == "*":
                self.flag(f"imports * from {module}")
                continue
            path = f"{module}.{alias.name}"
            if path in ALLOWED_IMPORTS:
                self.modules[alias.asname or alias.name] = path
            elif module != "__future__":
                self._check_path(path)
                self.imported[alias.asname or alias.name] = path

    # names and attributes -------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name.startswith("__"):
            self.flag(f"uses the interpreter's name {name}")
        elif name in FORBIDDEN_BUILTINS:
            self.flag(f"uses {name}()")
        elif name in self.imported:
            self._check_path(self.imported[name])
        elif name in self.course_names and name not in self.bound:
            self.flag(f"uses the course's own {name}")
        elif self.in_kernel and name in self.modules and self.modules[name] not in KERNEL_MODULES:
            self.flag(f"a kernel uses {name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            self.flag(f"reaches a private attribute .{node.attr}")
            return
        parts = _dotted(node)
        if parts and parts[0] in self.modules:
            path = ".".join([self.modules[parts[0]], *parts[1:]])
            if self.in_kernel and not path.startswith(("triton", "math")):
                self.flag(f"a kernel uses {path}")
            self._check_path(path)
            return
        if isinstance(node.ctx, ast.Store | ast.Del):
            self.flag(f"sets the attribute .{node.attr} from Python")
        elif self.in_kernel:
            if node.attr not in KERNEL_ATTRIBUTES:
                self.flag(f"a kernel reaches .{node.attr} of a value")
        elif node.attr not in HOST_ATTRIBUTES:
            self.flag(f"computes on a value in Python (.{node.attr})")
        self.generic_visit(node)

    def _check_path(self, path: str) -> None:
        root, _, rest = path.partition(".")
        if path.startswith("triton.language"):
            return
        if root == "math" or root == "typing" or root == "__future__":
            return
        if root == "torch" and rest not in TORCH_ALLOWED:
            self.flag(f"torch computes on tensors ({path})")
        elif root == "numpy" and rest not in NUMPY_ALLOWED:
            self.flag(f"numpy computes on arrays ({path})")
        elif root == "triton" and rest.split(".")[0] not in TRITON_ALLOWED | {"language"}:
            self.flag(f"uses {path}")
        elif root == "tmm_course" and rest not in COURSE_ALLOWED:
            self.flag(f"reaches into the course package ({path})")

    # tensors in Python ----------------------------------------------------------------------
    def tainted(self, node: ast.AST | None) -> bool:
        """Whether ``node`` may be a tensor in a launcher (its arguments, what comes of them, and
        what torch allocates); shapes, strides and dtypes are not."""
        if node is None or self.in_kernel or not self.taint:
            return False
        names = self.taint[-1]
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.Subscript):
            index = node.slice
            if isinstance(index, ast.Constant) and isinstance(index.value, str):
                return False
            return self.tainted(node.value)
        if isinstance(node, ast.Attribute):
            return node.attr not in SCALAR_ATTRIBUTES and self.tainted(node.value)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SCALAR_METHODS:
                return False
            parts = _dotted(func)
            if parts and parts[0] in self.modules and self.modules[parts[0]] == "torch":
                return True
            if isinstance(func, ast.Name) and func.id not in self.bound:
                return any(self.tainted(a) for a in node.args)
            return False
        if isinstance(node, ast.BinOp):
            return self.tainted(node.left) or self.tainted(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.tainted(node.operand)
        if isinstance(node, ast.Starred):
            return self.tainted(node.value)
        if isinstance(node, ast.Tuple | ast.List):
            return any(self.tainted(e) for e in node.elts)
        if isinstance(node, ast.IfExp):
            return self.tainted(node.body) or self.tainted(node.orelse)
        if isinstance(node, ast.NamedExpr):
            return self.tainted(node.value)
        return False

    def _spread(self, body: list[ast.stmt], names: set[str]) -> set[str]:
        """``names`` and every name assigned in ``body`` from something tainted (a fixpoint)."""
        self.taint.append(names)
        changed = True
        while changed:
            changed = False
            for node in [n for statement in body for n in ast.walk(statement)]:
                pairs: list[tuple[ast.AST, ast.AST | None]] = []
                if isinstance(node, ast.Assign):
                    pairs = [(t, node.value) for t in node.targets]
                elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
                    pairs = [(node.target, node.value)]
                elif isinstance(node, ast.For | ast.comprehension):
                    pairs = [(node.target, node.iter)]
                for target, value in pairs:
                    if not self.tainted(value):
                        continue
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in names:
                            names.add(name.id)
                            changed = True
        return self.taint.pop()

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if self.tainted(node.operand):
            self.flag("computes on a tensor in Python (a unary operator)")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        identity = all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops)
        if not identity and any(self.tainted(v) for v in [node.left, *node.comparators]):
            self.flag("compares tensor values in Python")
        self.generic_visit(node)

    def _test(self, test: ast.expr) -> None:
        if self.tainted(test):
            self.flag("reads a tensor's truth value in Python")

    def visit_If(self, node: ast.If) -> None:
        self._test(node.test)
        self.generic_visit(node)

    def visit_While(self, node: ast.While) -> None:
        self._test(node.test)
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._test(node.test)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        self._test(node.test)
        self.generic_visit(node)

    def visit_Match(self, node: ast.Match) -> None:
        self._test(node.subject)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        for value in node.values:
            self._test(value)
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if id(node) not in self.printed and any(
            isinstance(v, ast.FormattedValue) and self.tainted(v.value) for v in node.values
        ):
            self.flag("formats tensor values into a string in Python")
        self.generic_visit(node)

    # writes ---------------------------------------------------------------------------------
    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del):
            self.flag("writes tensor elements from Python (x[...] = ...)")
        elif self.tainted(node.value) and not (
            isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
        ):
            self.flag("indexes a tensor in Python")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if self.tainted(node.target) or self.tainted(node.value):
            self.flag("updates a tensor in Python (x ...= ...)")
        if isinstance(node.op, ast.MatMult) and not self.in_kernel:
            self.flag("multiplies matrices in Python (@)")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_kernel:
            self.flag("multiplies matrices in Python (@)")
        elif self.tainted(node.left) or self.tainted(node.right):
            self.flag("computes on a tensor in Python (an arithmetic operator)")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg == "out" and not self.in_kernel:
            self.flag("passes out= to a library function")
        self.generic_visit(node)

    # calls ----------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if not self.in_kernel:
            self._host_call(node, func, arguments)
        if self.in_kernel and isinstance(func, ast.Name):
            name = func.id
            if name in self.bound and name not in self.jit and name not in self.params[-1]:
                self.flag(f"a kernel calls the Python function {name}")
        self.generic_visit(node)

    def _host_call(self, node: ast.Call, func: ast.expr, arguments: list[ast.expr]) -> None:
        if isinstance(func, ast.Name):
            if func.id in self.launchable:
                self.flag(f"calls the kernel {func.id} without a launch grid")
            elif self.tainted(func):
                self.flag(f"calls {func.id}, which it was handed")
            elif func.id in TENSOR_SAFE_CALLS:
                if func.id in ("print", "display"):
                    self.printed |= {id(a) for a in arguments if isinstance(a, ast.JoinedStr)}
            elif func.id not in self.bound and any(self.tainted(a) for a in arguments):
                self.flag(f"reads tensor values in Python ({func.id}())")
        elif isinstance(func, ast.Subscript):
            launchable = isinstance(func.value, ast.Name) and (
                func.value.id in self.launchable
                or (self.params and func.value.id in self.params[-1])
            )
            index = func.slice
            if not launchable or (isinstance(index, ast.Constant) and isinstance(index.value, int)):
                self.flag("calls something picked out of a container")
        elif isinstance(func, ast.Call):
            inner = func.func
            if not (isinstance(inner, ast.Name) and inner.id in self.helpers):
                self.flag("calls what another call returned")
        elif isinstance(func, ast.Lambda):
            self.flag("calls a lambda in place")
        else:
            parts = _dotted(func)
            if parts and parts[0] in self.modules:
                path = ".".join([self.modules[parts[0]], *parts[1:]])
                allocates = path.removeprefix("torch.") in TORCH_ALLOCATES
                if not allocates and any(self.tainted(a) for a in arguments):
                    self.flag(f"hands a tensor to {path}")

    # definitions ----------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            parts = _dotted(target)
            path = ".".join([self.modules.get(parts[0], parts[0]), *parts[1:]]) if parts else ""
            if path not in DECORATORS:
                self.flag(f"decorates {node.name} with something other than triton's")
            self.visit(decorator)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
        outer = self.in_kernel
        self.in_kernel = outer or node.name in self.jit
        args = node.args
        names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        self.params.append(names)
        fed = names if node.name in self.fed else set()
        self.taint.append(set() if self.in_kernel else self._spread(node.body, set(fed)))
        for statement in node.body:
            self.visit(statement)
        self.taint.pop()
        self.params.pop()
        self.in_kernel = outer

    def visit_Lambda(self, node: ast.Lambda) -> None:
        names = {a.arg for a in node.args.args}
        self.params.append(names)
        # a one-argument lambda is a launch grid (its argument the meta-parameters); any other
        # may be handed tensors
        outer = self.taint[-1] if self.taint else set()
        self.taint.append(outer | (names if len(names) != 1 else set()))
        self.generic_visit(node)
        self.taint.pop()
        self.params.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.flag("defines an async function")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.flag(f"defines a class ({node.name})")

    def visit_With(self, node: ast.With) -> None:
        self.flag("uses a with block")
        self.generic_visit(node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        self.flag("uses an async with block")

    def visit_Await(self, node: ast.Await) -> None:
        self.flag("awaits")
