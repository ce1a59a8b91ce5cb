"""Collects findings from the checks: positions in characters, one finding per place and rule,
and the mechanical fixes (SARIF `fixes`) where a fix is a plain text edit."""

from __future__ import annotations

import ast

from .envwrites import writes_in
from .model import Fix, LintFinding, Related, Replacement
from .project import SourceFile


class Reporter:
    def __init__(self) -> None:
        self.found: dict[tuple[str, str, int, int], LintFinding] = {}

    def add(
        self,
        rule: str,
        sf: SourceFile,
        node: ast.AST,
        message: str,
        related: tuple[Related, ...] = (),
        fix: Fix | None = None,
        context: str | None = None,
    ) -> None:
        """`context`: the finding's, when a caller in another context (a test, an example)
        made it, not the file it is in; otherwise the file's."""
        line = getattr(node, "lineno", 1)
        offset = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", None) or line
        end_offset = getattr(node, "end_col_offset", None)
        end_col = sf.col(end_line, end_offset) if end_offset is not None else sf.col(line, offset)
        key = (rule, sf.path, line, offset)
        if key not in self.found:
            col = sf.col(line, offset)
            self.found[key] = LintFinding(
                rule,
                sf.path,
                line,
                col,
                end_line,
                end_col,
                message,
                related,
                fix,
                "",
                context or sf.context,
            )

    def findings(self) -> list[LintFinding]:
        return list(self.found.values())


def related_at(sf: SourceFile, line: int, col_offset: int, message: str) -> Related:
    return Related(sf.path, line, sf.col(line, col_offset), message)


# -- fixes ------------------------------------------------------------------------------------
def _alone_on_lines(sf: SourceFile, stmt: ast.stmt) -> bool:
    """Nothing but whitespace before the statement and nothing but a comment after it."""
    end_line = stmt.end_lineno or stmt.lineno
    if end_line > len(sf.lines):
        return False
    first = sf.lines[stmt.lineno - 1].encode("utf-8")
    last = sf.lines[end_line - 1].encode("utf-8")
    before = first[: stmt.col_offset].strip()
    after = last[stmt.end_col_offset or 0 :].strip()
    return not before and (not after or after.startswith(b"#"))


def _only_in_block(sf: SourceFile, stmt: ast.stmt) -> bool:
    """Deleting the statement might leave an `if`, `def`, `with`, ... body empty, a syntax
    error: it is the block's only statement, or every statement there is an environment write
    (each may have its own fix to delete it, and a user applies them all at once)."""
    if sf.tree is None:
        return False
    for node in ast.walk(sf.tree):
        if isinstance(node, ast.Module):
            continue
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                return all(s is stmt or writes_in(sf.names, [s]) for s in block)
    return False


def delete_statement(sf: SourceFile, stmt: ast.stmt, description: str) -> Fix | None:
    """Delete the lines of a statement that stands alone on them; `pass` in its place when it is
    its block's only statement."""
    if not _alone_on_lines(sf, stmt):
        return None
    end_line = stmt.end_lineno or stmt.lineno
    if _only_in_block(sf, stmt) and stmt.end_col_offset is not None:
        first = sf.col(stmt.lineno, stmt.col_offset)
        last = sf.col(end_line, stmt.end_col_offset)
        return Fix(description, sf.path, (Replacement(stmt.lineno, first, end_line, last, "pass"),))
    if end_line >= len(sf.lines):  # the last line: delete up to its end
        end = Replacement(stmt.lineno, 1, end_line, len(sf.lines[end_line - 1]) + 1, "")
        return Fix(description, sf.path, (end,))
    return Fix(description, sf.path, (Replacement(stmt.lineno, 1, end_line + 1, 1, ""),))


def insert_before(sf: SourceFile, stmt: ast.stmt, code: str, description: str) -> Fix | None:
    """Insert a line of code before a statement, at its indentation."""
    if not _alone_on_lines(sf, stmt):
        return None
    indent = sf.lines[stmt.lineno - 1][: sf.col(stmt.lineno, stmt.col_offset) - 1]
    edit = Replacement(stmt.lineno, 1, stmt.lineno, 1, f"{indent}{code}\n")
    return Fix(description, sf.path, (edit,))


def replace_node(sf: SourceFile, node: ast.expr, text: str, description: str) -> Fix | None:
    if node.end_lineno is None or node.end_col_offset is None:
        return None
    edit = Replacement(
        node.lineno,
        sf.col(node.lineno, node.col_offset),
        node.end_lineno,
        sf.col(node.end_lineno, node.end_col_offset),
        text,
    )
    return Fix(description, sf.path, (edit,))


def append_argument(sf: SourceFile, call: ast.Call, text: str, description: str) -> Fix | None:
    """Add `, text` after the last argument of a call (`torch.load(f)` -> `torch.load(f, x=1)`)."""
    args: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    if not args:
        return None
    last = max(args, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
    line, offset = last.end_lineno, last.end_col_offset
    if line is None or offset is None:
        return None
    col = sf.col(line, offset)
    return Fix(description, sf.path, (Replacement(line, col, line, col, f", {text}"),))
