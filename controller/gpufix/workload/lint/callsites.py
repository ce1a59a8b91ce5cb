"""Every call in a file with its resolved name and where it sits (enclosing defs, `if` tests),
gathered in one walk and kept for the run; and the facts about a module built from them."""

from __future__ import annotations

import ast
import functools
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import cast

from .envwrites import EnvWrite, env_writes
from .project import Project, SourceFile
from .prune import nodes_on
from .stmts import Where, calls_in

# Calls that create the default process group (DeepSpeed's sets no device: deepspeed-course#17).
PROCESS_GROUP = frozenset(
    {
        "torch.distributed.init_process_group",
        "torch.distributed.distributed_c10d.init_process_group",
        "deepspeed.init_distributed",
        "deepspeed.comm.init_distributed",
        "deepspeed.comm.comm.init_distributed",
    }
)
FABRIC = frozenset(
    {
        "lightning.Fabric",
        "lightning.fabric.Fabric",
        "lightning.fabric.fabric.Fabric",
        "lightning_fabric.Fabric",
        "lightning_fabric.fabric.Fabric",
    }
)
DISTRIBUTED = PROCESS_GROUP | frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "deepspeed.initialize",
        "accelerate.Accelerator",
        "torch.multiprocessing.spawn",
        # Lightning Fabric runs one process per device under its DDP/FSDP strategies (its
        # launch() starts them; src/lightning/fabric/fabric.py) and sets each one's GPU itself
        # (CUDAAccelerator.setup_device: torch.cuda.set_device, fabric/accelerators/cuda.py).
        *FABRIC,
    }
)
SELECT_DEVICE = frozenset({"torch.cuda.set_device", "torch.cuda.device"})
TORCH_LOAD = frozenset({"torch.load", "torch.serialization.load"})


@dataclass(frozen=True)
class CallSite:
    node: ast.Call
    name: str | None  # the dotted name the callee resolves to
    owners: tuple[str, ...]  # enclosing classes and functions, outermost first
    tests: tuple[ast.expr, ...]  # tests of the `if`s the call sits under
    classes: tuple[str, ...] = ()  # the enclosing classes alone


def call_sites(sf: SourceFile) -> list[CallSite]:
    cached = sf.cache.get("calls")
    if cached is None:
        cached = _collect(sf)
        sf.cache["calls"] = cached
    return cast(list[CallSite], cached)


# Words on the lines where a call any check looks at can sit (the rest of a file is not walked).
CALL_WORDS = (
    "DataParallel", "data_parallel", "init_process_group", "init_distributed", "Accelerator",
    "PartialState", "deepspeed", "initialize", "spawn", "load", "set_device", "cuda", "device",
    "barrier", "detect_anomaly", "Trainer", "Fabric", "nvidia", "GPUtil", "gpustat", "nvml",
    "nvitop", "eval", "backward", "train", "DataLoader", "TrainingArguments",
)  # fmt: skip


def _call_words(sf: SourceFile) -> tuple[str, ...]:
    """CALL_WORDS, plus the local names bound to something they name (`DP` for DataParallel)."""
    bound = {**sf.names.imports, **sf.names.aliases, **sf.names.instances}
    extra = sorted(n for n, v in bound.items() if any(w in v for w in CALL_WORDS))
    return (*CALL_WORDS, *extra)


def call_sites_in(sf: SourceFile, tops: AbstractSet[str]) -> list[CallSite]:
    """The call sites inside the module's outermost defs and classes of these names, without
    walking the rest of the module when its whole index is not built yet."""
    cached = sf.cache.get("calls")
    if cached is not None:
        return [c for c in cast(list[CallSite], cached) if c.owners and c.owners[0] in tops]
    return _collect(sf, tops)


def _collect(
    sf: SourceFile, tops: AbstractSet[str] | None = None, words: tuple[str, ...] | None = None
) -> list[CallSite]:
    out: list[CallSite] = []
    names = sf.names
    for node, where in nodes_on(sf, words or _call_words(sf), tops):
        for n in calls_in(node):
            resolved = names.resolve(n.func)
            out.append(CallSite(n, resolved, where.owners, where.tests, where.classes))
    out.sort(key=lambda c: (c.node.lineno, c.node.col_offset))
    return out


