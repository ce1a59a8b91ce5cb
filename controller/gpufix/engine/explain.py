"""What a plan says beyond its steps: the decision table's row and source, the facts or
experiments that would still decide or complete it, and the interim mitigation."""

from __future__ import annotations

from typing import Any

from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.needs import describe
from gpufix.engine.plan import Interim


def after_healthy(ctx: Ctx, chosen: Candidate) -> tuple[str, ...]:
    """A healthy start-up probe with nothing to change clears the host, not the hang: what is
    left is a hang after the first collectives (a soak finds it) or the training program itself
    (gpufix lint: CUDA_VISIBLE_DEVICES after import torch, the same GPU on every rank)."""
    v = ctx.verdict or {}
    one_gpu = ctx.host.gpu_count is not None and ctx.host.gpu_count < 2
    if chosen.strategy != "none" or v.get("verdict") != "healthy" or one_gpu:
        return ()
    return ("workload",) if isinstance(v.get("soak"), dict) else ("soak", "workload")


def without_probe(ctx: Ctx) -> tuple[str, ...]:
    """No verdict for a host with several GPUs (or GPUs nobody could count): what the plan chose
    rests on facts alone, and the probe is what would decide (issue 12, item 7)."""
    one_gpu = ctx.host.gpu_count is not None and ctx.host.gpu_count < 2
    return () if ctx.verdict is not None or one_gpu else ("probe",)


def explain(ctx: Ctx, chosen: Candidate) -> dict[str, Any]:
    d = ctx.decision
    needs = [
        *without_probe(ctx),
        *(d.needs if d else ()),
        *chosen.missing,
        *after_healthy(ctx, chosen),
    ]
    out: dict[str, Any] = {"needs": describe(needs), "complete": not chosen.missing}
    if d is not None:
        out["decision"] = {
            "row": d.row.id,
            "evidence": d.evidence,
            "fix": d.fix,
            "why": d.row.why,
            "source": d.row.source,
        }
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
    names = list(dict.fromkeys([*(d.interim if d else ()), *companion]))
    if not names or chosen.strategy in ("none", "nccl-profile"):
        return None
    cand = nccl_profile.for_profiles(ctx, names, f"until {chosen.strategy} is applied")
    if not cand.feasible:
        return None
    return Interim(cand.strategy, cand.steps, cand.outcome, reboot_required=False)
