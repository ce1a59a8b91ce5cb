"""Debugging knobs left in NCCL's settings (override:tuning) come out: the step writes the default
profile and names the knobs the role must not keep from the administrator's /etc/nccl.conf (it
keeps that file's other NCCL_* lines). A knob the environment or ~/.nccl.conf sets is for the
operator to take out there: NCCL reads the environment first, then ~/.nccl.conf, then
/etc/nccl.conf (src/misc/param.cc)."""

from __future__ import annotations

from dataclasses import replace

from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.held import text


def knobs_out(ctx: Ctx, cand: Candidate) -> Candidate:
    """The default-profile candidate with the tuning knobs it drops from /etc/nccl.conf, and
    the ones only the operator can take out."""
    h = ctx.host
    tuning = {k.name for k in ctx.kb.nccl_knobs if k.kind == "tuning"}
    env, etc, home = dict(h.nccl_env), dict(h.nccl_etc), dict(h.nccl_home)
    set_ = {k: v for k, v in h.nccl_settings.items() if k in tuning}
    elsewhere = {k: env.get(k, home.get(k, v)) for k, v in set_.items() if k in env or k in home}
    # what /etc/nccl.conf holds comes out, also where something read before it sets it too
    drop = sorted(k for k in set_ if k in etc or k not in elsewhere)
    where = "the environment" if set(elsewhere) <= set(env) else "the environment or ~/.nccl.conf"
    out = (
        f"{text(elsewhere)} is set in {where}, which NCCL reads before /etc/nccl.conf: take "
        "it out there, as the step cannot"
    )
    if not drop:
        # the row's fix stands (back to NCCL's defaults); only the operator can carry it out
        return replace(cand, outcome=f"{out}; {cand.outcome}")
    risks = [*cand.risks, *([out] if elsewhere else [])]
    steps = [
        replace(
            s,
            description=f"{s.description}, without {', '.join(drop)}",
            vars={**s.vars, "gpufix_nccl_profile_drop": drop},
        )
        for s in cand.steps
    ]
    return replace(cand, steps=steps, risks=risks)
