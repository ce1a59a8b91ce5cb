"""Walk only what can matter: statements, and the expressions of statements on lines where a
pattern occurs. Walking every node of every file in Python costs several times the parse; most
lines of a file name nothing a check looks for."""

from __future__ import annotations

import ast
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import cast

from .project import LINE_BREAK, SourceFile
from .stmts import Where, bodies, headers

_NEWLINE = re.compile(r"\n")


def _line_starts(sf: SourceFile) -> list[int]:
    starts = sf.cache.get("line-starts")
    if starts is None:
        text = sf.text
        breaks = LINE_BREAK if "\r" in text else _NEWLINE  # the plain pattern is faster
        starts = [0, *(m.end() for m in breaks.finditer(text))]
        sf.cache["line-starts"] = starts
    return cast(list[int], starts)


def candidate_lines(sf: SourceFile, words: tuple[str, ...]) -> frozenset[int]:
    """1-based numbers of the lines on which one of the words occurs (cached per file and words).

    str.find per word, jumping to the next line after each hit: far faster than one regex
    alternation, which Python's engine tries word by word at every position."""
    key = "lines:" + "|".join(words)
    cached = sf.cache.get(key)
    if cached is None:
        offsets, text = _line_starts(sf), sf.text
        found: set[int] = set()
        for word in words:
            pos = text.find(word)
            while pos != -1:
                line = bisect_right(offsets, pos)
                found.add(line)
                pos = text.find(word, offsets[line]) if line < len(offsets) else -1
        cached = frozenset(found)
        sf.cache[key] = cached
    return cast(frozenset[int], cached)


def segment(sf: SourceFile, node: ast.AST) -> str:
    """The source text of a node (ast.get_source_segment re-splits the whole file each call)."""
    line, end = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0)
    if not line or not end or end > len(sf.lines):
        return ""
    first = sf.lines[line - 1].encode("utf-8")
    if line == end:
        return first[node.col_offset : node.end_col_offset].decode("utf-8", "replace")  # type: ignore[attr-defined]
    parts = [first[node.col_offset :], *(x.encode() for x in sf.lines[line : end - 1])]  # type: ignore[attr-defined]
    parts.append(sf.lines[end - 1].encode("utf-8")[: node.end_col_offset])  # type: ignore[attr-defined]
    return b"\n".join(parts).decode("utf-8", "replace")


def _hits(node: ast.AST, lines: list[int]) -> bool:
    """A line of `lines` (sorted) within the node's; a long class is not read line by line."""
    start = getattr(node, "lineno", 0)
    end = getattr(node, "end_lineno", start) or start
    i = bisect_left(lines, start)
    return i < len(lines) and lines[i] <= end


def _on(
    body: Sequence[ast.stmt], where: Where, lines: list[int], tops: AbstractSet[str] | None
) -> Iterator[tuple[ast.AST, Where]]:
    for stmt in body:
        if not _hits(stmt, lines):
            continue  # nothing below a statement whose lines hold no match
        outer = tops is not None and not where.owners
        if outer and isinstance(stmt, _DEFS) and stmt.name not in (tops or ()):
            continue
        inner = list(bodies(stmt, where))
        if not inner:
            if not outer:
                yield stmt, where
            continue
        if not outer:
            yield from ((h, where) for h in headers(stmt) if _hits(h, lines))
        for block, block_where in inner:
            yield from _on(block, block_where, lines, tops)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def nodes_on(
    sf: SourceFile, words: tuple[str, ...], tops: AbstractSet[str] | None = None
) -> Iterator[tuple[ast.AST, Where]]:
    """The simple statements and compound-statement headers on lines where a word occurs;
    with `tops`, only those inside the outermost defs and classes of these names."""
    assert sf.tree is not None
    lines = candidate_lines(sf, words)
    if lines:
        yield from _on(sf.tree.body, Where(), sorted(lines), tops)
