"""Which expressions carry a GPU index numbered by nvidia-smi or NVML (PCI bus order).

A value asks NVML when it calls an NVML wrapper or runs nvidia-smi, calls a module-level function
of the module that returns such a value, or reads a local name whose latest binding before that
point was one; a loop variable the loop body hands to an NVML call
(`nvmlDeviceGetHandleByIndex(i)`) is an NVML index too. Counts and tests are not indices
(`len(GPUtil.getGPUs())`, `nvmlDeviceGetCount()`, `n > 0`: the same in either order), nor is
nvitop's `cuda_index` (CUDA's own numbering), nor a torch device built from one (the mistake is
reported where it is built, once). Names are local to their function (or module-level code): a
module-level binding is not followed into functions, where a parameter or local of the same
name is the rule; a comprehension's variables end with it.
"""

from __future__ import annotations

import ast
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from .project import SourceFile

NVML_MODULES = ("GPUtil", "gpustat", "pynvml", "nvidia_smi", "py3nvml", "nvitop")
# torch calls that take a GPU index: what they build is reported, not followed further.
TORCH_SELECTS = frozenset({"torch.cuda.set_device", "torch.device", "torch.cuda.device"})
_NOT_INDEX_ATTRS = frozenset({"cuda_index"})  # nvitop.CudaDevice: already CUDA's index

Owners = tuple[str, ...]
Pos = tuple[int, int]  # (line, column) where a binding takes effect or a value is read
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def pos(node: ast.AST) -> Pos:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


# where it takes effect, where it ends (a comprehension's variables) or None, names, value, node
Binding = tuple[Pos, "Pos | None", list[str], "ast.AST | None", ast.AST]
_MAX_DEPTH = 64  # functions returning functions' values, followed this far


@dataclass
class NvmlValues:
    """Worked out on demand: a scope's bindings when a value there is asked about, a function's
    returns when a call to it is."""

    sf: SourceFile
    pending: dict[Owners, deque[Binding]]  # bindings per scope not evaluated yet, in order
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]  # module-level functions
    # Per scope and name: (where, carries an index, where it ends) of the bindings evaluated so far.
    binds: dict[Owners, dict[str, list[tuple[Pos, bool, Pos | None]]]] = field(default_factory=dict)
    returns: dict[str, bool] = field(default_factory=dict)  # function -> returns an index
    commands: dict[str, set[str]] = field(default_factory=dict)  # function -> smi_names
    depth: int = 0

    def asks(self, expr: ast.AST, scope: Owners, at: Pos) -> bool:
        """The expression, evaluated at `at` in `scope`, carries an NVML-numbered index."""
        todo = [expr]
        while todo:
            n = todo.pop()
            if _not_an_index(self.sf, n):
                continue
            if isinstance(n, ast.IfExp):  # the test picks, the branches are the value
                todo.extend((n.body, n.orelse))
                continue
            if isinstance(n, ast.Name) and self._bound_to_index(scope, n.id, at):
                return True
            if isinstance(n, ast.Call) and self._calls_nvml(n, scope):
                return True
            todo.extend(ast.iter_child_nodes(n))
        return False

    def calls_nvml_module(self, call: ast.Call) -> bool:
        return (self.sf.names.resolve(call.func) or "").split(".")[0] in NVML_MODULES

    def _calls_nvml(self, call: ast.Call, scope: Owners) -> bool:
        if self.calls_nvml_module(call):
            return True
        called = self.sf.names.resolve(call.func) or ""
        own = called.removeprefix(f"{self.sf.module}.") if self.sf.module else called
        if own in self.defs and self._returns_index(own):
            return True
        commands = self._commands(scope)
        return any(
            "nvidia-smi" in (self.sf.names.const_str(a) or "")
            or (isinstance(a, ast.Name) and a.id in commands)
            for a in strings(call)
        )

    def _commands(self, scope: Owners) -> set[str]:
        """Names the scope's module-level function binds to a value that holds an nvidia-smi
        string (`query = "nvidia-smi -q ..."`, then `subprocess.run(query)`); module constants
        are in the name table already."""
        d = self.defs.get(scope[0]) if scope else None
        if d is None:
            return set()
        if d.name not in self.commands:
            self.commands[d.name] = smi_names(d)
        return self.commands[d.name]

    def _returns_index(self, name: str) -> bool:
        if name not in self.returns:
            if self.depth >= _MAX_DEPTH:
                return False
            self.returns[name] = False  # a recursive call does not make it one
            self.depth += 1
            d = self.defs[name]
            self.returns[name] = any(
                self.asks(r.value, (d.name,), pos(r))
                for r in ast.walk(d)
                if isinstance(r, ast.Return) and r.value is not None
            )
            self.depth -= 1
        return self.returns[name]

    def _bound_to_index(self, scope: Owners, name: str, at: Pos) -> bool:
        """The latest binding of the name before `at` (whose comprehension, if any, holds `at`)
        carries an index."""
        self._evaluate(scope, at)
        binds = self.binds.get(scope, {}).get(name, [])
        for i in range(bisect_left(binds, (at,)) - 1, -1, -1):
            _where, carries, ends = binds[i]
            if ends is None or at <= ends:
                return carries
        return False

    def _evaluate(self, scope: Owners, at: Pos) -> None:
        """Evaluate the scope's bindings before `at`, in source order (each sees those before;
        a binding evaluated from inside another's value is filed in its place)."""
        todo = self.pending.get(scope)
        done = self.binds.setdefault(scope, {})
        while todo and todo[0][0] < at:
            where, ends, names, value, node = todo.popleft()
            carries = value is not None and self.asks(value, scope, where)
            if not carries and isinstance(node, ast.For | ast.AsyncFor):
                carries = _handed_to_nvml(self, node, names)
            for name in names:
                insort(done.setdefault(name, []), (where, carries, ends))


