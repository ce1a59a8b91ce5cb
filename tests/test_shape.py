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


def _type_names() -> dict[str, list[str]]:
    """Every class, and every module-level type alias (a CamelCase name bound to a type, as
    `Progress = Callable[...]`), by name, with the modules that define it."""
    homes: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for stmt in tree.body:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
            if isinstance(stmt, ast.AnnAssign):
                target = stmt.target
            if isinstance(target, ast.Name) and _camel(target.id):
                names.add(target.id)
        for name in names:
            homes.setdefault(name, []).append(str(path.relative_to(PACKAGE)))
    return homes


def _camel(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


def test_one_home_per_type_name() -> None:
    clashes = {name: where for name, where in _type_names().items() if len(where) > 1}
    assert not clashes, "one name, one home (rename the less central one):\n" + "\n".join(
        f"{name}: {', '.join(where)}" for name, where in sorted(clashes.items())
    )


def test_the_name_check_sees_classes_and_aliases() -> None:
    homes = _type_names()
    assert homes["Progress"] == ["runner.py"]  # an alias
    assert homes["KnowledgeBase"] == ["engine/kb.py"]  # a class
    assert len(homes) > 100, len(homes)
