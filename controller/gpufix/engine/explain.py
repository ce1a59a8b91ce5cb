"""What a plan says beyond its steps: the decision table's row and source, the facts or
experiments that would still decide or complete it, and the interim mitigation."""

from __future__ import annotations

from typing import Any

from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.diagnose import no_p2p
from gpufix.engine.held import in_force
from gpufix.engine.needs import describe
from gpufix.engine.plan import Interim
from gpufix.engine.table import passed_over
from gpufix.strategies.evidence import across_hosts


def after_healthy(ctx: Ctx, chosen: Candidate) -> tuple[str, ...]:
    """A healthy start-up probe with nothing to change clears the host, not the hang: what is
    left is a hang after the first collectives (a soak finds it) or the training program itself
    (gpufix lint: CUDA_VISIBLE_DEVICES after import torch, the same GPU on every rank)."""
    v = ctx.verdict or {}
    one_gpu = ctx.host.gpu_count is not None and ctx.host.gpu_count < 2 and not across_hosts(ctx)
    if chosen.strategy != "none" or v.get("verdict") != "healthy" or one_gpu:
        return ()
    return ("workload",) if isinstance(v.get("soak"), dict) else ("soak", "workload")


def one_gpu_here(ctx: Ctx) -> tuple[str, ...]:
    """One GPU on this host and no run across hosts: only a job across hosts can hang, and the
    multi-node probe is what would show it."""
    return ("multinode-probe",) if ctx.host.gpu_count == 1 and not across_hosts(ctx) else ()


def without_probe(ctx: Ctx) -> tuple[str, ...]:
    """No verdict for a host with several GPUs (or GPUs nobody could count): what the plan chose
    rests on facts alone, and the probe is what would decide (issue 12, item 7)."""
    one_gpu = ctx.host.gpu_count is not None and ctx.host.gpu_count < 2
    return () if ctx.verdict is not None or one_gpu else ("probe",)


def explain(
    ctx: Ctx, chosen: Candidate, passed: tuple[str, ...] = (), host: str = ""
) -> dict[str, Any]:
    """`passed`: what the strategies ranked above the chosen one lacked (decide._passed_missing)."""
    d = ctx.decision
    needs = [
        *without_probe(ctx),
        *one_gpu_here(ctx),
        *(d.needs if d else ()),
        *(passed_over(ctx, ctx.signals, d) if ctx.signals else ()),
        *passed,
        *chosen.missing,
        *after_healthy(ctx, chosen),
    ]
    out: dict[str, Any] = {"needs": describe(needs, host), "complete": not chosen.missing}
    if d is not None:
        out["decision"] = {
            "row": d.row.id,
            "evidence": d.evidence,
            "fix": d.fix,
            "why": d.row.why,
            "source": d.row.source,
        }
        if d.job_env:
            out["decision"]["job_env"] = list(d.job_env)
        if d.culprit:
            out["decision"]["job_env_culprit"] = d.culprit
        if d.issue is not None:
            out["decision"]["nccl_issue"] = {
                "id": d.issue.id,
                "fixed_in": d.issue.fixed_in,
                "source": d.issue.source,
            }
    return out


def interim_for(ctx: Ctx, chosen: Candidate) -> Interim | None:
    """The row's no-reboot NCCL profile beside a permanent fix of another kind, and the
    workaround profiles the chosen fix itself needs (a stack whose NCCL has a documented
    problem on this setup: extra["nccl_companion"], strategies/cuda_downgrade.py)."""
    from gpufix.strategies import nccl_profile  # strategies import the engine's context

    d = ctx.decision
    companion = (chosen.extra.get("nccl_companion") or {}).get("profiles") or []
    # an interim the failing run already had is no stopgap (held.in_force)
    row = list(d.interim) if d and in_force(ctx, d.interim) is None else []
    names = list(dict.fromkeys([*row, *companion]))
    if not names or chosen.strategy in ("none", "nccl-profile"):
        return None
    cand = nccl_profile.for_profiles(ctx, names, f"until {chosen.strategy} is applied")
    if not cand.feasible:
        return None
    return Interim(cand.strategy, cand.steps, cand.outcome, reboot_required=False)


# Fixes that leave NCCL's settings alone: a mechanism turned off before them stays off.
KEEPS_NCCL_SETTINGS = frozenset({"none", "nccl-profile", "single-gpu"})


def part_of_the_fix(ctx: Ctx, chosen: Candidate) -> set[str]:
    """NCCL profiles that are the fix here, not a workaround to undo: P2P off on GPUs without
    P2P (gpu_p2p.yaml, the host's own reading), the chosen stack's companion profiles."""
    keep = set((chosen.extra.get("nccl_companion") or {}).get("profiles") or [])
    if no_p2p(ctx.host, ctx.kb):
        keep.add("no-p2p")
    return keep


def _workarounds_held(ctx: Ctx, chosen: Candidate) -> list[Any]:
    """The profiles whose "off" the host's NCCL settings hold, through a fix of another kind."""
    if chosen.strategy in KEEPS_NCCL_SETTINGS:
        return []
    have, keep = ctx.host.nccl_settings, part_of_the_fix(ctx, chosen)
    return [
        p
        for p in ctx.kb.nccl_profiles
        if not p.debug
        and p.settings
        and p.name not in keep
        and all(have.get(k) == v for k, v in p.settings.items())
    ]


def verify_defaults(ctx: Ctx, chosen: Candidate) -> list[str]:
    """The settings the probe after the fix runs at NCCL's default (plan verify.nccl_defaults):
    an "off" the host holds that is a workaround here, where NCCL has a default to go back to."""
    defaults = ctx.kb.nccl_defaults()
    keys = {k for p in _workarounds_held(ctx, chosen) for k in p.settings if k in defaults}
    return sorted(keys)


def leftover_workarounds(ctx: Ctx, chosen: Candidate) -> list[str]:
    """Risks: NCCL settings on the host that turn a mechanism off (an interim profile, a manual
    workaround) stay through a fix of another kind; the probe after the fix reads them too."""
    undo = (
        "take it out of /etc/nccl.conf (gpufix keeps an administrator's original as "
        "/etc/nccl.conf.gpufix-orig) or the environment"
    )
    out = []
    for profile in _workarounds_held(ctx, chosen):
        kv = ", ".join(f"{k}={v}" for k, v in profile.settings.items())
        held = (
            f"the host's NCCL settings still hold {kv} (the {profile.name} profile: an interim "
            "or a workaround)"
        )
        if set(profile.settings) <= set(ctx.kb.nccl_defaults()):
            out.append(
                f"{held}: gpufix apply's probe after {chosen.strategy} runs with it at NCCL's "
                f"default (plan verify: nccl_defaults), but training jobs still read it and its "
                f"cost stays; once the fix is verified, {undo}"
            )
        else:
            out.append(
                f"{held}: the probe after {chosen.strategy} reads it too, so it cannot show the "
                f"fix works, and its cost stays; {undo} before the fix is verified"
            )
    return out
