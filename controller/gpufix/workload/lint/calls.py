"""Which function bodies a call runs: the call graph within a file and across the run's files.

Resolved: module functions (`f()`, `mod.f()`, `from pkg.mod import f`), constructors and
methods (`Runner()`, `Runner().setup()`, `r = Runner(); r.setup()`, `self.setup()`, inherited
methods within the run's files), nested functions, and the entry points that dispatch to a
function: `fire.Fire(f)` / `fire.Fire(Cls)` / `fire.Fire()`, `typer.run(f)`, a typer app or
click group called with its registered commands. A call that may run one of several commands
is a "may" target: its body is checked, but what it imports is not certain afterwards.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .project import Project, SourceFile

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
_FIRE = frozenset({"fire.Fire", "fire.core.Fire"})
_RUN_ONE = frozenset({"typer.run", "typer.main.run"})
_APPS = frozenset({"typer.Typer", "typer.main.Typer", "click.Group", "click.core.Group"})


@dataclass(frozen=True)
class CallTarget:
    sf: SourceFile
    fn: FuncDef
    cls: ast.ClassDef | None = None


@dataclass(frozen=True)
class Scope:
    sf: SourceFile
    cls: ast.ClassDef | None = None
    local_defs: dict[str, FuncDef] = field(default_factory=dict)


def _method(cls: ast.ClassDef, name: str) -> FuncDef | None:
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
            return stmt
    return None


def _decorated_by(fn: FuncDef, owner: str, attrs: tuple[str, ...]) -> bool:
    """`@owner.command()` / `@owner.command` style decorators."""
    for d in fn.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        if (
            isinstance(d, ast.Attribute)
            and d.attr in attrs
            and isinstance(d.value, ast.Name)
            and d.value.id == owner
        ):
            return True
    return False


class CallResolver:
    def __init__(self, project: Project, reexports: bool = False) -> None:
        """`reexports`: a name a package's `__init__` imports from a submodule resolves to its
        definition there (`from pkg import Trainer`, pkg/__init__.py: `from .gnn import Trainer`)."""
        self.project = project
        self.reexports = reexports
        self._tops = {m.split(".")[0] for m in project.by_module} | {
            f.rel.split("/")[0].removesuffix(".py") for f in project.files
        }
        self._split_cache: dict[tuple[str, str], tuple[SourceFile, list[str]] | None] = {}

    # -- names to definitions -------------------------------------------------------------
    def _split(self, sf: SourceFile, dotted: str) -> tuple[SourceFile, list[str]] | None:
        if dotted.split(".")[0] not in self._tops:
            return None
        key = (sf.path, dotted)
        if key not in self._split_cache:
            hit = self.project.split(sf, dotted)
            self._split_cache[key] = self._reexported(hit) if self.reexports else hit
        return self._split_cache[key]

    def _reexported(
        self, hit: tuple[SourceFile, list[str]] | None
    ) -> tuple[SourceFile, list[str]] | None:
        """Follow a name the module only imports to the module that defines it (four steps)."""
        for _ in range(4):
            if hit is None or not hit[1] or hit[1][0] in hit[0].defs or hit[0].tree is None:
                return hit
            target, rest = hit
            alias = target.names.imports.get(rest[0])
            if alias and alias.split(".")[0] in self._tops:
                nxt = self.project.split(target, ".".join([alias, *rest[1:]]))
            else:
                nxt = self._from_star(target, rest)
            if nxt is None or nxt[0] is target:
                return hit
            hit = nxt
        return hit

    def _from_star(
        self, target: SourceFile, rest: list[str]
    ) -> tuple[SourceFile, list[str]] | None:
        """The run's module a `from m import *` of `target` takes the name from (the last such
        import that defines or imports it wins, as at run time)."""
        for base in reversed(target.names.star):
            nxt = self.project.split(target, ".".join([base, *rest]))
            if nxt is not None and nxt[1] and nxt[0].tree is not None:
                there = nxt[0]
                if nxt[1][0] in there.defs or nxt[1][0] in there.names.imports:
                    return nxt
        return None

    def definition(self, sf: SourceFile, dotted: str) -> tuple[SourceFile, ast.stmt, str] | None:
        """(file, def or class, attribute left over) for a dotted name the run defines."""
        hit = self._split(sf, dotted)
        if hit is None or not hit[1]:
            return None
        target, rest = hit
        node = target.defs.get(rest[0])
        if node is None or len(rest) > 2:
            return None
        return target, node, rest[1] if len(rest) == 2 else ""

    def find_method(
        self, sf: SourceFile, cls: ast.ClassDef, name: str, depth: int = 0
    ) -> CallTarget | None:
        """A method of a class or of its bases among the run's files."""
        fn = _method(cls, name)
        if fn is not None:
            return CallTarget(sf, fn, cls)
        if depth >= 5 or sf.tree is None:
            return None
        for base in cls.bases:
            dotted = sf.names.resolve(base)
            hit = self.definition(sf, dotted) if dotted else None
            if hit and isinstance(hit[1], ast.ClassDef) and not hit[2]:
                found = self.find_method(hit[0], hit[1], name, depth + 1)
                if found is not None:
                    return found
        return None

    def _callable(self, sf: SourceFile, dotted: str) -> CallTarget | None:
        hit = self.definition(sf, dotted)
        if hit is None:
            return None
        target, node, attr = hit
        if isinstance(node, ast.ClassDef):
            return self.find_method(target, node, attr or "__init__")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not attr:
            return CallTarget(target, node)
        return None

    def _class(self, sf: SourceFile, dotted: str | None) -> tuple[SourceFile, ast.ClassDef] | None:
        hit = self.definition(sf, dotted) if dotted else None
        if hit and isinstance(hit[1], ast.ClassDef) and not hit[2]:
            return hit[0], hit[1]
        return None

    # -- calls ------------------------------------------------------------------------------
    def targets(self, scope: Scope, call: ast.Call) -> tuple[list[CallTarget], list[CallTarget]]:
        """(functions the call certainly runs, functions it may run)."""
        sf, f = scope.sf, call.func
        if isinstance(f, ast.Name) and f.id in scope.local_defs:
            return [CallTarget(sf, scope.local_defs[f.id], scope.cls)], []
        if isinstance(f, ast.Attribute):
            method = self._method_call(scope, f)
            if method is not None:
                return [method], []
        dotted = sf.names.resolve(f)
        if dotted is None:
            return [], []
        if dotted in _FIRE:
            return self._fire(sf, call)
        if dotted in _RUN_ONE and call.args:
            one = self._callable(sf, sf.names.resolve(call.args[0]) or "")
            return ([one] if one else []), []
        if isinstance(f, ast.Name) and sf.names.instances.get(f.id) in _APPS:
            return [], self._commands(sf, f.id)
        target = self._callable(sf, dotted)
        if target is None:
            return [], []
        return [target], self._subcommands(target)

    def _method_call(self, scope: Scope, f: ast.Attribute) -> CallTarget | None:
        sf, value = scope.sf, f.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls") and scope.cls:
            return self.find_method(sf, scope.cls, f.attr)
        owner: tuple[SourceFile, ast.ClassDef] | None = None
        if isinstance(value, ast.Call):  # Runner().setup()
            owner = self._class(sf, sf.names.resolve(value.func))
        elif isinstance(value, ast.Name) and value.id in sf.names.instances:  # r.setup()
            owner = self._class(sf, sf.names.instances[value.id])
        return self.find_method(owner[0], owner[1], f.attr) if owner else None

    def _fire(self, sf: SourceFile, call: ast.Call) -> tuple[list[CallTarget], list[CallTarget]]:
        if not call.args:
            fns = [
                d for d in sf.defs.values() if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            return [], [CallTarget(sf, d) for d in fns if not d.name.startswith("_")]
        dotted = sf.names.resolve(call.args[0])
        cls = self._class(sf, dotted)
        if cls is None:
            one = self._callable(sf, dotted) if dotted else None
            return ([one] if one else []), []
        init = self.find_method(cls[0], cls[1], "__init__")
        methods = [
            CallTarget(cls[0], m, cls[1])
            for m in cls[1].body
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and not m.name.startswith("_")
        ]
        return ([init] if init else []), methods

    def _commands(self, sf: SourceFile, app: str) -> list[CallTarget]:
        return [
            CallTarget(sf, d)
            for d in sf.defs.values()
            if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef)
            and _decorated_by(d, app, ("command", "callback"))
        ]

    def _subcommands(self, target: CallTarget) -> list[CallTarget]:
        """A click group's function runs, then one of its commands."""
        if target.cls is not None or not _decorated_by_group(target.fn):
            return []
        return self._commands(target.sf, target.fn.name)


def _decorated_by_group(fn: FuncDef) -> bool:
    for d in fn.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        if isinstance(d, ast.Attribute) and d.attr == "group":
            return True
    return False
