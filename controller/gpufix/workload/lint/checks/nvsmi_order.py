"""GPF007: a GPU picked with nvidia-smi / NVML numbering written to CUDA_VISIBLE_DEVICES, or given
to torch.cuda.set_device / torch.device, while CUDA still numbers GPUs fastest-first (no
CUDA_DEVICE_ORDER=PCI_BUS_ID anywhere in the run).

For CUDA_VISIBLE_DEVICES the index is a value computed at run time, or one of several literals
the module picks among (a branch per GPU it listed), never a single literal (chosen by hand).
For set_device / torch.device the index must come from nvidia-smi or NVML itself (followed
through names and the module's own functions), since those calls take the rank's index too."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gpufix.nccl_env import CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES, PCI_BUS_ORDER

from ..callsites import CallSite, all_env_writes, call_sites, neighbours
from ..project import SourceFile
from ..prune import segment
from ..report import insert_before
from . import Check, CheckContext

# Modules that number GPUs the way nvidia-smi does (PCI bus order).
NVML_MODULES = ("GPUtil", "gpustat", "pynvml", "nvidia_smi", "py3nvml", "nvitop")
TRIGGERS = (b"VISIBLE_DEVICES", b"set_device", b"device(", b"map_location")
# Calls that select a GPU by CUDA's index (torch.load: its map_location).
_SELECTS = frozenset({"torch.cuda.set_device", "torch.device", "torch.cuda.device"})
_LOADS = frozenset({"torch.load", "torch.serialization.load"})


def _uses_smi_numbering(sf: SourceFile) -> bool:
    """The module asks nvidia-smi (or an NVML wrapper) for GPU indices."""
    for c in call_sites(sf):
        if c.name and c.name.split(".")[0] in NVML_MODULES:
            return True
        if any("nvidia-smi" in (sf.names.const_str(a) or "") for a in _strings(c.node)):
            return True
    return _runs_smi_constant(sf)


def _runs_smi_constant(sf: SourceFile) -> bool:
    """A call is given a module constant that holds an nvidia-smi command (`os.popen(cmd)`).

    The call's own line need not mention nvidia-smi, so the pruned call sites miss it; this
    walks the module only when one of its string constants names nvidia-smi.
    """
    smi = {name for name, value in sf.names.strings.items() if "nvidia-smi" in value}
    if not smi or sf.tree is None:
        return False
    return any(
        isinstance(node, ast.Call)
        and any(isinstance(a, ast.Name) and a.id in smi for a in _strings(node))
        for node in ast.walk(sf.tree)
    )


def _strings(call: ast.Call) -> list[ast.expr]:
    out: list[ast.expr] = []
    for a in call.args:
        out.extend(a.elts if isinstance(a, ast.List | ast.Tuple) else [a])
    return out


def _orders_by_pci(ctx: CheckContext, here: SourceFile, ordering: set[int]) -> bool:
    """This module, or one it imports or that imports it, sets CUDA_DEVICE_ORDER=PCI_BUS_ID.
    `ordering`: the files that mention CUDA_DEVICE_ORDER at all."""
    if not ordering:
        return False
    for sf in [here, *neighbours(ctx.project, here)]:
        if id(sf) in ordering:
            for w, _, _ in all_env_writes(sf):
                if w.key == CUDA_DEVICE_ORDER and sf.names.const_str(w.value) == PCI_BUS_ORDER:
                    return True
    return False


def _asks_nvml(sf: SourceFile, expr: ast.AST, names: set[str], funcs: set[str]) -> bool:
    """The expression calls nvidia-smi or an NVML wrapper, a function of the module that returns
    such a value, or reads a name bound to one."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Name) and n.id in names:
            return True
        if not isinstance(n, ast.Call):
            continue
        called = sf.names.resolve(n.func) or ""
        own = called.removeprefix(f"{sf.module}.") if sf.module else called
        if called.split(".")[0] in NVML_MODULES or own in funcs:
            return True
        if any("nvidia-smi" in (sf.names.const_str(a) or "") for a in _strings(n)):
            return True
    return False


def _scoped(
    node: ast.AST, owners: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], ast.AST]]:
    """Every node with the names of the classes and functions around it (as CallSite.owners)."""
    for child in ast.iter_child_nodes(node):
        yield owners, child
        inner = owners
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = (*owners, child.name)
        yield from _scoped(child, inner)


Scopes = dict[tuple[str, ...], set[str]]


