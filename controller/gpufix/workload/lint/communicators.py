"""Whether a module's NCCL settings can reach NCCL at all (communicators.yaml).

NCCL reads its variables in the process that calls it, while it creates a communicator; child
processes inherit the environment; NCCL refuses two ranks on one GPU. A GPU program (it imports
torch or a CUDA library) that pins its process to one GPU at its top (`CUDA_VISIBLE_DEVICES`
set to a single index, unconditionally), that no run module imports, that calls nothing in the
table and whose run modules (called or imported, three steps) call nothing in it either, never
hands an NCCL setting it writes to a communicator: the setting is inert (a copied header in a
single-GPU script), not a workaround every run carries. Anything short of that counts as reach.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import cast

import yaml

from gpufix.nccl_env import CUDA_VISIBLE_DEVICES

from .callsites import all_env_writes, imported_by
from .libraries import LibraryTable
from .libraries import load_table as load_libraries
from .project import Project, SourceFile
from .stmts import calls_in

_PATTERN = re.compile(r"^[A-Za-z_*][A-Za-z0-9_.*]*$")
_KEYWORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEPTH = 3  # run modules followed through calls, as the other cross-module checks do


@dataclass(frozen=True)
class Communicators:
    calls: tuple[str, ...]  # fnmatch patterns on the dotted name a call resolves to
    keywords: frozenset[str]  # a call given one of these keyword arguments counts, whatever it is


def parse_table(text: str) -> Communicators:
    """The table's rows, each a `call` pattern or a `keyword`; ValueError names the first bad
    row."""
    doc = yaml.safe_load(text)
    rows = doc.get("communicators") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ValueError("communicators.yaml: a non-empty `communicators` list is required")
    calls: list[str] = []
    keywords: list[str] = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or len(set(row) & {"call", "keyword"}) != 1:
            raise ValueError(f"communicators.yaml row {i}: one of call, keyword is required")
        if set(row) - {"call", "keyword", "source", "note"}:
            raise ValueError(f"communicators.yaml row {i}: keys are call or keyword, source, note")
        what, source = row.get("call") or row.get("keyword"), row.get("source")
        ok = _PATTERN if "call" in row else _KEYWORD
        if not isinstance(what, str) or not ok.fullmatch(what):
            raise ValueError(f"communicators.yaml row {i}: bad call or keyword {what!r}")
        if not isinstance(source, str) or not source.startswith("https://"):
            raise ValueError(f"communicators.yaml row {i} ({what}): source must be an https URL")
        if what in calls or what in keywords:
            raise ValueError(f"communicators.yaml row {i}: {what} listed twice")
        (calls if "call" in row else keywords).append(what)
    return Communicators(tuple(calls), frozenset(keywords))


@lru_cache(maxsize=1)
def load_table() -> Communicators:
    text = resources.files(__package__).joinpath("communicators.yaml").read_text("utf-8")
    return parse_table(text)


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(p) for p in load_table().calls))


def _matches(name: str) -> bool:
    return _pattern().match(name) is not None


def _calls(sf: SourceFile) -> list[str]:
    """Every call of the module that resolves to a dotted name, and the classes it subclasses
    (a `MyLoop(transformers.Trainer)` runs the Trainer)."""
    cached = sf.cache.get("communicator-calls")
    if cached is not None:
        return cast(list[str], cached)
    assert sf.tree is not None
    out: list[str] = []
    for n in ast.walk(sf.tree):
        if isinstance(n, ast.Call):
            name = sf.names.resolve(n.func)
            if name is None and isinstance(n.func, ast.Name):
                name = n.func.id  # a builtin (exec, __import__) or a name bound at run time
            if name:
                out.append(name)
        elif isinstance(n, ast.ClassDef):
            out.extend(b for b in map(sf.names.resolve, n.bases) if b)
    sf.cache["communicator-calls"] = out
    return out


def _keywords(sf: SourceFile) -> bool:
    """Some call is given a keyword of the table (`tp_plan=`)."""
    assert sf.tree is not None
    wanted = load_table().keywords
    return any(k.arg in wanted for n in calls_in(sf.tree) for k in n.keywords)


def _run_modules(project: Project, sf: SourceFile, names: list[str]) -> list[SourceFile]:
    """The run's modules these names (calls, bases, imports) land in. A package's re-export is
    reached through the package's own imports, which the caller follows in turn."""
    out = []
    for name in names:
        hit = project.split(sf, name)
        if hit is not None and hit[0] is not sf:
            out.append(hit[0])
    return out


