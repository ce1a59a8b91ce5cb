"""pcie-acs: ACS off on the bridges above the GPUs, iommu=pt, as NCCL's troubleshooting guide says."""

from __future__ import annotations

from typing import Any

from gpufix.engine.context import Candidate, Ctx, reboot_gate
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import (
    p2p_evidence,
    profile_cost,
)

PLAYBOOK = "pcie_acs.yml"


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    if not h.multi_gpu:
        return Candidate("pcie-acs", False, "fewer than two GPUs")
    vars_: dict[str, Any] = {}
    what = []
    reboot = False
    if h.acs_bridges:
        vars_["gpufix_pcie_acs_bridges"] = list(h.acs_bridges)
        what.append(f"disable ACS at boot on {', '.join(h.acs_bridges)} (setpci unit)")
    if h.iommu_mode == "translated":
        vars_["gpufix_pcie_acs_iommu_passthrough"] = True
        vars_["gpufix_pcie_acs_reboot_allowed"] = ctx.c.reboot_allowed
        what.append("set iommu=pt on the kernel command line")
        reboot = True
    if not what and p2p_evidence(ctx) and (not h.acs_known or h.iommu_mode in (None, "unknown")):
        # The probe says the peer path is broken but lspci could not be read here: the unit
        # finds the bridges above NVIDIA GPUs itself at boot.
        vars_["gpufix_pcie_acs_bridges"] = ["auto"]
        what.append("disable ACS at boot on every bridge above an NVIDIA GPU (found at boot)")
    if not what:
        return Candidate(
            "pcie-acs", False, "no ACS redirect above the GPUs and IOMMU not translating"
        )
    cost = profile_cost(ctx, "no-p2p")
    step = Step(PLAYBOOK, "; ".join(what), vars_, reboot=reboot)
    outcome = "P2P traffic stays below the switch at full rate; the probe re-checks P2P copy and NCCL init"
    risks = [
        "disabling ACS weakens isolation between devices (matters for VFIO pass-through hosts)"
    ]
    if cost:
        outcome += f". The fallback, nccl-profile no-p2p, would cost: {cost}"
    return reboot_gate(
        ctx, Candidate("pcie-acs", True, "; ".join(what), [step], outcome, risks, reboot)
    )


STRATEGY = Strategy(
    name="pcie-acs",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=(
        "/etc/default/grub",
        "/etc/systemd/system/gpufix-pcie-acs.service",
        "/usr/local/sbin/gpufix-pcie-acs",
        "/usr/local/sbin/gpufix-acs-bridges",
    ),
    disk_need_mib=(64, 64),
    reboot_after_restore=True,
)