def _nvml_values(sf: SourceFile) -> tuple[Scopes, set[str]]:
    """(names per scope, functions): names bound to a value computed from nvidia-smi/NVML (also
    a loop variable over one), in the function (or module) that binds them, and the module's
    functions that return one; two passes, so a name derived from another, or a function
    returning such a name, counts."""
    names: Scopes = {}
    funcs: set[str] = set()
    nodes = list(_scoped(sf.tree)) if sf.tree else []
    for _ in range(2):
        for owners, n in nodes:
            if isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None:
                targets, value = (n.targets if isinstance(n, ast.Assign) else [n.target]), n.value
            elif isinstance(n, ast.For | ast.AsyncFor | ast.comprehension):
                targets, value = [n.target], n.iter
            else:
                continue
            if _asks_nvml(sf, value, _visible(names, owners), funcs):
                bound = names.setdefault(owners, set())
                bound.update(x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name))
        for owners, d in nodes:
            if not isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            inside = _visible(names, (*owners, d.name))
            returns = (r.value for r in ast.walk(d) if isinstance(r, ast.Return) and r.value)
            if any(_asks_nvml(sf, r, inside, funcs) for r in returns):
                funcs.add(d.name)
    return names, funcs


def _visible(names: Scopes, owners: tuple[str, ...]) -> set[str]:
    """Names bound in this scope or at module level."""
    return names.get(owners, set()) | names.get((), set())


def _device_given(site: CallSite) -> list[ast.expr]:
    """What names the GPU in a call that selects one (nothing for other calls)."""
    if site.name in _SELECTS:
        return [*site.node.args, *(k.value for k in site.node.keywords)]
    if site.name in _LOADS:
        return [k.value for k in site.node.keywords if k.arg == "map_location"]
    return []


def _selects_by_nvml_index(ctx: CheckContext, sf: SourceFile) -> None:
    sites = [(c, given) for c in call_sites(sf) if (given := _device_given(c))]
    if not sites or sf.tree is None:
        return
    names, funcs = _nvml_values(sf)
    for c, given in sites:
        if not any(_asks_nvml(sf, a, _visible(names, c.owners), funcs) for a in given):
            continue
        ctx.reporter.add(
            "GPF007",
            sf,
            c.node,
            f"{c.name} given a GPU index that nvidia-smi/NVML numbered in PCI bus order, but "
            "CUDA numbers GPUs fastest first: set CUDA_DEVICE_ORDER=PCI_BUS_ID before CUDA "
            "starts (in the shell, or before import torch), or the job may run on another GPU",
        )


def _candidate(sf: SourceFile) -> bool:
    """Mentions nvidia-smi or an NVML wrapper (for CUDA_VISIBLE_DEVICES also any "nvidia", as in
    a module constant holding the command)."""
    if b"VISIBLE_DEVICES" in sf.data and b"nvidia" in sf.data:
        return True
    return b"nvidia-smi" in sf.data or _nvml(sf)


def run(ctx: CheckContext) -> None:
    candidates = [sf for sf in ctx.with_any(TRIGGERS) if _candidate(sf)]
    ordering = (
        {id(sf) for sf in ctx.project.parsed() if b"DEVICE_ORDER" in sf.data}
        if candidates
        else set()
    )
    for sf in candidates:
        if not _uses_smi_numbering(sf) or _orders_by_pci(ctx, sf, ordering):
            continue
        _selects_by_nvml_index(ctx, sf)
        writes = [(w, stmt) for w, stmt, _ in all_env_writes(sf) if w.key == CUDA_VISIBLE_DEVICES]
        literals = {sf.names.const_str(w.value) for w, _ in writes} - {None}
        for w, stmt in writes:
            if sf.names.const_str(w.value) is not None and len(literals) < 2:
                # one literal was chosen by hand; several stand for a choice among the GPUs
                # the module listed with nvidia-smi ("0" if the user picked the first, ...)
                continue
            fix = None
            if w.statement and w.environ is not None and isinstance(stmt, ast.stmt):
                env = segment(sf, w.environ) or "os.environ"
                code = f'{env}["{CUDA_DEVICE_ORDER}"] = "{PCI_BUS_ORDER}"'
                fix = insert_before(sf, stmt, code, "Number GPUs as nvidia-smi does")
            ctx.reporter.add(
                "GPF007",
                sf,
                w.node,
                "CUDA_VISIBLE_DEVICES set from a GPU index that nvidia-smi/NVML numbered in PCI "
                "bus order, but CUDA numbers GPUs fastest first: set "
                "CUDA_DEVICE_ORDER=PCI_BUS_ID first, or the job may run on another GPU",
                fix=fix,
            )


def _nvml(sf: SourceFile) -> bool:
    return any(m.encode() in sf.data for m in NVML_MODULES)


CHECK = Check(("GPF007",), run)