def _calls_table(sf: SourceFile) -> bool:
    """The module itself calls something in the table (cached: many roots share modules)."""
    cached = sf.cache.get("calls-communicator")
    if cached is None:
        cached = any(_matches(name) for name in _calls(sf)) or _keywords(sf)
        sf.cache["calls-communicator"] = cached
    return bool(cached)


def _calls_into(project: Project, sf: SourceFile, seen: set[int], depth: int) -> bool:
    """The module calls something in the table, or a run module it calls or imports (star
    imports and side-effect imports included) does."""
    if _calls_table(sf):
        return True
    for other in _run_modules(project, sf, [*_calls(sf), *sorted(sf.names.imported)]):
        if id(other) in seen:
            continue
        seen.add(id(other))
        if depth <= 0 or _calls_into(project, other, seen, depth - 1):
            return True  # one step too deep, or one that reaches NCCL
    return False


def imported_in_run(project: Project, sf: SourceFile) -> bool:
    """A run module imports this one: by its dotted name, or by another name that resolves to
    it (`prime_rl.utils.nccl` for a file in directories without `__init__.py`; a sibling
    script's plain `import gen` for `pkg/gen.py`)."""
    if imported_by(project, sf):
        return True
    if not sf.module:
        return False
    last = sf.module.rsplit(".", 1)[-1]
    for name, files in project.import_index().items():
        if name.rsplit(".", 1)[-1] == last and any(
            f is not sf and project.find_module(f, name) is sf for f in files
        ):
            return True
    return False


def _gpu_program(sf: SourceFile) -> bool:
    """The module itself imports torch or a CUDA library (libraries.yaml), so what it runs is in
    view. One that does not (a launcher, an environment helper) hands its environment to code
    this module does not show: unknown, so reach."""
    table = load_libraries()
    return any(table.match(m) is not None for m in sf.names.imports.values())


def _pins_one_gpu(sf: SourceFile) -> bool:
    """`CUDA_VISIBLE_DEVICES` set to one GPU by a statement of the module's top level (no `if`,
    `try` or function around it), before the module imports any GPU library, and not named
    anywhere else in the module (another write, a `setdefault`, a `del`, a read)."""
    assert sf.tree is not None
    body = sf.tree.body
    pins = [
        i
        for w, node, _ in all_env_writes(sf)
        if w.key == CUDA_VISIBLE_DEVICES and w.statement
        for i, stmt in enumerate(body)
        if stmt is node and (sf.names.const_str(w.value) or "").strip().isdigit()
    ]
    named = sum(
        1
        for n in ast.walk(sf.tree)
        if isinstance(n, ast.Constant) and n.value == CUDA_VISIBLE_DEVICES
    )
    if not pins or named != len(pins):
        return False
    table = load_libraries()
    first_gpu_import = next(
        (i for i, stmt in enumerate(body) if _imports_gpu_library(stmt, table)), len(body)
    )
    return max(pins) < first_gpu_import


def _imports_gpu_library(stmt: ast.stmt, table: LibraryTable) -> bool:
    if isinstance(stmt, ast.Import):
        return any(table.match(a.name) for a in stmt.names)
    if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
        return table.match(stmt.module) is not None
    return False


def reaches_nccl(project: Project, sf: SourceFile) -> bool:
    """False only when nothing lets this module's environment reach an NCCL communicator."""
    cached = sf.cache.get("reaches-nccl")
    if cached is None:
        cached = (
            not _gpu_program(sf)
            or not _pins_one_gpu(sf)
            or imported_in_run(project, sf)
            or _calls_into(project, sf, {id(sf)}, _DEPTH)
        )
        sf.cache["reaches-nccl"] = cached
    return bool(cached)
