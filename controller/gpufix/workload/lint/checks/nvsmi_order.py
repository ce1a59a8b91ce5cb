"""GPF007: a GPU picked with nvidia-smi / NVML numbering written to CUDA_VISIBLE_DEVICES while
CUDA still numbers GPUs fastest-first (no CUDA_DEVICE_ORDER=PCI_BUS_ID anywhere in the run).

The index is a value computed at run time, or one of several literals the module picks among
(a branch per GPU it listed), never a single literal (chosen by hand)."""

from __future__ import annotations

import ast

from gpufix.nccl_env import CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES, PCI_BUS_ORDER

from ..callsites import all_env_writes, call_sites, neighbours
from ..project import SourceFile
from ..prune import segment
from ..report import insert_before
from . import Check, CheckContext

# Modules that number GPUs the way nvidia-smi does (PCI bus order).
NVML_MODULES = ("GPUtil", "gpustat", "pynvml", "nvidia_smi", "py3nvml", "nvitop")
TRIGGERS = (b"VISIBLE_DEVICES",)


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


def _orders_by_pci(ctx: CheckContext, here: SourceFile) -> bool:
    """This module, or one it imports or that imports it, sets CUDA_DEVICE_ORDER=PCI_BUS_ID."""
    ordering = {id(sf) for sf in ctx.project.parsed() if b"DEVICE_ORDER" in sf.data}
    if not ordering:
        return False
    for sf in [here, *neighbours(ctx.project, here)]:
        if id(sf) in ordering:
            for w, _, _ in all_env_writes(sf):
                if w.key == CUDA_DEVICE_ORDER and sf.names.const_str(w.value) == PCI_BUS_ORDER:
                    return True
    return False


def run(ctx: CheckContext) -> None:
    candidates = [sf for sf in ctx.with_any(TRIGGERS) if b"nvidia" in sf.data or _nvml(sf)]
    for sf in candidates:
        if _orders_by_pci(ctx, sf) or not _uses_smi_numbering(sf):
            continue
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
