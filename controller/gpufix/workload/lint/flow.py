"""The flow walker: statements in the order Python runs them, following the calls they make.

The state is what torch/CUDA-loading imports have certainly run (`loads.State`). A call to a
function of the run's files walks that function's body with the caller's state; what it imports
on every path counts afterwards. Branches merge (an import in one branch is not certain after
it), loops may run zero times, `try` bodies count only when the handlers catch import errors.
A listener sees each simple statement with the state before it runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from .calls import CallResolver, CallTarget, Scope
from .envwrites import walk_here
from .libraries import LibraryTable
from .loads import Load, State, add, imported_modules, library_load, merge, through
from .project import Project, SourceFile

MAX_DEPTH = 12
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


class Listener(Protocol):
    def on_statement(self, scope: Scope, node: ast.AST, state: State, note: str) -> None: ...


def _catches_only_import_errors(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    if isinstance(t, ast.Name):
        return t.id in _IMPORT_ERRORS
    if isinstance(t, ast.Tuple):
        return bool(t.elts) and all(
            isinstance(e, ast.Name) and e.id in _IMPORT_ERRORS for e in t.elts
        )
    return False


def _via(loads: list[Load], via: str) -> list[Load]:
    """Say which call a load happened in (`in setup() called at line 17`)."""
    if not via:
        return loads
    return [replace(ld, via=f"{via}; {ld.via}" if ld.via else via) for ld in loads]


def header_exprs(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a compound statement evaluates itself (not its body)."""
    if isinstance(stmt, ast.If | ast.While):
        return [stmt.test]
    if isinstance(stmt, ast.For | ast.AsyncFor):
        return [stmt.iter]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, ast.Match):
        return [stmt.subject]
    return []


