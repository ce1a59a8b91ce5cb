"""Code every rank runs, several calls away from the function that starts the process group.

`predict()` calls `setup()`, which calls init_process_group, then `load_model(conf,
load_weights=True)` from the package `credit.models`: `predict()` runs on every rank, and so do
the functions it calls outside a rank test, and theirs, as `calls.CallResolver` resolves them
(with a package's re-exports), up to DEPTH calls. The seeds: a top-level function (or module
level code) that starts the group itself, or calls outside a rank test a project function that
does. A path through `if flag:` in a function whose call on the path gives `flag` a false
literal (or leaves a false default, or hands on the caller's own false parameter) does not run
the code under it. Used by GPF008 (devices.py) for weights loads.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from .calls import CallResolver, CallTarget, FuncDef, Scope
from .callsites import (
    DISTRIBUTED,
    PROCESS_GROUP,
    TORCH_LOAD,
    calls_with_words,
    named,
    one_rank_group,
)
from .project import Project, SourceFile
from .rankcode import names_in, rank_calls
from .stmts import Where, bodies, calls_in, headers

# Calls followed from a seed: the prototype's six. On the 191 repositories the loads found sit
# one call below their seed, and twelve finds nothing more (2026-12-04); six leaves room for a
# loader's wrappers (a test goes three deep) and keeps the walk short.
DEPTH = 6
_DEF = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Tests false for "" and None (an empty path): `if os.path.isfile(pretrained):`.
_PATH_TESTS = frozenset({"os.path.isfile", "os.path.exists", "os.path.isdir"})
# Parameters false on a path, each with whether its value is "" or None (no file's name).
Falsy = frozenset[tuple[str, bool]]


@dataclass(frozen=True)
class Call:
    node: ast.Call
    guards: tuple[ast.expr, ...]  # tests of the `if`s whose body (not else) holds the call
    branched: bool  # under an `if` (either side) whose test names a rank word


@dataclass(frozen=True)
class Reached:
    target: CallTarget
    falsy: Falsy  # its parameters the call gives a false literal
    parent: Reached | None
    depth: int
    seed: str  # "train.py main() starts the process group (through setup())"


def body_calls(sf: SourceFile, body: list[ast.stmt], branchy: re.Pattern[str]) -> list[Call]:
    """The calls a body runs itself (not in nested defs or classes), with their `if` tests."""
    out: list[Call] = []
    todo: list[tuple[list[ast.stmt], tuple[ast.expr, ...], bool]] = [(body, (), False)]
    while todo:
        block, guards, branched = todo.pop()
        for stmt in block:
            if isinstance(stmt, _DEF):
                continue
            if isinstance(stmt, ast.If):
                out += [Call(c, guards, branched) for c in calls_in(stmt.test)]
                inner = branched or any(branchy.search(n) for n in names_in(stmt.test))
                todo.append((stmt.body, (*guards, stmt.test), inner))
                todo.append((stmt.orelse, guards, inner))
                continue
            blocks = list(bodies(stmt, Where()))
            parts = headers(stmt) if blocks else [stmt]
            out += [Call(c, guards, branched) for p in parts for c in calls_in(p)]
            todo += [(list(b), guards, branched) for b, _ in blocks]
    return out


def _calls(sf: SourceFile, fn: FuncDef | ast.Module, branchy: re.Pattern[str]) -> list[Call]:
    key = f"deep-calls:{id(fn)}"
    cached = sf.cache.get(key)
    if cached is None:
        cached = sf.cache[key] = body_calls(sf, fn.body, branchy)
    return cast(list[Call], cached)


def dead(sf: SourceFile, guards: Iterable[ast.expr], falsy: Falsy) -> bool:
    """Under `if flag:` (or `if flag and ...:`) with `flag` false on this path, or under
    `if os.path.isfile(path):` with `path` "" or None."""
    if not falsy:
        return False
    names = {n for n, _ in falsy}
    empty = {n for n, e in falsy if e}
    for g in guards:
        tests = g.values if isinstance(g, ast.BoolOp) and isinstance(g.op, ast.And) else [g]
        for t in tests:
            if isinstance(t, ast.Name) and t.id in names:
                return True
            if _path_test(sf, t, empty):
                return True
    return False


def _path_test(sf: SourceFile, test: ast.expr, empty: set[str]) -> bool:
    """`os.path.isfile(p)` with `p` "" or None."""
    if not (isinstance(test, ast.Call) and test.args and isinstance(test.args[0], ast.Name)):
        return False
    return test.args[0].id in empty and sf.names.resolve(test.func) in _PATH_TESTS


def _false(node: ast.expr | None, falsy: Falsy) -> tuple[str, bool] | None:
    """("", whether "" or None) for a false literal or the caller's false parameter."""
    if isinstance(node, ast.Constant) and not node.value and node.value is not ...:
        return "", node.value is None or node.value == ""
    if isinstance(node, ast.Name):
        return next((("", e) for n, e in falsy if n == node.id), None)
    return None