def _not_an_index(sf: SourceFile, n: ast.AST) -> bool:
    """A count, a test, nvitop's CUDA index or a torch device: no NVML index flows out."""
    if isinstance(n, ast.Compare):
        return True
    if isinstance(n, ast.Attribute) and n.attr in _NOT_INDEX_ATTRS:
        return True
    if not isinstance(n, ast.Call):
        return False
    called = sf.names.resolve(n.func) or ""
    f = n.func
    last = called.rsplit(".", 1)[-1] or (
        f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
    )
    return last == "len" or "count" in last.lower() or called in TORCH_SELECTS


def smi_names(node: ast.AST) -> set[str]:
    """Names bound under a node to a value holding a string that names nvidia-smi."""
    out: set[str] = set()
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Assign | ast.AnnAssign)
            and n.value is not None
            and _names_smi(n.value)
        ):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def _names_smi(value: ast.AST) -> bool:
    return any(
        isinstance(c, ast.Constant) and isinstance(c.value, str) and "nvidia-smi" in c.value
        for c in ast.walk(value)
    )


def strings(call: ast.Call) -> list[ast.expr]:
    """A call's positional arguments, list and tuple elements spread."""
    out: list[ast.expr] = []
    for a in call.args:
        out.extend(a.elts if isinstance(a, ast.List | ast.Tuple) else [a])
    return out


def _scoped(tree: ast.AST) -> Iterator[tuple[Owners, ast.AST]]:
    """Every node with the names of the classes and functions around it (as CallSite.owners);
    iterative, so deeply nested expressions cannot exhaust the recursion limit."""
    todo: list[tuple[Owners, ast.AST]] = [((), tree)]
    while todo:
        owners, node = todo.pop()
        inner = owners
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = (*owners, node.name)
        for child in ast.iter_child_nodes(node):
            yield inner if child not in getattr(node, "decorator_list", ()) else owners, child
            todo.append((inner, child))


def _names(target: ast.AST) -> list[str]:
    """Names a target binds: a name, or names in tuples and lists (not `self.x`, `d[k]`)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        return [n for e in target.elts for n in _names(e)]
    return []


def _bindings(node: ast.AST) -> list[tuple[list[str], ast.AST | None, Pos, Pos | None]]:
    """(names, value, from where, until where) bound by this node; value None: no index. A
    comprehension's variables count from its start (its element is read before them) to its
    end (they do not leak out)."""
    if isinstance(node, ast.Assign):
        return [(_names(t), node.value, pos(node), None) for t in node.targets]
    if isinstance(node, ast.AnnAssign | ast.NamedExpr):
        return [(_names(node.target), node.value, pos(node), None)]
    if isinstance(node, ast.For | ast.AsyncFor):
        return [(_names(node.target), node.iter, pos(node), None)]
    if isinstance(node, _COMPREHENSIONS):
        ends = (node.end_lineno or 0, node.end_col_offset or 0)
        return [(_names(g.target), g.iter, pos(node), ends) for g in node.generators]
    if isinstance(node, ast.arg):
        return [([node.arg], None, pos(node), None)]
    return []


def _handed_to_nvml(values: NvmlValues, loop: ast.For | ast.AsyncFor, names: list[str]) -> bool:
    """The loop body passes its variable to an NVML call (`nvmlDeviceGetHandleByIndex(i)`)."""
    for n in (m for stmt in loop.body for m in ast.walk(stmt)):
        if isinstance(n, ast.Call) and values.calls_nvml_module(n):
            args = [*n.args, *(k.value for k in n.keywords)]
            if any(isinstance(a, ast.Name) and a.id in names for a in args):
                return True
    return False


def nvml_values(sf: SourceFile) -> NvmlValues:
    """The module's NVML-numbered values (cached; worked out as asked)."""
    cached = sf.cache.get("nvml-values")
    if isinstance(cached, NvmlValues):
        return cached
    pending: dict[Owners, list[Binding]] = {}
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for scope, n in _scoped(sf.tree) if sf.tree else ():
        for names, value, at, ends in _bindings(n):
            pending.setdefault(scope, []).append((at, ends, names, value, n))
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not scope:
            defs[n.name] = n
    ordered = {scope: deque(sorted(b, key=lambda b: b[0])) for scope, b in pending.items()}
    values = NvmlValues(sf, ordered, defs)
    sf.cache["nvml-values"] = values
    return values
