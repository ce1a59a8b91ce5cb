"""What "torch (or CUDA) is loaded" means at a point of a program: the flow walker's state."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .libraries import Library, LibraryTable
from .names import absolute_module
from .project import SourceFile


@dataclass(frozen=True)
class Load:
    """An import that has run on every path to the current statement and loads torch or CUDA."""

    library: str  # the listed library it loads ("torch", "cupy", "numba.cuda")
    kind: str  # imports-torch | cuda-runtime
    text: str  # "import torch", "from transformers import ..."
    path: str
    rel: str  # the path relative to the project root, for messages
    line: int
    col_offset: int
    via: str = ""  # "in setup() called at line 12"; "train.py:3 imports torch"

    def describe(self, here: str) -> str:
        """ "`import torch` (line 3)" or "`import torch` (utils.py:3)" seen from file `here`."""
        where = f"line {self.line}" if self.path == here else f"{self.rel}:{self.line}"
        detail = f", {self.via}" if self.via else ""
        return f"`{self.text}` ({where}{detail})"


State = dict[str, Load]  # library -> first load; insertion order = execution order


def merge(states: Iterable[State | None]) -> State | None:
    """Loads certain on every path that falls through; None when no path does."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    first = live[0]
    return {k: v for k, v in first.items() if all(k in s for s in live[1:])}


def add(state: State, loads: Iterable[Load]) -> State:
    out = state
    for load in loads:
        if load.library not in out:
            out = {**out, load.library: load}
    return out


def import_text(stmt: ast.Import | ast.ImportFrom, name: str) -> str:
    if isinstance(stmt, ast.Import):
        return f"import {name}"
    return f"from {'.' * stmt.level}{stmt.module or ''} import ..."


def imported_modules(sf: SourceFile, stmt: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(absolute module, text) for each module an import statement loads."""
    if isinstance(stmt, ast.Import):
        return [(a.name, import_text(stmt, a.name)) for a in stmt.names]
    base = absolute_module(sf.package, stmt.level, stmt.module)
    if base is None:
        return []
    text = import_text(stmt, base)
    # `from pkg import mod` loads pkg and, when mod is a submodule, pkg.mod.
    return [(base, text)] + [(f"{base}.{a.name}", text) for a in stmt.names if a.name != "*"]


def library_load(
    table: LibraryTable, dotted: str, text: str, sf: SourceFile, node: ast.AST
) -> Load | None:
    lib: Library | None = table.match(dotted)
    if lib is None:
        return None
    line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0)
    return Load(lib.module, lib.kind, text, sf.path, sf.rel, line, col)


def through(load: Load, text: str, sf: SourceFile, node: ast.AST, target: SourceFile) -> Load:
    """A load that happens because `node` imports project module `target`, which loads it."""
    inner = f"`{load.text}` at {load.rel}:{load.line}"
    return replace(
        load,
        text=text,
        path=sf.path,
        rel=sf.rel,
        line=getattr(node, "lineno", 1),
        col_offset=getattr(node, "col_offset", 0),
        via=f"{target.rel} runs {inner}",
    )
