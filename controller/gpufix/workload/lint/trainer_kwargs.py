"""Keyword arguments a Lightning Trainer gets through `**`: a dict bound to a name (or an
attribute) whose literal entry sets the keyword, and a `Trainer(**that)` call in the same scope of
the same file, or, for a module-level name, in a file of the run that imports it
(`trainer_args = {...}` in train_cfg.py, `pl.Trainer(**trainer_args)` in train.py).

Bindings seen: `X = {"key": value, ...}`, `X = dict(key=value, ...)` and `X["key"] = value`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from .callsites import CallSite, call_sites
from .project import Project, SourceFile
from .stmts import Where, statements

_LIGHTNING = ("pytorch_lightning.", "lightning.")


@dataclass(frozen=True)
class Entry:
    target: str  # the dict's name or attribute chain, as written (`trainer_args`, `self.kw`)
    value: ast.expr  # the value the entry gives the keyword
    where: Where  # where the binding sits


def is_trainer(site: CallSite) -> bool:
    name = site.name or ""
    return name.startswith(_LIGHTNING) and name.endswith(".Trainer")


def entries(sf: SourceFile, key: str) -> Iterator[Entry]:
    """Every binding in the file that gives `key` a value in a dict."""
    for stmt, where in statements(sf.tree.body if sf.tree else []):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Subscript):
            k = target.slice
            if isinstance(k, ast.Constant) and k.value == key and _chain(target.value):
                yield Entry(_chain(target.value), value, where)
            continue
        name = _chain(target)
        found = _in_dict(value, key)
        if name and found is not None:
            yield Entry(name, found, where)


def reaches_trainer(project: Project, sf: SourceFile, entry: Entry) -> bool:
    """A Lightning Trainer call gets this dict through `**`."""
    for site in call_sites(sf):
        if is_trainer(site) and _splats(site, entry.target) and _same_scope(site, entry):
            return True
    if entry.where.owners or "." in entry.target:
        return False  # a local or an attribute: no other module sees it
    for importer in project.importers_of_file(sf):
        local = [
            n
            for n, dotted in importer.names.imports.items()
            if dotted.rsplit(".", 1)[-1] == entry.target
            and project.find_module(importer, dotted.rsplit(".", 1)[0]) is sf
        ]
        if any(is_trainer(s) and _splats(s, n) for s in call_sites(importer) for n in local):
            return True
    return False


def _in_dict(value: ast.expr, key: str) -> ast.expr | None:
    if isinstance(value, ast.Dict):
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
    elif (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict"
    ):
        for kw in value.keywords:
            if kw.arg == key:
                return kw.value
    return None


def _chain(node: ast.expr) -> str:
    """`a.b.c` as text for a name or an attribute chain on a name; "" for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _splats(site: CallSite, target: str) -> bool:
    return any(k.arg is None and _chain(k.value) == target for k in site.node.keywords)


def _same_scope(site: CallSite, entry: Entry) -> bool:
    """A name: the same function, or a module-level binding; an attribute of self: the same
    class."""
    if "." in entry.target:
        return entry.where.classes[:1] == site.classes[:1]
    return not entry.where.owners or entry.where.owners == site.owners
