"""A plan fits only the host it was made for: gather the facts again and refuse a plan whose
facts or knowledge base changed since (Terraform's stale plan)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufix import runner
from gpufix.engine.plan import Plan, digest
from gpufix.errors import InvalidInput
from gpufix.runner import FACTS_TIMEOUT_S, FORKS


def _facts_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def stale_reason(plan: Plan, facts: dict[str, Any], kb_digest: str) -> str | None:
    """Why `plan` no longer fits this host's facts and knowledge base, or None when it does."""
    from gpufix.engine.decide import stable_facts

    if plan.kb_digest != kb_digest:
        return "the knowledge base changed since the plan was made"
    if plan.facts_digest in (digest(stable_facts(facts)), digest(facts)):
        return None
    old = plan.extra.get("facts")
    if isinstance(old, dict):
        keys = _facts_changes(stable_facts(old), stable_facts(facts))
        if keys:
            return "its facts changed since the plan was made: " + ", ".join(keys)
    return "its facts changed since the plan was made"


def python_envs(plans: list[Plan]) -> list[str]:
    """The interpreters the plans were made with, so the facts are gathered the same way."""
    envs = {e for p in plans for e in (p.inputs.get("python_envs") or [])}
    return sorted(envs)


def check_fresh(
    plans: list[Plan],
    inventory: Path,
    progress: runner.Progress | None = None,
    *,
    forks: int = FORKS,
    timeout: int = FACTS_TIMEOUT_S,
) -> dict[str, str]:
    """Re-gather facts (`forks`, `timeout` as for `gpufix facts`) and refuse a stale plan.
    Returns {host: unreachable message}."""
    from gpufix.engine import kb
    from gpufix.facts import collect

    if not plans:
        return {}
    kb_digest = str(kb.load().digest)
    got = collect.gather(
        ",".join(p.host for p in plans),
        inventory,
        python_envs=python_envs(plans) or None,
        progress=progress,
        forks=forks,
        timeout=timeout,
    )
    unreachable: dict[str, str] = {}
    stale: list[str] = []
    by_host = {g.host: g for g in got}
    for p in plans:
        g = by_host.get(p.host)
        if g is None or g.snapshot is None:
            unreachable[p.host] = g.error if g else "no facts gathered"
            continue
        why = stale_reason(p, dict(g.snapshot.facts), kb_digest)
        if why:
            stale.append(f"{p.host}: {why}")
    if stale:
        raise InvalidInput(
            "stale plan, refusing to apply (" + "; ".join(stale) + "): re-plan with `gpufix plan`"
        )
    return unreachable
