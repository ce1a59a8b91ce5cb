"""What the engine hands each strategy: the user's constraints, the host, the evidence, and the
candidate a strategy answers with."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from gpufix.engine.kb import KnowledgeBase
from gpufix.engine.plan import Finding, Step
from gpufix.engine.rules import Rules
from gpufix.engine.stack import Stack
from gpufix.facts.host import Host

if TYPE_CHECKING:
    from gpufix.engine.signals import Signals
    from gpufix.engine.table import Decision


@dataclass(frozen=True)
class Constraints:
    reboot_allowed: bool = True
    multi_gpu_required: bool = True
    strategy: str | None = None  # forced by the user
    containers_allowed: bool = True
    container_image: str | None = None  # REF@sha256:DIGEST chosen by the user
    torch: str | None = None  # the torch release cuda-downgrade installs, chosen by the user
    venv_path: str = "/opt/gpufix/venv"
    # The day support windows are judged on (data, not the clock: the caller passes today).
    # None: the day the knowledge base was last checked (KnowledgeBase.checked()).
    plan_date: date | None = None


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
    # Parameters the steps still lack (need ids, engine/needs.py): the plan names the change
    # but cannot be applied until they are gathered and the plan is made again.
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Ctx:
    host: Host
    verdict: dict[str, Any] | None
    c: Constraints
    kb: KnowledgeBase
    rules: Rules
    stack: Stack
    found: tuple[Finding, ...]
    day: date  # the plan date
    signals: Signals | None = None  # what the probe verdict shows (engine/signals.py)
    decision: Decision | None = None  # the decision table's row for this host (engine/table.py)

    def has(self, fid: str) -> bool:
        return any(f.id == fid for f in self.found)

    def cause(self, *ids: str) -> bool:
        causes = (self.verdict or {}).get("causes") or []
        return any(c.get("id") in ids for c in causes if isinstance(c, dict))


# Strategies that change the machine itself (kernel, driver, PCIe, the container runtime):
# from facts gathered in a container, their steps belong on the container's host.
CONTAINER_HOST = "container-host"


def on_container_host(ctx: Ctx, cand: Candidate) -> Candidate:
    """Aim a host-level candidate at the container's host when the facts came from a container."""
    if not (cand.feasible and ctx.host.from_container):
        return cand
    steps = [
        Step(
            s.playbook,
            f"on the container's host: {s.description}",
            s.vars,
            s.reboot,
            CONTAINER_HOST,
        )
        for s in cand.steps
    ]
    where = (
        "The facts came from inside a container: run this on the host that runs it (add that "
        "host to the inventory and plan there); the container itself is not changed."
    )
    return Candidate(
        cand.strategy,
        True,
        cand.reason,
        steps,
        f"{cand.outcome.rstrip('.')}. {where}",
        [
            *cand.risks,
            "the steps target the container's host, which gpufix has not gathered facts from",
        ],
        cand.reboot,
        cand.extra,
        cand.missing,
    )


def reboot_gate(ctx: Ctx, cand: Candidate) -> Candidate:
    """A feasible candidate that needs a reboot becomes infeasible when reboots are not allowed."""
    if cand.feasible and cand.reboot and not ctx.c.reboot_allowed:
        return Candidate(cand.strategy, False, "needs a reboot, and reboots are not allowed")
    return cand
