"""Writes to the process environment with a key known statically, in any of Python's spellings."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .names import NameTable


@dataclass(frozen=True)
class EnvWrite:
    key: str
    value: ast.expr | None
    node: ast.AST  # where to report
    environ: ast.expr | None = None  # the `os.environ` expression written to, when there is one
    statement: bool = False  # the write is the whole statement (`os.environ[K] = v`)


def walk_here(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter code which does not run here (lambdas, nested defs, classes)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(
                child, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
            ):
                todo.append(child)


def _dict_writes(names: NameTable, d: ast.AST, where: ast.AST) -> list[EnvWrite]:
    out = []
    if isinstance(d, ast.Dict):
        for k, v in zip(d.keys, d.values, strict=True):
            key = names.const_str(k)
            if key is not None:
                out.append(EnvWrite(key, v, where))
    elif isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "dict":
        out.extend(EnvWrite(kw.arg, kw.value, where) for kw in d.keywords if kw.arg)
    return out


def _assign_writes(names: NameTable, node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> list:
    out: list[EnvWrite] = []
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    single = len(targets) == 1
    for target in targets:
        for t in ast.walk(target):
            if isinstance(t, ast.Subscript) and names.is_environ(t.value):
                key = names.const_str(t.slice)
                if key is not None:
                    value = node.value if isinstance(target, ast.Subscript) else None
                    whole = single and t is target and not isinstance(node, ast.AugAssign)
                    out.append(EnvWrite(key, value, t, t.value, whole))
    if (
        isinstance(node, ast.AugAssign)
        and isinstance(node.op, ast.BitOr)
        and names.is_environ(node.target)
    ):
        out.extend(_dict_writes(names, node.value, node))
    return out


def _call_writes(names: NameTable, node: ast.Call) -> list[EnvWrite]:
    f = node.func
    if isinstance(f, ast.Attribute) and names.is_environ(f.value):
        if f.attr in ("setdefault", "__setitem__") and node.args:
            key = names.const_str(node.args[0])
            if key is not None:
                value = node.args[1] if len(node.args) > 1 else None
                return [EnvWrite(key, value, node, f.value)]
        elif f.attr == "update":
            out = _dict_writes(names, node.args[0], node) if node.args else []
            out.extend(EnvWrite(kw.arg, kw.value, node) for kw in node.keywords if kw.arg)
            return out
        return []
    if names.resolve(f) == "os.putenv" and node.args:
        key = names.const_str(node.args[0])
        if key is not None:
            return [EnvWrite(key, node.args[1] if len(node.args) > 1 else None, node)]
    return []


def env_writes(names: NameTable, node: ast.AST) -> list[EnvWrite]:
    """Environment writes made by this node itself."""
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        return _assign_writes(names, node)
    if isinstance(node, ast.Call):
        return _call_writes(names, node)
    return []


def writes_in(names: NameTable, roots: Iterable[ast.AST]) -> list[EnvWrite]:
    """Every write in these nodes that runs when they run (nested defs excluded)."""
    return [w for root in roots for n in walk_here(root) for w in env_writes(names, n)]
