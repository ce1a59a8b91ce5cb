"""Make plans: gather facts (or read a snapshot), optionally probe, decide. Shared by `plan` and
`apply --strategy`; the CLI only parses and prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

from gpufix.engine.context import Constraints
from gpufix.engine.decide import decide
from gpufix.engine.kb import load as load_kb
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules

Progress = Callable[[str, str], None]


@dataclass
class Failure:
    host: str
    error: str
    unreachable: bool


@dataclass
class Planned:
    plans: list[Plan] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


def make_plans(
    target: str,
    inventory: Path,
    constraints: Constraints,
    *,
    facts_file: Path | None = None,
    verdict: dict[str, Any] | None = None,
    run_probe: bool = False,
    python_envs: list[str] | None = None,
    progress: Progress | None = None,
) -> Planned:
    """Plans for TARGET (a host or group of the inventory), or for one snapshot file."""
    from gpufix.facts.snapshot import load_snapshot

    kb, rules = load_kb(), load_rules()
    if constraints.plan_date is None:  # support windows are judged on the day the plan is made
        constraints = replace(constraints, plan_date=date.today())
    out = Planned()
    if facts_file is not None:
        snaps = [load_snapshot(facts_file)]
    else:
        from gpufix.facts.collect import gather

        got = gather(target, inventory, python_envs=python_envs, progress=progress)
        snaps = [g.snapshot for g in got if g.snapshot is not None]
        out.failures = [Failure(g.host, g.error, g.unreachable) for g in got if g.snapshot is None]
    verdicts: dict[str, dict[str, Any] | None] = {s.host: verdict for s in snaps}
    if run_probe and facts_file is None:
        from gpufix.probe.remote import probe_hosts

        verdicts.update(probe_hosts([s.host for s in snaps], inventory, progress=progress))
    for s in snaps:
        plan = decide(
            s.facts, verdicts.get(s.host), constraints, kb=kb, rules=rules, host_name=s.host
        )
        if python_envs:  # apply re-gathers with the same interpreters to check freshness
            plan = replace(plan, extra={**plan.extra, "python_envs": list(python_envs)})
        out.plans.append(plan)
    return out
