"""The multi-node verdict (format gpufix-probe v1, `scope: multi-node`) from the main run's parts,
the experiments and the failing layer. Pure: no I/O beyond what the caller hands in."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufix.probe.merge import MergedOutcome, Part, bandwidth

# Causes per failing layer: (cause id in the program's CAUSES, strategy there).
_LAYER_CAUSES = {
    "rendezvous": ["rendezvous-unreachable"],
    "bootstrap": ["bootstrap-blocked"],
    "container-network": ["container-network"],
    "interface": ["socket-interface"],
    "ib": ["ib-path"],
}


@dataclass
class MultiRun:
    """Everything one `gpufix probe GROUP --multi-node` learned."""

    target: str
    hosts: list[str]
    parts: list[Part]
    outcome: MergedOutcome
    layer: str | None
    master: str
    deadline_s: float
    phase_deadline_s: float
    duration_s: float = 0.0
    experiments: list[dict[str, Any]] = field(default_factory=list)
    decided_by: str | None = None
    ifname: str | None = None
    candidates: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    job_env: dict[str, str] = field(default_factory=dict)  # --job-env, as the hosts ran it
    job_env_culprit: str | None = None  # the one of them that alone breaks the run


def _first(parts: Sequence[Part], key: str, default: Any) -> Any:
    for p in parts:
        if p.verdict and p.verdict.get(key) is not None:
            return p.verdict[key]
    return default


def _stack(run: MultiRun) -> dict[str, Any]:
    """The torch, its CUDA and NCCL the hosts' ranks read, all three from one host; none when
    the hosts read different ones (a note says so: the same NCCL on every node is a fix)."""
    keys = ("torch", "torch_cuda", "nccl")
    read = {
        p.host: tuple(((p.verdict or {}).get("facts") or {}).get(k) for k in keys)
        for p in run.parts
        if isinstance(((p.verdict or {}).get("facts") or {}).get("torch"), str)
    }
    if len(set(read.values())) > 1:
        seen = "; ".join(f"{h}: torch {t}, NCCL {n}" for h, (t, _, n) in read.items())
        run.notes.append(f"the hosts' ranks loaded different stacks ({seen})")
        return {}
    first = next(iter(read.values()), None)
    return {k: v for k, v in zip(keys, first or (), strict=False) if v is not None}


def _phases(parts: Sequence[Part]) -> list[dict[str, Any]]:
    # Times are each host's own (seconds since its probe started), hence the host on each row.
    return [{**row, "host": p.host} for p in parts for row in (p.verdict or {}).get("phases", [])]


def _log_tail(parts: Sequence[Part], n: int = 40) -> list[str]:
    lines = [f"{p.host}: {ln}" for p in parts for ln in (p.verdict or {}).get("nccl_log_tail", [])]
    warns = [ln for ln in lines if "NCCL WARN" in ln][-(n // 2) :]
    return warns + [ln for ln in lines if ln not in warns][-(n - len(warns)) :]


def _port_busy(run: MultiRun) -> bool:
    """A host to blame could not serve the store: its port was taken (an earlier run that has
    not ended, or another service), not blocked between the hosts."""
    return any(
        c.get("id") == "store-port-busy"
        for p in run.parts
        if p.host in run.outcome.hosts
        for c in (p.verdict or {}).get("causes", [])
    )


def _causes(run: MultiRun, prog: Any) -> list[dict[str, str]]:
    if run.layer is None:
        # Trouble inside a host (or no verdict from it): that host's own causes.
        ids = [
            c["id"]
            for p in run.parts
            if p.host in run.outcome.hosts
            for c in (p.verdict or {}).get("causes", [])
        ]
    elif run.decided_by in prog.DECIDED_CAUSES:
        # the experiment that turned it healthy names the cause within its layer (gdr-off: the
        # NIC's access to GPU memory, not the IB path as a whole)
        ids = list(prog.DECIDED_CAUSES[run.decided_by])
    elif run.layer == "collective":
        # a gloo run (--cpu) did not use NCCL: nothing to blame on its transport
        ids = [] if _first(run.parts, "backend", "nccl") == "gloo" else ["nccl-transport"]
    elif run.layer == "rendezvous" and _port_busy(run):
        ids = ["store-port-busy"]
    else:
        ids = _LAYER_CAUSES[run.layer]
    out: list[dict[str, str]] = []
    for cid in dict.fromkeys(ids):
        if cid in prog.CAUSES:
            strategy, why = prog.CAUSES[cid]
            out.append({"id": cid, "strategy": strategy, "why": why})
    return out


def _soak(parts: Sequence[Part]) -> dict[str, Any] | None:
    """The sweep as the worst host saw it (every host ran the same sizes together)."""
    rank = {"hung": 0, "failed": 1, "degraded": 2, "skipped": 3, "healthy": 4}
    soaks = [p.verdict["soak"] for p in parts if p.verdict and p.verdict.get("soak")]
    return min(soaks, key=lambda s: rank.get(s.get("verdict"), 5)) if soaks else None


def _stall(run: MultiRun) -> dict[str, Any] | None:
    o = run.outcome
    if o.verdict != "hung":
        return None
    return {"phase": o.phase, "ranks": o.ranks, "hosts": o.hosts}


def build(run: MultiRun, prog: Any) -> dict[str, Any]:
    """The verdict. `prog` is the probe program (load_program()): its CAUSES and DECIDED_CAUSES
    are the one home of the cause table."""
    o = run.outcome
    world = sum(len(((p.verdict or {}).get("node") or {}).get("ranks", [])) for p in run.parts)
    world = world or int(_first(run.parts, "world_size", 1))
    hung_or_failed = o.verdict in ("hung", "failed")
    stack = _stack(run)  # before the notes are written: it may add one
    return {
        "format": "gpufix-probe",
        "version": 1,
        "scope": "multi-node",
        "host": run.target,
        "hosts": run.hosts,
        "run_id": uuid.uuid4().hex[:12],
        "verdict": o.verdict,
        "backend": _first(run.parts, "backend", "nccl"),
        "world_size": max(world, 1),
        "deadline_s": run.deadline_s,
        "phase_deadline_s": run.phase_deadline_s,
        "duration_s": round(run.duration_s, 3),
        "stalled": _stall(run),
        "failed_in": {"phase": o.phase, "ranks": o.ranks}
        if o.verdict == "failed" and o.phase
        else None,
        "error": (o.error or f"{o.verdict} in {o.phase}") if hung_or_failed else None,
        "failed_layer": run.layer,
        "failed_hosts": o.hosts if hung_or_failed else [],
        "phases": _phases(run.parts),
        "slow": [],
        "single_gpu": None,
        "p2p": {"matrix": {}, "copy_gbps": {}},
        "no_p2p_rerun": None,
        "experiments": run.experiments,
        "decided_by": run.decided_by,
        "suspects": None,
        "soak": _soak(run.parts),
        "allreduce": bandwidth(run.parts, world),
        "causes": _causes(run, prog),
        "notes": run.notes,
        "facts": {
            **stack,
            "master": run.master,
            "ifname": run.ifname,
            "ifname_candidates": run.candidates,
        },
        "nccl_log_tail": _log_tail(run.parts),
        **({"job_env": run.job_env, "job_env_culprit": run.job_env_culprit} if run.job_env else {}),
        "nodes": {
            p.host: {
                "verdict": (p.verdict or {}).get("verdict"),
                "ranks": ((p.verdict or {}).get("node") or {}).get("ranks", []),
                "error": (p.verdict or {}).get("error") if p.verdict else p.error,
            }
            for p in run.parts
        },
    }
