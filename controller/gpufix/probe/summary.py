"""One line per probe verdict for a human: what happened, where, and the likely cause."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpufix.inputs import one_line

# Short names for cause ids in one-line summaries.
_CAUSE_LABELS = {
    "p2p-path": "P2P path (ACS/IOMMU)",
    "p2p-slow-copy": "P2P copies at a fraction of the link rate (ACS)",
    "driver-mismatch": "driver/library version mismatch",
    "driver-too-old": "driver too old for torch's CUDA",
    "shm": "shared memory (/dev/shm) too small",
    "nccl-transport": "NCCL transport or interface choice",
    "gpu-init": "CUDA initialisation (driver state)",
    "single-gpu-fallback": "multi-GPU path only",
    "torch-import": "the Python environment (import torch stalled or failed), not the driver",
    "shm-transport": "NCCL's shared-memory transport",
    "cumem": "NCCL's cuMem allocations",
    "ib-path": "the InfiniBand/RoCE path",
    "gpu-direct-rdma": "GPU Direct RDMA between the NIC and GPU memory (ACS)",
    "nccl-protocol": "an NCCL protocol (LL/LL128)",
    "nccl-algorithm": "an NCCL algorithm (tree/NVLS)",
    "nvls": "NVLink SHARP",
    "socket-interface": "the socket interface choice",
    "gpu-path": "one GPU's PCIe path",
    "link-path": "one GPU-to-GPU link",
    "rendezvous-unreachable": "the rendezvous port blocked between the hosts",
    "bootstrap-blocked": "the ranks' connections between the hosts blocked",
    "container-network": "the containers' private networks",
    "job-setting": "one of the job's own settings (--job-env)",
}


def _ranks(where: Mapping[str, Any]) -> str:
    return "[" + ", ".join(str(r) for r in where.get("ranks", [])) + "]"


def _hung(v: Mapping[str, Any]) -> str:
    stall = v.get("stalled") or {}
    by = str(stall.get("by") or "")
    head = f"hung in {stall.get('phase')} on ranks {_ranks(stall)}"
    if by == "probe deadline":
        return f"{head} after {v.get('deadline_s')} s (the probe's deadline)"
    if by.startswith("SIG"):  # stopped by a signal: what had passed when it came
        return f"{head}; interrupted by {by} after {v.get('duration_s')} s"
    if stall.get("phase") == "import_torch":  # its own deadline, which the error names
        return f"{head} past the import deadline"
    return f"{head} after {v.get('phase_deadline_s')} s"


def _failed(v: Mapping[str, Any]) -> str:
    where = v.get("failed_in") or {}
    if not where:  # no rank failed: the run did not get that far (or no verdict came back)
        return f"failed: {v.get('error')}"
    return f"failed in {where.get('phase')} on ranks {_ranks(where)}: {v.get('error')}"


def _degraded(v: Mapping[str, Any]) -> str:
    slow = v.get("slow") or []
    what = [f"{s['phase']} on ranks {_ranks(s)} ({s['seconds']:.1f} s)" for s in slow]
    what += v.get("notes") or []
    return "degraded: " + ("; ".join(what) if what else "slow")


def _healthy(v: Mapping[str, Any]) -> str:
    ranks = _count(int(v.get("world_size") or 0), "rank")
    text = f"healthy: {ranks} ({v.get('backend')}) in {v.get('duration_s')} s"
    allreduce = v.get("allreduce") or []
    if allreduce:
        big = allreduce[-1]
        text += f"; busbw {round(big['busbw_gbps'], 2)} GB/s at {big['bytes'] >> 20} MiB"
    return text


_HEADS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "hung": _hung,
    "failed": _failed,
    "degraded": _degraded,
    "healthy": _healthy,
}


def _evidence(v: Mapping[str, Any]) -> list[str]:
    parts = []
    single = v.get("single_gpu")
    # on --cpu (gloo) the baseline is one CPU rank: no GPU took part
    alone = "one rank alone" if v.get("backend") == "gloo" else "single GPU"
    if single:
        if single.get("verdict") == "healthy":
            parts.append(f"{alone} fine ({single.get('init_s')} s)")
        else:
            parts.append(f"{alone} {single.get('verdict')} too")
    job = v.get("job_env") or {}
    if job:
        parts.append("with the job's " + " ".join(f"{k}={val}" for k, val in sorted(job.items())))
    every = list(v.get("experiments") or [])
    exps = [e for e in every if e.get("verdict") != "skipped"]
    skipped = len(every) - len(exps)
    if v.get("decided_by"):
        parts.append(f"healthy with {v['decided_by']} ({_count(len(exps), 'experiment')})")
    elif exps:
        parts.append(f"{_count(len(exps), 'experiment')}, none healthy")
    elif v.get("no_p2p_rerun") and not skipped:
        parts.append(f"no-P2P rerun {v['no_p2p_rerun'].get('verdict')}")
    if skipped and not v.get("decided_by"):
        # Skipped is evidence of nothing: say which knob would decide (docs/probe.md).
        parts.append(
            f"{_count(skipped, 'experiment')} skipped: rerun with a bigger --experiment-budget"
        )
    suspects = v.get("suspects") or {}
    if suspects.get("gpus"):
        parts.append(f"pairs point at GPU {', '.join(str(g) for g in suspects['gpus'])}")
    elif suspects.get("links"):
        parts.append(f"pairs point at link {', '.join(suspects['links'])}")
    soak = v.get("soak") or {}
    if soak.get("stalled_at_bytes"):
        parts.append(f"soak {soak.get('verdict')} at {soak['stalled_at_bytes']} bytes")
    return parts


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _cause(v: Mapping[str, Any]) -> str:
    causes = v.get("causes") or []
    if not causes:
        return ""
    first = causes[0]
    if first["id"] == "torch-missing":
        python = (v.get("facts") or {}).get("python_executable") or "the probe's python"
        if "torch is not installed" in str(v.get("error") or ""):
            return " → use the training environment's python"  # the error already says it
        return f" → torch is not installed in {python}: use the training environment's python"
    label = _CAUSE_LABELS.get(first["id"], first["id"])
    culprit, job = v.get("job_env_culprit"), v.get("job_env") or {}
    if first["id"] == "job-setting" and culprit in job:
        label = f"the job's {culprit}={job[culprit]} (--job-env)"
    if first.get("strategy") == "none":
        return f" → likely {label}"
    return f" → likely {label} [{first['strategy']}]"


def _multinode(v: Mapping[str, Any]) -> str:
    hosts = ", ".join(v.get("hosts") or [])
    kind = v.get("verdict")
    if kind in ("healthy", "degraded"):
        return f"{kind}: {v.get('world_size')} ranks on {hosts} ({v.get('backend')})"
    where = (v.get("stalled") or v.get("failed_in") or {}).get("phase") or "no verdict"
    layer = v.get("failed_layer") or "inside the host"
    bad = ", ".join(v.get("failed_hosts") or [])
    return f"{kind} in {where} on {bad} of {hosts}: {layer} layer"


def summarize(verdict: Mapping[str, Any]) -> str:
    """One line: what happened, where, and the likely cause (a rank's multi-line error, as
    NCCL writes them, squeezed onto it)."""
    return one_line(_summary(verdict), 100_000)


def _summary(verdict: Mapping[str, Any]) -> str:
    kind = str(verdict.get("verdict"))
    if verdict.get("reached") is False:
        return f"no verdict: {verdict.get('error')}"
    if kind == "not-applicable":
        notes = verdict.get("notes") or []
        return "not applicable: " + (notes[0] if notes else "no GPU")
    if verdict.get("scope") == "multi-node":
        return "; ".join([_multinode(verdict), *_evidence(verdict)]) + _cause(verdict)
    head = _HEADS.get(kind, lambda v: kind)(verdict)
    return "; ".join([head, *_evidence(verdict)]) + _cause(verdict)
