"""NCCL settings the failing run already had: an administrator's NCCL files and environment, and
the job's own settings (--job-env). Writing them again changes nothing, so they are not its
cure, and a fix that rests on what they turned off is no fix for that run."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gpufix.engine.context import Ctx

# Phases where NCCL itself runs (a p2p_copy is a direct CUDA copy and the rendezvous torch's
# TCP store: neither reads an NCCL setting).
NCCL_PHASES = ("pg_init", "barrier", "allreduce", "soak", "destroy")
# The probe's note for --nccl-default VAR: that run had VAR at NCCL's default, over the files.
_AT_DEFAULT = re.compile(r"ran with (NCCL_[A-Z0-9_]+)=\S+ in the environment")


def job_env(ctx: Ctx) -> dict[str, str]:
    """The job's settings the probe's runs had (VAR=VALUE, --job-env)."""
    pairs = (kv.partition("=") for kv in (ctx.signals.job_env if ctx.signals else ()))
    return {k: v for k, sep, v in pairs if sep}


def text(settings: Mapping[str, str]) -> str:
    """Settings as plan text: `A=1, B=0`, in name order."""
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))


def in_force(ctx: Ctx, names: Sequence[str], evidence: str | None = None) -> dict[str, str] | None:
    """The profiles' settings, when the run that was not healthy already had every one of them:
    writing them changes nothing. None otherwise: when an experiment decided (its run set the
    knob, so the failing run did not have it, whatever newer facts say), outside NCCL's phases,
    and for a setting the probe ran at NCCL's default (--nccl-default). `evidence` is the table
    row's key; without one, the decision's, else what the probe's experiments decided."""
    sig, d = ctx.signals, ctx.decision
    if sig is None or not sig.unhealthy or sig.phase not in NCCL_PHASES:
        return None
    if evidence is None and d is not None:
        evidence = d.evidence
    if evidence.startswith("experiment") if evidence is not None else sig.decided_by:
        return None
    notes = (ctx.verdict or {}).get("notes")
    at_default = {
        m.group(1)
        for n in (notes if isinstance(notes, list) else [])
        if isinstance(n, str) and (m := _AT_DEFAULT.search(n))
    }
    # An administrator's settings and the job's: a file gpufix wrote (an interim, an earlier
    # fix) may be newer than the run, so it is not what the run had.
    held = {**dict(ctx.host.nccl_admin), **job_env(ctx)}
    want = {k: v for p in ctx.kb.nccl_profiles if p.name in names for k, v in p.settings.items()}
    if not want or any(held.get(k) != v or k in at_default for k, v in want.items()):
        return None
    return want


def all_held(ctx: Ctx) -> dict[str, str]:
    """The "off"s of every profile the failing run already had."""
    return {
        k: v
        for p in ctx.kb.nccl_profiles
        if p.settings and (got := in_force(ctx, [p.name])) is not None
        for k, v in got.items()
    }
