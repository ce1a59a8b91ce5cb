"""Top-level functions (and classes) nothing in the run refers to: a helper defined, never called."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from typing import cast

from gpufix.inputs import read_prefix

from .callsites import CallSite
from .project import Project, SourceFile
from .rankcode import names_in
from .sidefiles import side_words
from .stmts import nodes_below

_WORD = re.compile(r"[A-Za-z_]\w*")
# A module that looks its functions up at run time: any of them may be called. `eval(` and
# `exec(` are the builtins, not a method (`model.eval()` is no lookup).
_DYNAMIC = re.compile(
    rb"globals\(\)|locals\(\)|vars\(|__dict__|getmembers|sys\.modules|getattr\(|import_module"
    rb"|(?<![\w.])eval\(|(?<![\w.])exec\("
)
# Libraries that make every function of the module reachable from outside the Python code: a
# command (`fire.Fire()`) or a config's `_target_: train.setup_ddp` (Hydra, OmegaConf).
_ALL_COMMANDS = frozenset({"fire", "jsonargparse", "argh", "plac", "hydra", "omegaconf"})
_COMMANDS = tuple(c.encode() for c in sorted(_ALL_COMMANDS))  # written where imported
_LOADS_BY_NAME = (b"import_module", b"__import__", b"runpy", b"spec_from_file_location")
PACKAGING = ("pyproject.toml", "setup.cfg", "setup.py")  # a package; where entry points are named


def _counts(sf: SourceFile) -> Counter[str]:
    """How often each name, attribute and word of a string constant occurs in the module
    (cached)."""
    cached = sf.cache.get("referenced")
    if cached is None:
        cached = sf.cache["referenced"] = _said(sf.tree) if sf.tree else Counter()
    return cast(Counter[str], cached)


def _said(node: ast.AST) -> Counter[str]:
    words: Counter[str] = Counter()
    for n in nodes_below(node):
        if isinstance(n, ast.Name):
            words[n.id] += 1
        elif isinstance(n, ast.Attribute):
            words[n.attr] += 1
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            words.update(_WORD.findall(n.value))
    return words


def _said_outside(sf: SourceFile, node: ast.stmt, name: str) -> bool:
    """The module names `name` outside its own definition (`super(_netG, self)` in the class
    itself is no use of it)."""
    total = _counts(sf)[name]
    return total > 0 and total > _said(node)[name]


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
    file there (a FIFO, a device or /proc/kmsg named pyproject.toml is refused unread)."""
    cache = project.cache.setdefault("packaging-files", {})
    assert isinstance(cache, dict)
    if path not in cache:
        cache[path] = read_prefix(path, _MAX_PACKAGING_BYTES) or b""
    return cast(bytes, cache[path])


def _packaging(project: Project, sf: SourceFile) -> list[bytes]:
    """The packaging files of the module's project: those of the first directory, from the
    module's own up, that has one; none when the first directory holding `.git` (the project's
    root) or `/` comes first (nothing above the root is read). Cached per directory."""
    here = Path(sf.path).resolve().parent
    cache = project.cache.setdefault("packaging-dirs", {})
    assert isinstance(cache, dict)
    if here not in cache:
        cache[here] = []
        for d in (here, *here.parents):
            texts = [_read(project, d / f) for f in PACKAGING]
            if any(texts):
                cache[here] = texts
                break
            if (d / ".git").exists():
                break
    return cast(list[bytes], cache[here])


def _entry_point(project: Project, sf: SourceFile, name: str) -> bool:
    """A packaging file names `module:name` (a console script)."""
    word = f":{name}".encode()
    return any(word in t for t in _packaging(project, sf))