def calls_with_words(sf: SourceFile, words: tuple[str, ...]) -> list[CallSite]:
    """The calls on the lines where one of these words is written (kept for the run)."""
    key = "words:" + "|".join(words)
    cached = sf.cache.get(key)
    if cached is None:
        cached = sf.cache[key] = _collect(sf, words=words)
    return cast(list[CallSite], cached)


def named(sf: SourceFile, names: frozenset[str]) -> list[CallSite]:
    if not sf.data.isascii():
        return [c for c in call_sites(sf) if c.name in names]  # NFKC: not found as written
    if not any(word in sf.data for word in _last_words(names)):
        return []  # a call resolves to `a.b.c` only where `c` is written
    if "calls" in sf.cache or not _narrows(names):
        return [c for c in call_sites(sf) if c.name in names]
    key = f"named:{_key(names)}"
    cached = sf.cache.get(key)
    if cached is None:
        cached = sf.cache[key] = [
            c for c in _collect(sf, words=_words(sf, names)) if c.name in names
        ]
    return cast(list[CallSite], cached)


def _words(sf: SourceFile, names: frozenset[str]) -> tuple[str, ...]:
    """Where a call to one of `names` can be written: its last name, or a name bound to it."""
    last = [w.decode() for w in _last_words(names)]
    bound = {**sf.names.imports, **sf.names.aliases}
    return (*last, *sorted(n for n, v in bound.items() if any(w in v for w in last)))


@functools.cache
def _narrows(names: frozenset[str]) -> bool:
    """Walking only the lines that name these calls finds the same calls as the full index:
    every last name holds a CALL_WORD, so those lines are among the index's lines."""
    return all(any(w in n.decode() for w in CALL_WORDS) for n in _last_words(names))


@functools.cache
def _key(names: frozenset[str]) -> str:
    return "|".join(sorted(names))


@functools.cache
def _last_words(names: frozenset[str]) -> tuple[bytes, ...]:
    return tuple(sorted({n.rsplit(".", 1)[-1].encode() for n in names}))


def environ_words(sf: SourceFile) -> tuple[str, ...]:
    """Where an environment write can be: `environ`, `putenv`, or a name bound to os.environ."""
    bound = {**sf.names.imports, **sf.names.aliases}
    return ("environ", "putenv", *sorted(n for n, v in bound.items() if v == "os.environ"))


def all_env_writes(sf: SourceFile) -> list[tuple[EnvWrite, ast.AST, Where]]:
    """(write, the node it is in, where) for every environment write of the module."""
    cached = sf.cache.get("env-writes")
    if cached is None:
        cached = [
            (w, n, where)
            for node, where in nodes_on(sf, environ_words(sf))
            for n in ast.walk(node)
            if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Call)
            for w in env_writes(sf.names, n)
        ]
        sf.cache["env-writes"] = cached
    return cast(list[tuple[EnvWrite, ast.AST, Where]], cached)


def one_rank_group(site: CallSite) -> bool:
    """A process group of one rank (`world_size=1` written as a literal: a self-test)."""
    return (
        site.name in PROCESS_GROUP and getattr(keyword(site.node, "world_size"), "value", None) == 1
    )


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def imported_by(project: Project, sf: SourceFile) -> list[SourceFile]:
    """The run's modules that import this one (anywhere in them): by its dotted name, or by a
    longer name that finds it from the importer (a folder without __init__.py)."""
    if not sf.module:
        return []
    return [f for f in project.importers_of_file(sf) if f is not sf]


def imported_modules(project: Project, sf: SourceFile) -> list[SourceFile]:
    """The run's modules this one imports (one step)."""
    out = []
    for dotted in set(sf.names.imports.values()):
        hit = project.split(sf, dotted)
        if hit is not None and hit[0] is not sf and hit[0].tree is not None:
            out.append(hit[0])
    return out


def neighbours(project: Project, sf: SourceFile) -> list[SourceFile]:
    """The run's modules this one imports, and those that import it (one step each way)."""
    return imported_modules(project, sf) + imported_by(project, sf)


def importers(project: Project, sf: SourceFile, depth: int = 3) -> list[SourceFile]:
    """Modules that import this one, directly or through up to `depth` steps."""
    seen: dict[str, SourceFile] = {}
    frontier = [sf]
    for _ in range(depth):
        nxt = [o for f in frontier for o in imported_by(project, f) if o.path not in seen]
        for o in nxt:
            seen[o.path] = o
        frontier = nxt
    return list(seen.values())
