"""The controller stays in small pieces (issue 14): no class over 250 lines, no function over
100. The two programs shipped to hosts are single files by design and are not measured here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "controller" / "gpufix"
MAX_CLASS, MAX_FUNCTION = 250, 100


def _sizes() -> list[tuple[str, str, int]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                out.append((f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}", kind, size))
    return out


def test_no_big_classes_or_functions() -> None:
    big = [
        f"{where} ({kind}, {size} lines)"
        for where, kind, size in _sizes()
        if size > (MAX_CLASS if kind == "class" else MAX_FUNCTION)
    ]
    assert not big, "split these along their seams:\n" + "\n".join(big)


def test_the_measure_sees_the_package() -> None:
    sizes = _sizes()
    assert len(sizes) > 300, len(sizes)
    assert max(size for _, kind, size in sizes if kind == "function") > 40
