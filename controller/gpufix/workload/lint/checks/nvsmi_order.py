"""GPF007: a GPU picked with nvidia-smi / NVML numbering written to CUDA_VISIBLE_DEVICES, or given
to torch.cuda.set_device / torch.device, while CUDA still numbers GPUs fastest-first (no
CUDA_DEVICE_ORDER=PCI_BUS_ID anywhere in the run).

For CUDA_VISIBLE_DEVICES the index is a value computed at run time, or one of several literals
the module picks among (a branch per GPU it listed), never a single literal (chosen by hand).
For set_device / torch.device the index must come from nvidia-smi or NVML itself (followed
through names and the module's own functions), since those calls take the rank's index too."""

from __future__ import annotations

import ast

from gpufix.nccl_env import CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES, PCI_BUS_ORDER

from ..callsites import TORCH_LOAD, CallSite, all_env_writes, call_sites, neighbours
from ..nvml_values import NVML_MODULES, TORCH_SELECTS, nvml_values, pos, smi_names, strings
from ..project import SourceFile
from ..prune import segment
from ..report import insert_before
from . import Check, CheckContext

TRIGGERS = (b"VISIBLE_DEVICES", b"set_device", b"device(", b"map_location")


def _uses_smi_numbering(sf: SourceFile) -> bool:
    """The module asks nvidia-smi (or an NVML wrapper) for GPU indices."""
    for c in call_sites(sf):
        if c.name and c.name.split(".")[0] in NVML_MODULES:
            return True
        if any("nvidia-smi" in (sf.names.const_str(a) or "") for a in strings(c.node)):
            return True
    return _runs_smi_constant(sf)


def _runs_smi_constant(sf: SourceFile) -> bool:
    """A call is given a name bound to an nvidia-smi command (`os.popen(cmd)`).

    The call's own line need not mention nvidia-smi, so the pruned call sites miss it; this
    walks the module only when the file says nvidia-smi and a name is bound to it (a module
    constant, or a local of any function).
    """
    if b"nvidia-smi" not in sf.data or sf.tree is None:
        return False
    smi = {name for name, value in sf.names.strings.items() if "nvidia-smi" in value}
    smi |= smi_names(sf.tree)  # and local names (`query = "nvidia-smi ..."` in a function)
    if not smi:
        return False
    return any(
        isinstance(node, ast.Call)
        and any(isinstance(a, ast.Name) and a.id in smi for a in strings(node))
        for node in ast.walk(sf.tree)
    )


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


def _device_given(site: CallSite) -> list[ast.expr]:
    """What names the GPU in a call that selects one (nothing for other calls)."""
    if site.name in TORCH_SELECTS:
        return [*site.node.args, *(k.value for k in site.node.keywords)]
    if site.name in TORCH_LOAD:  # its map_location picks a GPU by CUDA's index
        return [k.value for k in site.node.keywords if k.arg == "map_location"]
    return []


def _selects_by_nvml_index(ctx: CheckContext, sf: SourceFile) -> None:
    sites = [(c, given) for c in call_sites(sf) if (given := _device_given(c))]
    if not sites or sf.tree is None:
        return
    values = nvml_values(sf)
    for c, given in sites:
        if not any(values.asks(a, c.owners, pos(c.node)) for a in given):
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
    ordering: set[int] | None = None  # the files that mention CUDA_DEVICE_ORDER, read once
    for sf in candidates:
        if not _uses_smi_numbering(sf):
            continue
        if ordering is None:
            ordering = {id(f) for f in ctx.project.holding(b"DEVICE_ORDER")}
        if _orders_by_pci(ctx, sf, ordering):
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


CHECK = Check(("GPF007",), run, TRIGGERS)
