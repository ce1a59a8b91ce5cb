"""Parse one file with the target Python's grammar, or say honestly why it was not checked.

`ast.parse(feature_version=...)` only goes *down* from the running Python (and not below 3.7):
- target at or below the running Python: parse with the target's grammar; a file that only the
  running grammar accepts uses syntax newer than the target: GPF900, and it is still checked;
- target newer than the running Python, or unknown: a file the running Python cannot parse may be
  valid for the target, so it is GPF901 (a note: not checked), never a "syntax error".
"""

from __future__ import annotations

import ast
import sys

from .model import LintFinding

_LOWEST = (3, 7)  # the oldest feature_version ast accepts


def _fmt(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def _finding(rule: str, path: str, line: int, col: int, message: str) -> LintFinding:
    return LintFinding(rule, path, line, col, line, col, message)


def parse_file(
    data: bytes, path: str, target: tuple[int, int] | None
) -> tuple[ast.Module | None, LintFinding | None]:
    """The tree (None when the file cannot be checked) and a GPF900/GPF901 finding, if any."""
    tree, finding = _parse(data, path, target)
    if tree is not None and data.count(b"elif") >= _ELIF_SCAN:
        depth = statement_depth(tree)
        if depth > MAX_STATEMENT_DEPTH:
            msg = (
                f"statements nested {depth} deep (a long elif chain): lint follows up to "
                f"{MAX_STATEMENT_DEPTH}; not checked"
            )
            return None, _finding("GPF900", path, 1, 1, msg)
    return tree, finding


# Python's tokenizer refuses more than 100 indentation levels, so only an elif chain (each elif
# an If in the previous one's orelse) nests statements deeper; lint's walkers recurse on that.
MAX_STATEMENT_DEPTH = 150
_ELIF_SCAN = MAX_STATEMENT_DEPTH - 100


def statement_depth(tree: ast.Module) -> int:
    """How deep statements nest (a statement in another's body, orelse, handler or case is one
    level deeper), walked with a stack."""
    deepest = 0
    todo: list[tuple[ast.AST, int]] = [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, name, None) or ():
                if isinstance(child, ast.stmt):
                    todo.append((child, depth + 1))
                elif isinstance(child, ast.ExceptHandler | ast.match_case):
                    todo.extend((c, depth + 1) for c in child.body)
    return deepest


def _parse(
    data: bytes, path: str, target: tuple[int, int] | None
) -> tuple[ast.Module | None, LintFinding | None]:
    running = sys.version_info[:2]
    try:
        if target is not None and target <= running:
            return _parse_for_target(data, path, max(target, _LOWEST)), None
        return ast.parse(data, filename=path), None
    except _NewerThanTarget as e:
        return e.tree, e.finding
    except SyntaxError as e:
        line, col = e.lineno or 1, max(e.offset or 1, 1)
        if _never_python(e):
            return None, _finding("GPF900", path, line, col, f"not Python: {e.msg}; not checked")
        if target is None:
            msg = (
                f"Python {_fmt(running)} cannot parse it ({e.msg}); it may be newer syntax "
                "(set target-version) and was not checked"
            )
            return None, _finding("GPF901", path, line, col, msg)
        if target < _LOWEST:
            msg = (
                f"Python's parser reads no grammar older than {_fmt(_LOWEST)} and cannot parse "
                f"it ({e.msg}); it may be valid {_fmt(target)} (`async` as a name) and was not "
                "checked"
            )
            return None, _finding("GPF901", path, line, col, msg)
        if target > running:
            msg = (
                f"Python {_fmt(running)} cannot parse it ({e.msg}); the target is "
                f"{_fmt(target)}: run gpufix lint under Python {_fmt(target)} to check it"
            )
            return None, _finding("GPF901", path, line, col, msg)
        return None, _finding("GPF900", path, line, col, f"syntax error: {e.msg}; not checked")
    except (ValueError, RecursionError, MemoryError) as e:
        # the parser's stack overflow is a RecursionError or a MemoryError with no text
        why = str(e) or "nested too deeply for Python's parser"
        return None, _finding("GPF900", path, 1, 1, f"could not parse: {why}; not checked")


_NEVER = ("null bytes", "codec can't decode", "unknown encoding", "encoding problem")


def _never_python(e: SyntaxError) -> bool:
    """Errors no Python version accepts: NUL bytes, bytes that are not the file's encoding, an
    encoding no codec has, a coding cookie that contradicts the file's UTF-8 BOM."""
    return any(words in (e.msg or "") for words in _NEVER)


class _NewerThanTarget(Exception):
    def __init__(self, tree: ast.Module, finding: LintFinding) -> None:
        super().__init__(finding.message)
        self.tree = tree
        self.finding = finding


def _parse_for_target(data: bytes, path: str, target: tuple[int, int]) -> ast.Module:
    try:
        return ast.parse(data, filename=path, feature_version=target)
    except SyntaxError as first:
        if target == sys.version_info[:2]:
            raise
        tree = ast.parse(data, filename=path)  # raises the real syntax error if there is one
        line, col = first.lineno or 1, max(first.offset or 1, 1)
        msg = (
            f"syntax newer than Python {_fmt(target)} (target-version): {first.msg}; "
            "a syntax error on the target"
        )
        raise _NewerThanTarget(tree, _finding("GPF900", path, line, col, msg)) from None
