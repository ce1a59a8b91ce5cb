"""Walk only what can matter: statements, and the expressions of statements on lines where a
pattern occurs. Walking every node of every file in Python costs several times the parse; most
lines of a file name nothing a check looks for."""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import cast

from .project import SourceFile
from .stmts import Where, bodies, headers

_NEWLINE = re.compile(r"\n")


def candidate_lines(sf: SourceFile, pattern: re.Pattern[str]) -> frozenset[int]:
    """1-based numbers of the lines on which the pattern occurs (cached per file and pattern)."""
    key = f"lines:{pattern.pattern}"
    cached = sf.cache.get(key)
    if cached is None:
        starts = sf.cache.get("line-starts")
        if starts is None:
            starts = [0, *(m.end() for m in _NEWLINE.finditer(sf.text))]
            sf.cache["line-starts"] = starts
        offsets = cast(list[int], starts)
        text, found, pos = sf.text, set(), 0
        while (m := pattern.search(text, pos)) is not None:
            line = bisect_right(offsets, m.start())
            found.add(line)
            pos = offsets[line] if line < len(offsets) else len(text)  # on to the next line
        cached = frozenset(found)
        sf.cache[key] = cached
    return cast(frozenset[int], cached)


def _hits(node: ast.AST, lines: frozenset[int]) -> bool:
    start = getattr(node, "lineno", 0)
    end = getattr(node, "end_lineno", start) or start
    return any(n in lines for n in range(start, end + 1))


def _on(
    body: Sequence[ast.stmt], where: Where, lines: frozenset[int]
) -> Iterator[tuple[ast.AST, Where]]:
    for stmt in body:
        if not _hits(stmt, lines):
            continue  # nothing below a statement whose lines hold no match
        inner = list(bodies(stmt, where))
        if not inner:
            yield stmt, where
            continue
        yield from ((h, where) for h in headers(stmt) if _hits(h, lines))
        for block, block_where in inner:
            yield from _on(block, block_where, lines)


def nodes_on(sf: SourceFile, pattern: re.Pattern[str]) -> Iterator[tuple[ast.AST, Where]]:
    """The simple statements and compound-statement headers on lines where the pattern occurs."""
    assert sf.tree is not None
    lines = candidate_lines(sf, pattern)
    if lines:
        yield from _on(sf.tree.body, Where(), lines)
