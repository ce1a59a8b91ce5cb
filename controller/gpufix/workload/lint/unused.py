"""Top-level functions and classes nothing in the run refers to (a helper defined, never called)."""

from __future__ import annotations

import ast
import re

from .callsites import CallSite
from .project import Project, SourceFile

_WORD = re.compile(r"[A-Za-z_]\w*")


def _referenced(sf: SourceFile) -> set[str]:
    """Every name, attribute and word of a string constant in the module (cached)."""
    cached = sf.cache.get("referenced")
    if cached is None:
        words: set[str] = set()
        for n in ast.walk(sf.tree) if sf.tree else ():
            if isinstance(n, ast.Name):
                words.add(n.id)
            elif isinstance(n, ast.Attribute):
                words.add(n.attr)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                words.update(_WORD.findall(n.value))
        sf.cache["referenced"] = cached = words
    return cached  # type: ignore[return-value]


def _script(sf: SourceFile) -> bool:
    """The module is run as a program: it has an `if __name__ == "__main__":` block."""
    return any(
        isinstance(s, ast.If)
        and isinstance(s.test, ast.Compare)
        and isinstance(s.test.left, ast.Name)
        and s.test.left.id == "__name__"
        for s in (sf.tree.body if sf.tree else ())
    )


def unused(project: Project, sf: SourceFile, name: str) -> bool:
    """Nothing refers to the script's top-level def `name`: the module runs as a program (a
    library's functions may be called from code outside the run), no name, attribute or string
    of the module says it (its own def does not count; a decorated def is used through its
    decorator, a registry or a command line), and no module importing this one contains the
    word. A module whose dotted name is unknown cannot be looked up: its defs count as used."""
    node = sf.defs.get(name)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return False
    if node.decorator_list or not sf.module or not _script(sf) or name in _referenced(sf):
        return False
    word = name.encode()
    return not any(word in f.data for f in project.importers_of(sf.module) if f is not sf)


def in_unused_def(project: Project, sf: SourceFile, site: CallSite) -> bool:
    """The call sits in a top-level function or class nothing refers to."""
    return bool(site.owners) and unused(project, sf, site.owners[0])
