"""nccl-profile: /etc/nccl.conf from named profiles that match the evidence."""

from __future__ import annotations

from typing import Any

from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.diagnose import no_p2p
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import (
    TRANSPORT_CAUSES,
    multi_gpu_problem,
    p2p_evidence,
    physical_interface,
    profile_cost,
)

PLAYBOOK = "nccl_profile.yml"


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    problem = multi_gpu_problem(ctx)
    if problem:
        return Candidate("nccl-profile", False, problem)
    profiles: list[str] = []
    why = []
    p2p = p2p_evidence(ctx)
    without_p2p = no_p2p(h, ctx.kb)
    if without_p2p and (p2p or ctx.has("gpu-no-p2p")):
        profiles.append("no-p2p")
        why.append("these GPUs have no PCIe P2P (nccl#1127): NCCL_P2P_DISABLE=1 is the fix")
    elif p2p:
        profiles.append("no-p2p")
        why.append(
            f"P2P evidence ({p2p}); NCCL_P2P_DISABLE=1 is a last resort that costs bandwidth"
        )
    if ctx.cause(*TRANSPORT_CAUSES):
        if h.infiniband:
            profiles.append("ib-off")
            why.append(
                f"NCCL stalled with P2P off too and InfiniBand ({', '.join(h.infiniband)}) is present: "
                "try without IB on a host without a working fabric"
            )
        iface = physical_interface(h)
        if iface:
            profiles.append("socket-ifname")
            why.append(f"NCCL stalled with P2P off too: pin its socket interface to {iface}")
    if ctx.has("nccl-debug-knobs"):
        profiles.append("default")
        why.append("remove debug knobs from /etc/nccl.conf")
    if not profiles:
        return Candidate("nccl-profile", False, "no evidence that an NCCL setting would help")
    vars_: dict[str, Any] = {"gpufix_nccl_profile_names": profiles}
    if "socket-ifname" in profiles:
        vars_["gpufix_nccl_profile_socket_ifname"] = physical_interface(h)
    # Turning off P2P costs nothing on GPUs that never had it.
    cost = profile_cost(ctx, "no-p2p") if "no-p2p" in profiles and not without_p2p else ""
    step = Step(
        PLAYBOOK,
        f"write /etc/nccl.conf from profiles {', '.join(profiles)}",
        vars_,
    )
    return Candidate(
        "nccl-profile",
        True,
        "; ".join(why),
        [step],
        f"NCCL reads /etc/nccl.conf at the next job start{(' ; ' + cost) if cost else ''}",
        [cost] if cost else [],
    )


STRATEGY = Strategy(
    name="nccl-profile",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/nccl.conf", "/etc/profile.d/gpufix-single-gpu.sh"),
    disk_need_mib=(0, 16),
    reboot_after_restore=False,
)
