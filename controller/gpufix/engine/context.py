"""What the engine hands each strategy: the user's constraints, the host, the evidence, and the
candidate a strategy answers with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufix.engine.diagnose import Stack
from gpufix.engine.kb import KnowledgeBase
from gpufix.engine.plan import Finding, Step
from gpufix.engine.rules import Rules
from gpufix.facts.host import Host


@dataclass(frozen=True)
class Constraints:
    reboot_allowed: bool = True
    multi_gpu_required: bool = True
    strategy: str | None = None  # forced by the user
    containers_allowed: bool = True
    container_image: str | None = None  # REF@sha256:DIGEST chosen by the user
    venv_path: str = "/opt/gpufix/venv"


@dataclass
class Candidate:
    strategy: str
    feasible: bool
    reason: str
    steps: list[Step] = field(default_factory=list)
    outcome: str = ""
    risks: list[str] = field(default_factory=list)
    reboot: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Ctx:
    host: Host
    verdict: dict[str, Any] | None
    c: Constraints
    kb: KnowledgeBase
    rules: Rules
    stack: Stack
    found: tuple[Finding, ...]

    def has(self, fid: str) -> bool:
        return any(f.id == fid for f in self.found)

    def cause(self, *ids: str) -> bool:
        causes = (self.verdict or {}).get("causes") or []
        return any(c.get("id") in ids for c in causes if isinstance(c, dict))


def reboot_gate(ctx: Ctx, cand: Candidate) -> Candidate:
    """A feasible candidate that needs a reboot becomes infeasible when reboots are not allowed."""
    if cand.feasible and cand.reboot and not ctx.c.reboot_allowed:
        return Candidate(cand.strategy, False, "needs a reboot, and reboots are not allowed")
    return cand