def _called_elsewhere(project: Project, sf: SourceFile, name: str) -> bool:
    """Another file of the run that imports the module or a package above it (`from utils
    import setup_ddp` re-exported by `utils/__init__.py`), or loads modules by name, uses the
    name: a call, a reference, a word of a string, or an alias bound by its import; an import
    alone (`from net import init_net`, never called) is no use. A file that looks names up at
    run time (`getattr(`, `vars(`, `__dict__`, fire) may use any."""
    parts = set(sf.module.split("."))
    spelled = [p.encode() for p in parts]
    word = re.compile(rb"\b" + re.escape(name.encode()) + rb"\b")
    for f in project.files:
        if f is sf:
            continue
        loads = any(w in f.data for w in _LOADS_BY_NAME)
        if not loads and not any(p in f.data for p in spelled):
            continue  # cannot import it: none of its names is written
        if f.tree is None:
            return True  # it may import it, and does not parse: it could say anything
        if not loads and not any(parts & set(m.split(".")) for m in f.names.imported):
            continue
        if _DYNAMIC.search(f.data) or _exposes_all(f):
            return True
        if not word.search(f.data):
            continue
        bound = f.names.imports.get(name) or f.names.locals.get(name)
        if bound is not None and not parts & set(bound.split(".")[:-1]):
            continue  # its `name` is another module's (`from DCGAN import _netG`)
        refs = _counts(f)
        if name in refs or any(
            v.rsplit(".", 1)[-1] == name and k in refs for k, v in f.names.imports.items()
        ):
            return True
    return False


def _named_around(project: Project, name: str) -> bool:
    """A notebook, shell script, Makefile or config around the code names it (or the files
    around it were too many to read)."""
    words = side_words(project)
    return words is None or name.encode() in words


def _project_exposes_all(project: Project) -> bool:
    """A file of the run imports Hydra/OmegaConf or a command library: configs and command
    lines outside the code may name any function."""
    if "exposes-all" not in project.cache:
        project.cache["exposes-all"] = any(
            _exposes_all(f) for f in project.parsed() if any(c in f.data for c in _COMMANDS)
        )
    return bool(project.cache["exposes-all"])


def unused(project: Project, sf: SourceFile, name: str) -> bool:
    """Nothing uses the top-level function `name` of a script, or the top-level function or
    class `name` of a module in an application (a project without packaging files, so no code
    outside it imports it; not installed or vendored code) when lint was given directories
    (the whole project, not a list of files as pre-commit passes). Used, and so left alone: a
    function of a packaged library's module (code outside the run may call it), a script's
    class, a decorated def (a registry, a command line), one the module names outside its own
    body (a call, a reference, a word of a string), one of a module that looks names up at run
    time (`globals()`, `getattr(`, `fire`, ...), one a packaging file names as an entry point,
    one another file of the run that imports the module or a package above it uses, one a
    notebook, shell script, Makefile or config under the run's top directory names (a word
    search), and an application module's when any file imports Hydra, OmegaConf or a command
    library (configs and command lines may name it). Lint given part of a project (a file list,
    or a folder whose parent holds Python files or packaging) decides nothing for a module."""
    memo = project.cache.setdefault("unused", {})
    assert isinstance(memo, dict)
    key = (id(sf), name)
    if key not in memo:
        memo[key] = _unused(project, sf, name)
    return bool(memo[key])


def _unused(project: Project, sf: SourceFile, name: str) -> bool:
    node = sf.defs.get(name)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return False
    if node.decorator_list or not sf.module:
        return False
    script = _script(sf)
    if not script and (not project.whole or sf.context != "code" or _packaging(project, sf)):
        return False  # a library's, a test's (pytest calls it), an example's, or part of a run
    if (isinstance(node, ast.ClassDef) and script) or _said_outside(sf, node, name):
        return False
    if _DYNAMIC.search(sf.data) or _exposes_all(sf) or _entry_point(project, sf, name):
        return False
    if _project_exposes_all(project):
        return False
    return not _called_elsewhere(project, sf, name) and not _named_around(project, name)


def in_unused_def(project: Project, sf: SourceFile, site: CallSite) -> bool:
    """The call sits in a top-level function nothing refers to."""
    return bool(site.owners) and unused(project, sf, site.owners[0])


def in_unused_top(project: Project, sf: SourceFile, node: ast.AST) -> bool:
    """The node sits in a top-level function or class nothing refers to."""
    line = getattr(node, "lineno", 0)
    for name, d in sf.defs.items():
        if d.lineno <= line <= (d.end_lineno or d.lineno):
            return unused(project, sf, name)
    return False
