"""The NCCL the training environment loads, and the documented fixed problems it still has
(knowledge/nccl_issues.yaml) on this host's platform."""

from __future__ import annotations

from gpufix import versions
from gpufix.engine import setup
from gpufix.engine.kb import KnowledgeBase
from gpufix.engine.kb_evidence import NcclIssue
from gpufix.facts.host import Host


def nccl_version_of(h: Host, kb: KnowledgeBase) -> str | None:
    """The probe's reading or the nvidia-nccl wheel (both in h.env.nccl), else the one the torch
    release pins (torch_nccl.yaml), else NCCL_VERSION, which NVIDIA's CUDA container images set
    for the system NCCL their framework builds link (a source build such as 2.1.0a0+32f93b1)."""
    env = h.env
    if env is not None and env.nccl:
        return env.nccl
    torch = env.torch if env is not None else None
    row = kb.torch_nccl_version(torch, h.torch_cuda) if torch else None
    if row is not None:
        return row.nccl
    declared = h.nccl_settings.get("NCCL_VERSION")
    return declared if declared and versions.parse(declared) is not None else None


def issues_of(h: Host, kb: KnowledgeBase, version: str, multi_node: bool) -> list[NcclIssue]:
    """Rows whose range holds this NCCL and whose platform (architectures, setup) is this host's."""
    archs = {a.name for a in (kb.arch_for_cc(cc) for cc in h.compute_caps) if a}
    where = setup.shown(h, multi_node)
    return [
        issue
        for issue in kb.nccl_issues
        if issue.matches(version) is True
        and (not issue.archs or archs & set(issue.archs))
        and set(issue.setup) <= where  # not a problem only on a setup this host is not
    ]
