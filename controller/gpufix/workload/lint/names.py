"""The name table of one module: what each name stands for, read from the AST without running it.

Covers imports (with `as`, relative imports made absolute), aliases (`nn = torch.nn`,
`env = os.environ`), `importlib.import_module("torch")` / `__import__`, string constants used as
keys (`KEY = "CUDA_VISIBLE_DEVICES"`, f-strings of constants) and instances (`r = Runner()`).
A name bound two different ways is left unresolved: the lint reports only what is certain.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from .stmts import statements

IMPORT_FUNCS = frozenset({"importlib.import_module", "builtins.__import__", "__import__"})
_AMBIGUOUS = "\0"
# The words of an identifier, split at `_` and camel case: `self.trainLoader` -> train, Loader.
WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def absolute_module(package: str, level: int, module: str | None) -> str | None:
    """`from ..x import y` in package `a.b.c` -> `a.b.x`; None when it climbs past the top."""
    if not level:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or (not parts and level):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base) or None


def _bind(table: dict[str, str], name: str, value: str) -> None:
    old = table.get(name)
    table[name] = value if old in (None, value) else _AMBIGUOUS


def top_level_defs(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level defs and classes, also those under a top-level if/try (version switches)."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield stmt
        elif isinstance(stmt, ast.If):
            yield from top_level_defs([*stmt.body, *stmt.orelse])
        elif isinstance(stmt, ast.Try):
            yield from top_level_defs([*stmt.body, *stmt.orelse, *stmt.finalbody])


class NameTable:
    def __init__(self, tree: ast.Module, module: str = "", package: str = "") -> None:
        self.module = module
        self.package = package
        self.locals: dict[str, str] = {
            d.name: f"{module}.{d.name}" if module else d.name  # type: ignore[attr-defined]
            for d in top_level_defs(tree.body)
        }
        self.imports: dict[str, str] = {}
        self.imported: set[str] = set()  # every module an import statement names, in full
        self.star: list[str] = []  # modules imported with `from m import *`, in order
        self.aliases: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        self.instances: dict[str, str] = {}
        self._pending: list[tuple[str, ast.expr]] = []
        self._rebound: set[str] = set()  # `name += ...` somewhere: its value is not one constant
        self._values: dict[str, list[ast.expr]] = {}  # every value assigned to a name, any depth
        for node, _ in statements(tree.body):  # bindings are statements: no need for every node
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        self._pending.append((t.id, node.value))
                        self._values.setdefault(t.id, []).append(node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self._rebound.add(node.target.id)
        self._settle()

    # -- building ---------------------------------------------------------------------------
    def _import(self, node: ast.Import) -> None:
        for a in node.names:
            self.imported.add(a.name)
            if a.asname:
                _bind(self.imports, a.asname, a.name)
            else:
                top = a.name.split(".")[0]
                _bind(self.imports, top, top)

    def _import_from(self, node: ast.ImportFrom) -> None:
        base = absolute_module(self.package, node.level, node.module)
        if base is None:
            return
        self.imported.add(base)
        for a in node.names:
            if a.name == "*":
                self.star.append(base)
            else:
                self.imported.add(f"{base}.{a.name}")
                _bind(self.imports, a.asname or a.name, f"{base}.{a.name}")

    def _settle(self) -> None:
        """Aliases and constants, after imports are known (a later import can make an alias)."""
        other: set[str] = set(self._rebound)
        for name, value in self._pending:
            if name in self.imports:
                continue
            s = self.const_str(value)
            if s is not None:
                _bind(self.strings, name, s)
                continue
            dotted = self._chain(value)
            if dotted is not None:
                _bind(self.aliases, name, dotted)
            elif isinstance(value, ast.Call) and (cls := self._chain(value.func)) is not None:
                _bind(self.instances, name, cls)
            else:
                other.add(name)  # bound to something we do not follow
        tables = (self.aliases, self.strings, self.instances)
        for table in tables:
            for k in [k for k, v in table.items() if v == _AMBIGUOUS]:
                del table[k]
        # A name bound as two kinds of thing (a string here, an object there) is not certain.
        for name in {k for t in tables for k in t}:
            if name in other or sum(name in t for t in tables) > 1:
                for t in tables:
                    t.pop(name, None)
        self._pending = []

    # -- queries ------------------------------------------------------------------------------
    def bound_once(self, name: str) -> ast.expr | None:
        """The value of the one assignment to `name` anywhere in the module (`old = ...`), None
        when it is assigned more than once, augmented, or never."""
        values = self._values.get(name, [])
        return values[0] if len(values) == 1 and name not in self._rebound else None

    def _chain(self, node: ast.AST) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            base = self.imports.get(node.id)
            if base is None:
                base = self.aliases.get(node.id)
            if base is None:
                base = self.locals.get(node.id)
            if base is None or base == _AMBIGUOUS:
                return None
        elif isinstance(node, ast.Call):
            base = self.imported_module(node)
            if base is None:
                return None
        else:
            return None
        return ".".join([base, *reversed(parts)])

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for (`nn.DataParallel` -> torch.nn.DataParallel)."""
        return self._chain(node)

    def imported_module(self, call: ast.Call) -> str | None:
        """`importlib.import_module("torch")` / `__import__("torch")` -> "torch"."""
        f = call.func
        name = f.id if isinstance(f, ast.Name) and f.id == "__import__" else None
        if name is None and isinstance(f, ast.Attribute | ast.Name) and not _on_a_call(f):
            # a call's result is never importlib (`x.float().float()...` chains run thousands
            # long in generated code: resolving each link's call would recurse on it)
            name = self._chain(f)
        if name not in IMPORT_FUNCS or not call.args:
            return None
        return self.const_str(call.args[0])

    def const_str(self, node: ast.AST | None) -> str | None:
        """A string known without running anything: literals, constants, f-strings of those."""
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self.strings.get(node.id)
        if isinstance(node, ast.JoinedStr):
            return self._joined(node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._sum(node)
        return None

    def _sum(self, node: ast.BinOp) -> str | None:
        """`a + b + c ...` of known strings, walked along the left spine without recursion (a
        generated file may chain thousands of terms)."""
        rights: list[ast.expr] = []
        left: ast.expr = node
        while isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add):
            rights.append(left.right)
            left = left.left
        parts = [self.const_str(left)]
        parts.extend(self.const_str(r) for r in reversed(rights))
        return None if any(p is None for p in parts) else "".join(p for p in parts if p)

    def _joined(self, values: Iterable[ast.expr]) -> str | None:
        out = []
        for v in values:
            if isinstance(v, ast.FormattedValue):
                if v.conversion not in (-1, 115) or v.format_spec is not None:
                    return None
                s = self.const_str(v.value)
            else:
                s = self.const_str(v)
            if s is None:
                return None
            out.append(s)
        return "".join(out)

    def is_environ(self, node: ast.AST) -> bool:
        return self.resolve(node) == "os.environ"


def _on_a_call(node: ast.expr) -> bool:
    """An attribute chain whose root is a call's result (`f().a.b`)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Call)
