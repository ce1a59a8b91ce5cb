"""Every call in a file with its resolved name and where it sits (enclosing defs, `if` tests),
gathered in one walk and kept for the run; and the facts about a module built from them."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import cast

from gpufix.nccl_env import CUDA_VISIBLE_DEVICES

from .envwrites import env_writes
from .project import Project, SourceFile

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
DISTRIBUTED = PROCESS_GROUP | frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "deepspeed.initialize",
        "accelerate.Accelerator",
        "torch.multiprocessing.spawn",
    }
)
SELECT_DEVICE = frozenset({"torch.cuda.set_device", "torch.cuda.device"})


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


def _collect(sf: SourceFile) -> list[CallSite]:
    assert sf.tree is not None
    out: list[CallSite] = []
    Item = tuple[ast.AST, tuple[str, ...], tuple[ast.expr, ...], tuple[str, ...]]
    todo: list[Item] = [(sf.tree, (), (), ())]
    names = sf.names
    while todo:
        node, owners, tests, classes = todo.pop()
        if isinstance(node, ast.Call):
            out.append(CallSite(node, names.resolve(node.func), owners, tests, classes))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            owners = (*owners, node.name)
        if isinstance(node, ast.ClassDef):
            classes = (*classes, node.name)
        if isinstance(node, ast.If):
            todo.append((node.test, owners, tests, classes))
            inner = (*tests, node.test)
            todo.extend((child, owners, inner, classes) for child in node.body)
            todo.extend((child, owners, inner, classes) for child in node.orelse)
            continue
        todo.extend((child, owners, tests, classes) for child in ast.iter_child_nodes(node))
    out.sort(key=lambda c: (c.node.lineno, c.node.col_offset))
    return out


def named(sf: SourceFile, names: frozenset[str]) -> list[CallSite]:
    return [c for c in call_sites(sf) if c.name in names]


def is_multi_rank(sf: SourceFile) -> bool:
    """The module starts a process group, wraps a model for DDP/FSDP or runs under accelerate."""
    return bool(named(sf, DISTRIBUTED - {"torch.multiprocessing.spawn"}))


def writes_visible_devices(sf: SourceFile) -> bool:
    """The module sets CUDA_VISIBLE_DEVICES itself (each rank then sees its own GPU as cuda:0)."""
    if b"VISIBLE_DEVICES" not in sf.data or sf.tree is None:
        return False
    return any(
        w.key == CUDA_VISIBLE_DEVICES
        for n in ast.walk(sf.tree)
        if isinstance(n, ast.Assign | ast.Call | ast.AugAssign)
        for w in env_writes(sf.names, n)
    )


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def neighbours(project: Project, sf: SourceFile) -> list[SourceFile]:
    """The run's modules this one imports, and those that import it (one step each way)."""
    out = []
    for dotted in set(sf.names.imports.values()):
        hit = project.split(sf, dotted)
        if hit is not None and hit[0] is not sf and hit[0].tree is not None:
            out.append(hit[0])
    module = sf.module
    for other in project.parsed():
        if other is sf or not module or module.encode() not in other.data:
            continue
        if any(v == module or v.startswith(module + ".") for v in other.names.imports.values()):
            out.append(other)
    return out
