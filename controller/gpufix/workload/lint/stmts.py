"""Statements of a module, at any depth, with where each sits (enclosing defs, `if` tests):
the cheap way through a tree, since statements are far fewer than nodes."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Where:
    owners: tuple[str, ...] = ()  # enclosing classes and functions, outermost first
    classes: tuple[str, ...] = ()  # the enclosing classes alone
    tests: tuple[ast.expr, ...] = ()  # tests of the `if`s above


def headers(stmt: ast.stmt) -> list[ast.AST]:
    """What a compound statement evaluates itself, and what a def/class evaluates at definition."""
    if isinstance(stmt, ast.If | ast.While):
        return [stmt.test]
    if isinstance(stmt, ast.For | ast.AsyncFor):
        return [stmt.target, stmt.iter]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, ast.Match):
        return [stmt.subject]
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        defaults = [d for d in stmt.args.kw_defaults if d is not None]
        return [*stmt.decorator_list, *stmt.args.defaults, *defaults]
    if isinstance(stmt, ast.ClassDef):
        return [*stmt.decorator_list, *stmt.bases, *stmt.keywords]
    if isinstance(stmt, ast.Try | ast.TryStar):
        return [h.type for h in stmt.handlers if h.type is not None]
    return []


def bodies(stmt: ast.stmt, where: Where) -> Iterator[tuple[Sequence[ast.stmt], Where]]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        yield stmt.body, Where((*where.owners, stmt.name), where.classes, where.tests)
    elif isinstance(stmt, ast.ClassDef):
        inner = Where((*where.owners, stmt.name), (*where.classes, stmt.name), where.tests)
        yield stmt.body, inner
    elif isinstance(stmt, ast.If):
        inner = Where(where.owners, where.classes, (*where.tests, stmt.test))
        yield stmt.body, inner
        yield stmt.orelse, inner
    elif isinstance(stmt, ast.Try | ast.TryStar):
        yield stmt.body, where
        for h in stmt.handlers:
            yield h.body, where
        yield stmt.orelse, where
        yield stmt.finalbody, where
    elif isinstance(stmt, ast.Match):
        for case in stmt.cases:
            yield case.body, where
    else:
        for field in ("body", "orelse"):
            body = getattr(stmt, field, None)
            if isinstance(body, list):
                yield body, where


def statements(
    body: Sequence[ast.stmt], where: Where = Where()
) -> Iterator[tuple[ast.stmt, Where]]:
    """Every statement, at any depth, with where it sits (in source order: each statement,
    then its blocks). A stack of blocks, not nested generators, which cost a step per level."""
    todo: list[tuple[Iterator[ast.stmt], Where]] = [(iter(body), where)]
    while todo:
        block, at = todo[-1]
        stmt = next(block, None)
        if stmt is None:
            todo.pop()
            continue
        yield stmt, at
        inner = [(iter(b), w) for b, w in bodies(stmt, at)]
        todo.extend(reversed(inner))


# Fields whose nodes nobody looks at: names, flags, operators, load/store markers.
_SKIPPED = frozenset(
    {"ctx", "id", "attr", "arg", "name", "module", "level", "asname", "conversion", "kind"}
    | {"type_comment", "is_async", "simple", "tag", "op", "ops"}
)
_STRINGS = {ast.Global: "names", ast.Nonlocal: "names", ast.MatchClass: "kwd_attrs"}
_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: (), ast.Import: (), ast.ImportFrom: ()}


def _fields(cls: type) -> tuple[str, ...]:
    found = _FIELDS.get(cls)
    if found is None:
        skip = _SKIPPED | {_STRINGS.get(cls, "")}
        found = _FIELDS[cls] = tuple(f for f in cls._fields if f not in skip)  # type: ignore[attr-defined]
    return found


def nodes_below(node: ast.AST) -> list[ast.AST]:
    """The node and every node under it but operators, load/store markers and import aliases,
    in no set order: ast.walk's work without its generators (bench/walk_bench.py)."""
    out: list[ast.AST] = []
    stack: list[object] = [node]
    while stack:
        n = stack.pop()
        if not isinstance(n, ast.AST):
            continue  # None in a Dict's keys or a kw_defaults list
        out.append(n)
        for name in _fields(type(n)):
            value = getattr(n, name, None)
            if type(value) is list:
                stack.extend(value)
            elif value is not None:
                stack.append(value)
    return out


def calls_in(node: ast.AST) -> list[ast.Call]:
    """Every call under a node (and the node itself if it is one), in no set order."""
    return [n for n in nodes_below(node) if isinstance(n, ast.Call)]
