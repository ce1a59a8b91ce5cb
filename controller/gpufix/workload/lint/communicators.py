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
import re
from fnmatch import fnmatchcase
from functools import lru_cache
from importlib import resources

import yaml

from gpufix.nccl_env import CUDA_VISIBLE_DEVICES

from .callsites import all_env_writes, imported_by
from .libraries import load_table as load_libraries
from .project import Project, SourceFile

_PATTERN = re.compile(r"^[A-Za-z_*][A-Za-z0-9_.*]*$")
_DEPTH = 3  # run modules followed through calls, as the other cross-module checks do


def parse_table(text: str) -> tuple[str, ...]:
    """The `call` patterns of the YAML table; ValueError names the first bad row."""
    doc = yaml.safe_load(text)
    rows = doc.get("communicators") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ValueError("communicators.yaml: a non-empty `communicators` list is required")
    out: list[str] = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) - {"call", "source", "note"}:
            raise ValueError(f"communicators.yaml row {i}: keys are call, source, note")
        call, source = row.get("call"), row.get("source")
        if not isinstance(call, str) or not _PATTERN.match(call):
            raise ValueError(f"communicators.yaml row {i}: bad call pattern {call!r}")
        if not isinstance(source, str) or not source.startswith("https://"):
            raise ValueError(f"communicators.yaml row {i} ({call}): source must be an https URL")
        if call in out:
            raise ValueError(f"communicators.yaml row {i}: {call} listed twice")
        out.append(call)
    return tuple(out)


@lru_cache(maxsize=1)
def load_table() -> tuple[str, ...]:
    text = resources.files(__package__).joinpath("communicators.yaml").read_text("utf-8")
    return parse_table(text)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def _calls(sf: SourceFile) -> list[str]:
    """Every call of the module that resolves to a dotted name, and the classes it subclasses
    (a `MyLoop(transformers.Trainer)` runs the Trainer). A call with `tp_plan=` (transformers'
    tensor parallelism starts a process group) counts as a process group."""
    assert sf.tree is not None
    out = []
    for n in ast.walk(sf.tree):
        if isinstance(n, ast.Call):
            if any(k.arg == "tp_plan" for k in n.keywords):
                out.append("torch.distributed.init_process_group")
            name = sf.names.resolve(n.func)
            if name is None and isinstance(n.func, ast.Name):
                name = n.func.id  # a builtin (exec, __import__) or a name bound at run time
            if name:
                out.append(name)
        elif isinstance(n, ast.ClassDef):
            out.extend(b for b in map(sf.names.resolve, n.bases) if b)
    return out


def _run_modules(project: Project, sf: SourceFile, names: list[str]) -> list[SourceFile]:
    """The run's modules these names (calls, bases, imports) land in; a re-export in a package's
    `__init__` is followed to the module it imports the name from."""
    out = []
    for name in names:
        hit = project.split(sf, name)
        if hit is None or hit[0] is sf:
            continue
        other, rest = hit
        out.append(other)
        if rest and other.tree is not None:
            again = other.names.imports.get(rest[0])
            deeper = project.split(other, again) if again else None
            if deeper is not None and deeper[0] is not other:
                out.append(deeper[0])
    return out


def _calls_into(project: Project, sf: SourceFile, seen: set[int], depth: int) -> bool:
    """The module calls something in the table, or a run module it calls or imports does."""
    patterns = load_table()
    calls = _calls(sf)
    if any(_matches(name, patterns) for name in calls):
        return True
    for other in _run_modules(project, sf, [*calls, *sf.names.imports.values()]):
        if id(other) in seen:
            continue
        seen.add(id(other))
        if other.tree is None or depth <= 0 or _calls_into(project, other, seen, depth - 1):
            return True  # a run module we cannot read, or one that reaches NCCL
    return False


def _imported(project: Project, sf: SourceFile) -> bool:
    """A run module imports this one: by its dotted name, or by a longer name that resolves to
    it (`prime_rl.utils.nccl` for a file in directories without `__init__.py`)."""
    if imported_by(project, sf):
        return True
    if not sf.module:
        return False
    tail = "." + sf.module
    for name, files in project.import_index().items():
        if name.endswith(tail) and any(
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
    """`CUDA_VISIBLE_DEVICES` set to one GPU at module level, under no `if`."""
    for w, _, where in all_env_writes(sf):
        if w.key == CUDA_VISIBLE_DEVICES and not where.owners and not where.tests:
            value = sf.names.const_str(w.value)
            if value is not None and value.strip().isdigit():
                return True
    return False


def reaches_nccl(project: Project, sf: SourceFile) -> bool:
    """False only when nothing lets this module's environment reach an NCCL communicator."""
    cached = sf.cache.get("reaches-nccl")
    if cached is None:
        cached = (
            not _gpu_program(sf)
            or not _pins_one_gpu(sf)
            or _imported(project, sf)
            or _calls_into(project, sf, {id(sf)}, _DEPTH)
        )
        sf.cache["reaches-nccl"] = cached
    return bool(cached)
