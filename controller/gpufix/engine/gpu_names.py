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