class FlowWalker:
    def __init__(
        self, project: Project, table: LibraryTable, listener: Listener | None = None
    ) -> None:
        self.project = project
        self.table = table
        # a helper a package's __init__ re-exports (`from utils import set_gpus`) is followed
        self.resolver = CallResolver(project, reexports=True)
        self.listener = listener
        self.active: list[int] = []
        # (function, libraries loaded before, note) -> the loads the call adds
        self.memo: dict[tuple[int, tuple[str, ...], str], list[Load]] = {}
        self.finals: dict[str, State] = {}
        self.firsts: dict[str, State] = {}
        self._counting = True
        self.loading: set[str] = set()
        self.module_calls: dict[int, int] = {}  # id(def) -> calls followed from module level
        self._note = ""
        self._module_level = False

    # -- modules ----------------------------------------------------------------------------
    def module_state(self, sf: SourceFile) -> State:
        """What has certainly been loaded once `sf` has been imported (walks it once)."""
        if sf.path in self.finals:
            return self.finals[sf.path]
        if sf.path in self.loading or sf.tree is None:
            return {}  # an import cycle: the partial module loads nothing certain
        self.loading.add(sf.path)
        saved = (self.active, self._note, self._module_level)
        self.active, self._note, self._module_level = [], "", True
        try:
            end = self.block(Scope(sf), sf.tree.body, {}, "", [])
        finally:
            self.active, self._note, self._module_level = saved
            self.loading.discard(sf.path)
        self.finals[sf.path] = end if end is not None else {}
        return self.finals[sf.path]

    def first_loads(self, sf: SourceFile) -> State:
        """What importing `sf` certainly loads, up to its first load: enough to know that a
        project import loads torch (walking all of every imported module costs more than the
        parse). No listener: the module's own statements are checked by its own walk."""
        if sf.path in self.finals:
            return self.finals[sf.path]
        if sf.path in self.firsts:
            return self.firsts[sf.path]
        if sf.path in self.loading or sf.tree is None:
            return {}
        self.loading.add(sf.path)
        saved = (self.active, self._note, self._module_level, self.listener, self._counting)
        self.active, self._note, self._module_level = [], "", True
        self.listener, self._counting = None, False
        state: State = {}
        try:
            for stmt in sf.tree.body:
                nxt = self.stmt(Scope(sf), stmt, state, "", [])
                if nxt is None:
                    break
                state = nxt
                if state:
                    break
        finally:
            self.active, self._note, self._module_level, self.listener, self._counting = saved
            self.loading.discard(sf.path)
        self.firsts[sf.path] = state
        return state

    def import_loads(self, sf: SourceFile, dotted: str, text: str, node: ast.AST) -> list[Load]:
        lib = library_load(self.table, dotted, text, sf, node)
        if lib is not None:
            return [lib]
        target = self.project.find_module(sf, dotted)
        if target is None or target is sf:
            return []
        return [through(ld, text, sf, node, target) for ld in self.first_loads(target).values()]

    # -- functions --------------------------------------------------------------------------
    def walk_outside(self, target: CallTarget, start: State, note: str) -> None:
        """Walk a function as called after its module was imported (callers unknown)."""
        saved = (self._note, self._module_level)
        self._note, self._module_level = note, False
        try:
            self.call(target, start, "")
        finally:
            self._note, self._module_level = saved

    def call(self, target: CallTarget, state: State, via: str) -> State:
        """The loads certain after `target` returns (early returns taken into account)."""
        key = id(target.fn)
        if key in self.active or len(self.active) >= MAX_DEPTH:
            return state
        memo_key = (key, tuple(state), self._note)
        if memo_key in self.memo:  # same body, same libraries loaded before: same outcome
            return add(state, self.memo[memo_key])
        self.active.append(key)
        saved = self._module_level
        self._module_level = False
        try:
            returns: list[State | None] = []
            scope = Scope(target.sf, target.cls, {})
            end = self.block(scope, target.fn.body, dict(state), via, returns)
        finally:
            self.active.pop()
            self._module_level = saved
        merged = merge([*returns, end])
        result = merged if merged is not None else state
        self.memo[memo_key] = [v for k, v in result.items() if k not in state]
        return result

    def follow(self, scope: Scope, roots: Iterable[ast.AST], state: State, via: str) -> State:
        """Run the calls made here, in the order Python evaluates them (inner calls first)."""
        calls = [n for root in roots for n in walk_here(root) if isinstance(n, ast.Call)]
        calls.sort(key=lambda c: (getattr(c, "end_lineno", 0), getattr(c, "end_col_offset", 0)))
        for c in calls:
            mod = scope.sf.names.imported_module(c)
            if mod is not None:
                loads = self.import_loads(scope.sf, mod, f"import_module({mod!r})", c)
                state = add(state, _via(loads, via))
                continue
            must, may = self.resolver.targets(scope, c)
            for t in (*must, *may):
                if self._module_level and self._counting:
                    self.module_calls[id(t.fn)] = self.module_calls.get(id(t.fn), 0) + 1
            inner = f"in {getattr(c.func, 'attr', None) or getattr(c.func, 'id', '?')}() called at line {c.lineno}"
            inner = f"{inner}, {via}" if via else inner
            for t in must:
                state = self.call(t, state, inner)
            for t in may:
                self.call(t, state, inner)
        return state

    # -- statements -------------------------------------------------------------------------
    def block(
        self,
        scope: Scope,
        body: Sequence[ast.stmt],
        state: State,
        via: str,
        returns: list[State | None],
    ) -> State | None:
        """Walk statements in order; the state at fall-through, None if it never falls through."""
        for stmt in body:
            nxt = self.stmt(scope, stmt, state, via, returns)
            if nxt is None:
                return None
            state = nxt
        return state

    def _simple(self, scope: Scope, nodes: list[ast.AST], state: State, via: str) -> State:
        if self.listener is not None:
            for n in nodes:
                self.listener.on_statement(scope, n, state, self._note)
        return self.follow(scope, nodes, state, via)

    def stmt(
        self, scope: Scope, stmt: ast.stmt, state: State, via: str, returns: list[State | None]
    ) -> State | None:
        headers = header_exprs(stmt)
        if headers:
            state = self._simple(scope, headers, state, via)
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            for dotted, text in imported_modules(scope.sf, stmt):
                state = add(state, _via(self.import_loads(scope.sf, dotted, text, stmt), via))
            return state
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if not self._module_level:
                scope.local_defs[stmt.name] = stmt
            return state
        if isinstance(stmt, ast.ClassDef):
            return self.block(Scope(scope.sf, stmt, {}), stmt.body, dict(state), via, returns)
        return self._compound(scope, stmt, state, via, returns)

    def _compound(
        self, scope: Scope, stmt: ast.stmt, state: State, via: str, returns: list[State | None]
    ) -> State | None:
        walk = self.block
        if isinstance(stmt, ast.If):
            a = walk(scope, stmt.body, dict(state), via, returns)
            b = walk(scope, stmt.orelse, dict(state), via, returns)
            return merge([a, b])
        if isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
            walk(scope, stmt.body, dict(state), via, returns)  # may run zero times
            walk(scope, stmt.orelse, dict(state), via, returns)
            return state
        if isinstance(stmt, ast.With | ast.AsyncWith):
            return walk(scope, stmt.body, state, via, returns)
        if isinstance(stmt, ast.Try | ast.TryStar):
            return self._try(scope, stmt, state, via, returns)
        if isinstance(stmt, ast.Match):
            for case in stmt.cases:
                walk(scope, case.body, dict(state), via, returns)
            return state
        if isinstance(stmt, ast.Return):
            if stmt.value is not None:
                state = self._simple(scope, [stmt.value], state, via)
            returns.append(state)
            return None
        if isinstance(stmt, ast.Raise | ast.Break | ast.Continue):
            return None
        # A simple statement: the listener sees the state before its calls run, so a write in
        # the same statement as a call that imports torch is never flagged.
        return self._simple(scope, [stmt], state, via)

    def _try(
        self,
        scope: Scope,
        stmt: ast.Try | ast.TryStar,
        state: State,
        via: str,
        returns: list[State | None],
    ) -> State | None:
        walk = self.block
        body = walk(scope, stmt.body, dict(state), via, returns)
        after = walk(scope, stmt.orelse, dict(body), via, returns) if body is not None else None
        handled = [walk(scope, h.body, dict(state), via, returns) for h in stmt.handlers]
        if not all(_catches_only_import_errors(h) for h in stmt.handlers):
            after = merge([after, *handled])
        elif after is None:
            after = merge(handled)  # a handler for a failed import: nothing was loaded there
        if stmt.finalbody:
            base = after if after is not None else dict(state)
            final = walk(scope, stmt.finalbody, dict(base), via, returns)
            return final if after is not None else None
        return after
