"""Top-level functions nothing in the run refers to (a helper defined, never called)."""

from __future__ import annotations

import ast
import contextlib
import re
from pathlib import Path

from .callsites import CallSite
from .project import Project, SourceFile
from .rankcode import names_in

_WORD = re.compile(r"[A-Za-z_]\w*")
# A module that looks its functions up at run time: any of them may be called.
_DYNAMIC = (
    b"globals()", b"locals()", b"vars()", b"sys.modules", b"getattr(", b"import_module",
    b"eval(", b"exec(",
)  # fmt: skip
# Libraries that make every function of the module reachable from outside the Python code: a
# command (`fire.Fire()`) or a config's `_target_: train.setup_ddp` (Hydra, OmegaConf).
_ALL_COMMANDS = frozenset({"fire", "jsonargparse", "argh", "plac", "hydra", "omegaconf"})
_LOADS_BY_NAME = (b"import_module", b"__import__", b"runpy", b"spec_from_file_location")
_PACKAGING = ("pyproject.toml", "setup.cfg", "setup.py")  # where entry points are named


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
    body = sf.tree.body if sf.tree else []
    return any(isinstance(s, ast.If) and "__name__" in names_in(s.test) for s in body)


def _exposes_all(sf: SourceFile) -> bool:
    """The module imports a library that can make any of its functions a command."""
    return any(v.split(".")[0] in _ALL_COMMANDS for v in sf.names.imports.values())


_MAX_PACKAGING_BYTES = 1 << 20  # a packaging file is read up to 1 MiB


def _read(project: Project, path: Path) -> bytes:
    """A packaging file's bytes (at most 1 MiB), read once per run; b"" when there is no regular
    file there (a FIFO or a device named pyproject.toml is not opened)."""
    cache = project.cache.setdefault("packaging-files", {})
    assert isinstance(cache, dict)
    if path not in cache:
        cache[path] = b""
        if path.is_file():
            with contextlib.suppress(OSError), path.open("rb") as f:
                cache[path] = f.read(_MAX_PACKAGING_BYTES)
    return cache[path]


def _entry_point(project: Project, sf: SourceFile, name: str) -> bool:
    """A packaging file names `module:name` (a console script): looked for from the module's
    directory up to the first directory that has one, or that holds `.git` (the project's
    root; nothing above it is read)."""
    word = f":{name}".encode()
    for d in (here := Path(sf.path).resolve().parent, *here.parents):
        texts = [_read(project, d / f) for f in _PACKAGING]
        if any(word in t for t in texts):
            return True
        if any(texts) or (d / ".git").exists():
            return False
    return False


def _imported_by(project: Project, sf: SourceFile, name: str) -> bool:
    """Another file of the run says the word and imports a module of this one's name (by any
    package path, so a folder without __init__.py counts too) or loads modules by name."""
    base = re.escape(sf.module.rsplit(".", 1)[-1].encode())
    imports = re.compile(rb"\b" + base + rb"\s+import\b|\bimport\b[^\n]*\b" + base + rb"\b")
    word = re.compile(rb"\b" + re.escape(name.encode()) + rb"\b")
    return any(
        word.search(f.data) and (imports.search(f.data) or any(w in f.data for w in _LOADS_BY_NAME))
        for f in project.files
        if f is not sf
    )


def unused(project: Project, sf: SourceFile, name: str) -> bool:
    """Nothing refers to the script's top-level function `name`. Used, and so left alone: a
    function of a library (code outside the run may call it), a decorated one (a registry, a
    command line), one the module names (a call, a reference, a string), one of a module that
    looks functions up at run time (`globals()`, `getattr(`, `fire`, ...), one a packaging file
    names as an entry point, one another file of the run names and imports."""
    node = sf.defs.get(name)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.decorator_list:
        return False
    if not sf.module or not _script(sf) or name in _referenced(sf):
        return False
    if any(d in sf.data for d in _DYNAMIC) or _exposes_all(sf) or _entry_point(project, sf, name):
        return False
    return not _imported_by(project, sf, name)


def in_unused_def(project: Project, sf: SourceFile, site: CallSite) -> bool:
    """The call sits in a top-level function nothing refers to."""
    return bool(site.owners) and unused(project, sf, site.owners[0])
