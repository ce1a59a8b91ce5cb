"""Compute capabilities from GPU names, for facts that lack them (R470's nvidia-smi has no
compute_cap field): NVIDIA's CUDA GPUs tables, knowledge/gpu_models.yaml."""

from __future__ import annotations

from dataclasses import replace

from gpufix.engine.kb import KnowledgeBase
from gpufix.facts.host import Host


def with_named_caps(h: Host, kb: KnowledgeBase) -> Host:
    """The host with every GPU's capability taken from its name, when the facts hold none and
    every name is in the table; otherwise as it is (a partial list would hide a GPU from the
    "drives every GPU" checks)."""
    if h.compute_caps or not h.gpu_names:
        return h
    caps = [kb.compute_capability_of(n) for n in h.gpu_names]
    if any(c is None for c in caps):
        return h
    return replace(h, compute_caps=tuple(c for c in caps if c), compute_caps_named=True)


BOARD_GPUS = 8  # NVIDIA's NVSwitch baseboards are the HGX 8-GPU ones


def with_named_board(h: Host, kb: KnowledgeBase) -> Host:
    """The host marked as an NVSwitch board when the topology was not read and it holds 8 or more
    GPUs, every one an SXM part of a model NVIDIA ships on NVSwitch 8-GPU baseboards
    (gpu_models.yaml nvswitch_board): its fabric manager is then checked, and its GPUs count as
    NVLink peers, as nvidia-smi topo -m would show."""
    if h.worst_link is not None or h.nvlink_min is not None:
        return h
    if (h.gpu_count or 0) < BOARD_GPUS or len(h.gpu_names) != h.gpu_count:
        return h
    if not all(kb.on_nvswitch_board(n) for n in h.gpu_names):
        return h
    return replace(h, nvswitch_named=True)
