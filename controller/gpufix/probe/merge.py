"""Merge the per-host parts of one multi-node probe run into one outcome, and name the layer that
failed. Pure: node verdicts in (as each host's probe program wrote them), a MergedOutcome out.

A host's part says where its ranks stopped and whether they had reached the collective call
(`stalled.called`): ranks that reached it are waiting for the others, so the hosts whose ranks did
not are the ones to blame. When every rank reached it, the hang is between them all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PHASES = (
    "import_torch",
    "cuda_init",
    "alloc",
    "p2p_matrix",
    "p2p_copy",
    "rendezvous",
    "pg_init",
    "barrier",
    "allreduce",
    "soak",
    "destroy",
)
# Phases in which every rank waits for the others (the program's COLLECTIVE).
COLLECTIVE = ("rendezvous", "pg_init", "barrier", "allreduce", "soak")
# Phases that are each host's own business: the host probe (gpufix probe HOST) covers them.
HOST_LOCAL = ("import_torch", "cuda_init", "alloc", "p2p_matrix", "p2p_copy")


@dataclass(frozen=True)
class Part:
    """One host's result: its verdict, or why there is none (unreachable, failed play)."""

    host: str
    verdict: Mapping[str, Any] | None
    error: str = ""


@dataclass(frozen=True)
class MergedOutcome:
    verdict: str  # healthy | degraded | hung | failed
    phase: str | None = None  # where the culprits stopped (None: a host gave no verdict)
    hosts: list[str] = field(default_factory=list)  # the culprit hosts
    ranks: list[int] = field(default_factory=list)  # their ranks in that phase
    error: str | None = None


def _where(v: Mapping[str, Any]) -> Mapping[str, Any]:
    return v.get("stalled") or v.get("failed_in") or {}


# A rank that lost its peer or the store (the other side's process ended) reports the loss,
# not its cause: torch's TCPStore ("Failed to recv, got 0 bytes", "Connection reset by peer"),
# gloo ("Connection closed by peer"), NCCL's ncclRemoteError ("remote process exited").
_PEER_LOST = re.compile(
    r"connection (?:reset|closed) by peer|failed to recv, got 0 bytes|broken pipe"
    r"|remote process exited",
    re.I,
)


def _lost_peer(v: Mapping[str, Any]) -> bool:
    return bool(_PEER_LOST.search(str(v.get("error") or "")))


def _stopped_own_way(v: Mapping[str, Any]) -> bool:
    """A host whose ranks failed, or stalled, before the collective call: not just waiting. A
    rank that failed after it had made the call (the store's host went away: "connection
    closed") was waiting too (`failed_in.called`)."""
    where = _where(v)
    return any(r not in (where.get("called") or []) for r in where.get("ranks") or [])


def _no_part(p: Part) -> str | None:
    """Why a host's part says nothing of where its ranks stopped, or None when it does: no
    verdict (unreachable, a failed play, an unusable verdict), no rank run (not-applicable: no
    GPU), or a hang or failure with no phase (its probe died: the role's own verdict)."""
    v = p.verdict
    if v is None:
        return p.error or "no verdict"
    if v.get("verdict") == "not-applicable":
        return f"not-applicable: {v.get('error') or 'no rank ran'}"
    if v.get("verdict") in ("hung", "failed") and _where(v).get("phase") not in PHASES:
        return f"{v.get('verdict')} with no phase: {v.get('error') or 'no verdict from its probe'}"
    return None


def combine(parts: Sequence[Part]) -> MergedOutcome:
    """The run's outcome over every host's part."""
    missing = [(p, why) for p in parts if (why := _no_part(p)) is not None]
    if missing:
        text = "; ".join(f"{p.host}: {why}" for p, why in missing)
        return MergedOutcome("failed", None, [p.host for p, _ in missing], [], text)
    bad = [p for p in parts if p.verdict and p.verdict.get("verdict") in ("hung", "failed")]
    if not bad:
        degraded = any(p.verdict and p.verdict.get("verdict") == "degraded" for p in parts)
        return MergedOutcome("degraded" if degraded else "healthy")
    order = {name: i for i, name in enumerate(PHASES)}
    first = min(order.get(str(_where(p.verdict or {}).get("phase")), len(PHASES)) for p in bad)
    at = [p for p in bad if order.get(str(_where(p.verdict or {}).get("phase"))) == first]
    # who stopped before the call; else who failed there (an error inside the collective);
    # else all of them (every rank made the call: the hang is between them)
    own = [p for p in at if _stopped_own_way(p.verdict or {})]
    failed_there = [p for p in at if (p.verdict or {}).get("verdict") == "failed"]
    # of those, a host whose own error it was, before one that lost its peer to that error
    failed_there = [p for p in failed_there if not _lost_peer(p.verdict or {})] or failed_there
    # every host in a collective phase only waits, and a host claims a later one: it cannot
    # have got past a collective the others never left, so it never joined (a review: a
    # host could shift the blame onto those waiting for it)
    later = [p for p in bad if p not in at] if PHASES[first] in COLLECTIVE else []
    culprits = own or failed_there or later or at
    ranks = sorted(r for p in culprits for r in _where(p.verdict or {}).get("ranks") or [])
    failed = any((p.verdict or {}).get("verdict") == "failed" for p in culprits)
    errors = [f"{p.host}: {(p.verdict or {}).get('error')}" for p in culprits]
    return MergedOutcome(
        "failed" if failed else "hung",
        PHASES[first] if first < len(PHASES) else None,
        [p.host for p in culprits],
        ranks,
        "; ".join(errors),
    )


def layer(outcome: MergedOutcome, decided_by: str | None, private_network: bool) -> str | None:
    """The failing layer (contract: rendezvous, bootstrap, interface, ib, container-network,
    collective), or None when the run was healthy or the trouble is inside one host."""
    if outcome.verdict in ("healthy", "degraded") or outcome.phase in (None, *HOST_LOCAL):
        return None
    if decided_by and decided_by.startswith("ifname-"):
        return "interface"
    if decided_by in ("ib-off", "gdr-off"):
        return "ib"
    if decided_by in ("mnnvl-off", "nvls-off"):
        return "collective"  # NCCL's NVLink mechanisms, not the ranks' bootstrap sockets
    if outcome.phase == "rendezvous":
        return "rendezvous"
    if outcome.phase == "pg_init":
        return "container-network" if private_network else "bootstrap"
    return "collective"


def bandwidth(parts: Sequence[Part], world: int) -> list[dict[str, Any]]:
    """All-reduce rows over every host: the slowest host's time sets each size's bandwidth."""
    worst: dict[int, float] = {}
    for p in parts:
        for row in (p.verdict or {}).get("allreduce") or []:
            worst[row["bytes"]] = max(worst.get(row["bytes"], 0.0), float(row["seconds"]))
    out = []
    for nbytes, secs in sorted(worst.items()):
        algbw = nbytes / max(secs, 1e-12) / 1e9
        busbw = algbw * 2.0 * (world - 1) / world if world else 0.0
        out.append(
            {
                "bytes": nbytes,
                "seconds": round(secs, 9),
                "algbw_gbps": round(algbw, 6),
                "busbw_gbps": round(busbw, 6),
            }
        )
    return out