def _rebound(sf: SourceFile, fn: FuncDef) -> set[str]:
    """Names the function binds anew (a parameter reassigned, `global`, `nonlocal`)."""
    key = f"rebound:{id(fn)}"
    cached = sf.cache.get(key)
    if cached is None:
        found: set[str] = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                found.add(n.id)
            elif isinstance(n, ast.Global | ast.Nonlocal):
                found.update(n.names)
        cached = sf.cache[key] = found
    return cast(set[str], cached)


def false_params(sf: SourceFile, call: ast.Call, target: CallTarget, falsy: Falsy) -> Falsy:
    """The callee's parameters this call leaves false: a false literal given, a false literal
    default left, or the caller's own false parameter handed on. Nothing when the call unpacks
    arguments (`*a`, `**kw`), and nothing for an unbound method call (`Cls.m(obj, ...)`)."""
    fn, a = target.fn, target.fn.args
    if any(isinstance(x, ast.Starred) for x in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return frozenset()
    positional = [*a.posonlyargs, *a.args]
    defaults: dict[str, ast.expr | None] = dict(
        zip(
            [p.arg for p in positional][len(positional) - len(a.defaults) :],
            a.defaults,
            strict=True,
        )
    )
    defaults.update(zip([p.arg for p in a.kwonlyargs], a.kw_defaults, strict=True))
    if target.cls is not None and not _static(fn):
        if fn.name != "__init__" and _unbound(sf, call.func):
            return frozenset()  # `Cls.m(obj, x)`: which argument is self is not clear
        positional = positional[1:]
    given = {k.arg: k.value for k in call.keywords if k.arg}
    given.update((p.arg, v) for p, v in zip(positional, call.args, strict=False))
    out: set[tuple[str, bool]] = set()
    for name in [p.arg for p in positional] + [p.arg for p in a.kwonlyargs]:
        value = given[name] if name in given else defaults.get(name)
        found = _false(value, falsy if name in given else frozenset())
        if found is not None:
            out.add((name, found[1]))
    if not out:
        return frozenset()
    rebound = _rebound(target.sf, fn)
    return frozenset(x for x in out if x[0] not in rebound)


def _unbound(sf: SourceFile, func: ast.expr) -> bool:
    """`Cls.m(...)` or `mod.Cls.m(...)`, not `self.m()`, `obj.m()` or `Cls().m()`."""
    if not isinstance(func, ast.Attribute) or isinstance(func.value, ast.Call):
        return False
    v = func.value
    return not (isinstance(v, ast.Name) and (v.id in ("self", "cls") or v.id in sf.names.instances))


def _static(fn: FuncDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)


def _name(t: CallTarget) -> str:
    return f"{t.cls.name}.{t.fn.name}" if t.cls is not None else t.fn.name


_IMPORT = re.compile(rb"import\b")  # a literal first: the engine skips ahead to it
_WORD = re.compile(rb"\w+")
_TEXT_WORD = re.compile(r"\w+")  # identifiers may be non-ASCII (PEP 3131)
_MAX_LINES = 64  # a parenthesised import list longer than this is cut (the prefilter only)


def _logical_line(data: bytes, at: int) -> bytes:
    """The statement around offset `at`: back over lines that end with a backslash, forward
    over them and over an open parenthesis (`from m import (` ... `)`)."""
    start = data.rfind(b"\n", 0, at) + 1
    for _ in range(_MAX_LINES):
        before = data.rfind(b"\n", 0, max(start - 1, 0)) + 1
        if start == 0 or not data[before : start - 1].rstrip().endswith(b"\\"):
            break
        start = before
    end = data.find(b"\n", at)
    for _ in range(_MAX_LINES):
        if end < 0:
            break
        text = data[start:end]
        if not (text.rstrip().endswith(b"\\") or text.count(b"(") > text.count(b")")):
            break
        end = data.find(b"\n", end + 1)
    return data[start : end if end >= 0 else len(data)]


def _imports_one_of(data: bytes, names: frozenset[bytes]) -> bool:
    """An import statement (`from` or `import` first, continued lines included) names one of
    these words."""
    for m in _IMPORT.finditer(data):
        start = data.rfind(b"\n", 0, m.start()) + 1
        end = data.find(b"\n", m.end())
        line = data[start : end if end >= 0 else len(data)]
        if b"(" in line or b"\\" in line or b"\\" in data[max(start - 4, 0) : start]:
            line = _logical_line(data, m.start())  # rare: the statement goes on
        first = line.lstrip(b" \t").startswith((b"from ", b"from\t", b"import ", b"import\t"))
        if first and not names.isdisjoint(_words(line)):
            return True
    return False


def _words(line: bytes) -> list[bytes]:
    if line.isascii():
        return _WORD.findall(line)
    return [w.encode() for w in _TEXT_WORD.findall(line.decode("utf-8", "replace"))]


def path(step: Reached) -> str:
    """`load_model() → Model.load()`: the calls from the seed to the function."""
    names: list[str] = []
    s: Reached | None = step
    while s is not None and s.parent is not None:
        names.append(f"{_name(s.target)}()")
        s = s.parent
    return " → ".join(reversed(names))


class DeepReach:
    """Functions every rank runs, found from the seeds breadth first (shortest path kept)."""

    def __init__(self, project: Project, branchy: re.Pattern[str]) -> None:
        self.project = project
        self.branchy = branchy
        self.resolver = CallResolver(project, reexports=True)

    def targets(self, sf: SourceFile, cls: ast.ClassDef | None, call: ast.Call) -> list[CallTarget]:
        return self.resolver.targets(Scope(sf, cls), call)[0]

    def starters(
        self, ranks: list[SourceFile], skip: Callable[[SourceFile, str], bool]
    ) -> list[tuple[int, bytes, tuple[bytes, ...]]]:
        """The functions of the rank modules that start a process group of more than one rank:
        the id of each def, the name a call of it is written with (a method's, or its class's
        for `__init__`), and the parts of its module's name (one is written where it is
        imported: `from credit.distributed import setup`, `from credit import setup`)."""
        out = []
        for sf in ranks:
            if skip(sf, ""):
                continue  # each rank's GPU 0 is its own there
            for site in named(sf, _STARTS):
                if site.name not in PROCESS_GROUP or one_rank_group(site):
                    continue
                fn = _def_of(sf, site.owners)
                if fn is not None:
                    word = site.owners[0] if fn.name == "__init__" else fn.name
                    parts = tuple(p.encode() for p in sf.module.split(".") if p)
                    out.append((id(fn), word.encode(), parts))
        return out

    def seeds(
        self,
        checked: list[SourceFile],
        ranks: list[SourceFile],
        skip: Callable[[SourceFile, str], bool],
    ) -> list[Reached]:
        """Top-level functions (and module-level code) of modules that are no rank modules
        themselves but call, outside a rank test, a function of a rank module that starts the
        group; `skip(sf, name)`: not every rank runs it ("": nothing in the module). Cheap
        tests first: an import line names the function or its module and the function is
        called, and only the lines that name the function are walked."""
        starters = self.starters(ranks, skip)
        ids = {i for i, _, _ in starters}
        words = {w.decode() for _, w, _ in starters}
        done = {id(f) for f in ranks}
        if not starters:
            return []
        # An import line that names a starter or its module (`from credit.distributed import
        # setup`, `from credit import setup`, `import dist_utils`), and a call of one.
        names = frozenset(x for _, w, ps in starters for x in (w, ps[-1]))
        called = b"|".join(sorted({re.escape(w) for _, w, _ in starters}))
        calls = re.compile(rb"\b(?:" + called + rb")[ \t]*\(")
        out: list[Reached] = []
        for sf in checked:
            if id(sf) in done or sf.tree is None:
                continue
            if not (_imports_one_of(sf.data, names) and calls.search(sf.data)):
                continue
            found: dict[str, tuple[FuncDef | ast.Module, str]] = {}
            written = tuple(sorted(w for w in words if w.encode() in sf.data))
            for site in calls_with_words(sf, written):
                if _last_name(site.node.func) not in words or site.classes:
                    continue  # a method is no seed: whether it runs is not known here
                func = site.owners[0] if len(site.owners) == 1 else ""
                if len(site.owners) > 1 or func in found or self._branched(site.tests):
                    continue
                home = sf.defs.get(func) if func else sf.tree
                if not isinstance(home, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
                    continue
                if not func and self._launched(sf, site.node):
                    continue  # a `__main__` block that starts the ranks: the parent's code
                how = self._starts(sf, site.node, ids)
                if how is not None and not skip(sf, func):
                    found[func] = (home, how)
            for func, (home, how) in found.items():
                where = f"{sf.rel} {func}()" if func else f"{sf.rel} (module level)"
                fn = cast(FuncDef, home)  # a Module stands in for module-level code
                seed = f"{where} starts the process group{how}"
                out.append(Reached(CallTarget(sf, fn), frozenset(), None, 0, seed))
        return out

    def _branched(self, tests: tuple[ast.expr, ...]) -> bool:
        return any(self.branchy.search(n) for t in tests for n in names_in(t))

    def _launched(self, sf: SourceFile, call: ast.Call) -> bool:
        return any(rc.node is call and rc.launched for rc in rank_calls(sf, self.branchy))

    def _starts(self, sf: SourceFile, call: ast.Call, ids: set[int]) -> str | None:
        for t in self.targets(sf, None, call):
            if id(t.fn) in ids:
                return f" (through {_name(t)}())"
        return None

    def walk(self, seeds: list[Reached]) -> Iterable[Reached]:
        """Every function reached (with the falsy parameters of its path), shortest path first;
        the seeds themselves included."""
        seen: set[tuple[int, Falsy]] = set()
        todo = deque(seeds)
        for s in seeds:
            seen.add((id(s.target.fn), s.falsy))
        while todo:
            step = todo.popleft()
            yield step
            if step.depth >= DEPTH:
                continue
            t = step.target
            for c in _calls(t.sf, t.fn, self.branchy):
                if c.branched or dead(t.sf, c.guards, step.falsy):
                    continue
                if not _could_resolve(c.node):
                    continue
                for nxt in self.targets(t.sf, t.cls, c.node):
                    falsy = false_params(t.sf, c.node, nxt, step.falsy)
                    key = (id(nxt.fn), falsy)
                    if key not in seen:
                        seen.add(key)
                        todo.append(Reached(nxt, falsy, step, step.depth + 1, step.seed))

    def loads(self, step: Reached) -> list[ast.Call]:
        """The torch.load calls the step's function runs on this path."""
        t = step.target
        if b"load" not in t.sf.data:
            return []
        return [
            c.node
            for c in _calls(t.sf, t.fn, self.branchy)
            if not c.branched
            and not dead(t.sf, c.guards, step.falsy)
            and t.sf.names.resolve(c.node.func) in TORCH_LOAD
        ]


_STARTS = DISTRIBUTED - {"torch.multiprocessing.spawn"}  # devices._starts_ranks's (cached)


def _last_name(f: ast.expr) -> str:
    return f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")


def _could_resolve(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name | ast.Attribute)


def _def_of(sf: SourceFile, owners: tuple[str, ...]) -> FuncDef | None:
    """The def of a top-level function or of a method of a top-level class."""
    if not owners:
        return None
    node = sf.defs.get(owners[0])
    if isinstance(node, ast.ClassDef) and len(owners) > 1:
        for st in node.body:
            if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef) and st.name == owners[1]:
                return st
        return None
    return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None
