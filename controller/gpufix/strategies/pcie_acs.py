"""pcie-acs: ACS off on the bridges above the GPUs, iommu=pt, as NCCL's troubleshooting guide says."""

from __future__ import annotations

from typing import Any

from gpufix.engine.context import Candidate, Ctx, on_container_host, reboot_gate
from gpufix.engine.diagnose import acs_bridges_that_matter, no_p2p
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import not_multi_gpu, p2p_evidence, profile_cost

PLAYBOOK = "pcie_acs.yml"


# The decision row's stopgap is GPUDirect RDMA off (evidence_fixes.yaml: the gdr-off experiment,
# an IB local protection error): the NIC cannot reach GPU memory, so the NIC's own bridges
# matter too, and the facts list only the GPUs'.
GDR_OFF = "gdr-off"


# Ubuntu's kernels (bionic's HWE 5.4, focal, jammy: CONFIG_LOCK_DOWN_IN_SECURE_BOOT) lock down
# under Secure Boot, and lockdown refuses PCI config-space writes from userspace
# (pci_write_config checks LOCKDOWN_PCI_ACCESS) while setpci still exits 0; the role refuses
# there (roles/pcie_acs/tasks/preflight.yml). The facts read Secure Boot, not the lockdown mode.
LOCKED_DOWN = (
    "Secure Boot is on, so the kernel runs in lockdown (kernel_lockdown(7)), which refuses PCI "
    "config-space writes from userspace: ACS cannot be cleared by setpci. Turn ACS off in the "
    "BIOS/firmware, or turn Secure Boot off, then gather facts and plan again; nccl-profile "
    "(P2P off) is the fallback"
)
LOCKDOWN_UNREAD = (
    "Secure Boot was not read: if it is on, kernel lockdown refuses setpci's writes and the role "
    "stops before any change (`mokutil --sb-state`, /sys/kernel/security/lockdown on the host)"
)


def _gpu_nic_path(ctx: Ctx) -> bool:
    d = ctx.decision
    return d is not None and d.fix == "pcie-acs" and GDR_OFF in d.interim


def _changes(ctx: Ctx) -> tuple[dict[str, Any], list[str], bool]:
    """(role variables, what changes, reboot needed)."""
    h = ctx.host
    vars_: dict[str, Any] = {}
    what = []
    reboot = False
    bridges = acs_bridges_that_matter(h)
    # ACS unread is not evidence: the plan asks for the facts (engine/needs.py) instead.
    if _gpu_nic_path(ctx) and bridges:
        # The unit's [auto] finds, at every boot, the bridges above the GPUs and above the
        # network adapters that share a switch with one (roles/pcie_acs/files/gpufix-acs-bridges).
        vars_["gpufix_pcie_acs_bridges"] = ["auto"]
        what.append(
            "disable ACS at boot on the bridges above the GPUs and above the network adapters "
            "beside them (found at boot: GPUDirect RDMA crosses the adapter's bridges too)"
        )
    elif bridges:
        vars_["gpufix_pcie_acs_bridges"] = list(bridges)
        what.append(f"disable ACS at boot on {', '.join(bridges)} (setpci unit)")
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
    return vars_, what, reboot


def _outcome(ctx: Ctx, vars_: dict[str, Any], reboot: bool) -> str:
    """What the change buys, no more: full-rate P2P only where the GPUs share a switch; nothing
    said of the IOMMU where it was not read or is not changed."""
    h = ctx.host
    ports = {h.acs_ports.get(b) for b in vars_.get("gpufix_pcie_acs_bridges", [])}
    if ports & {"downstream", "upstream"} or (
        h.behind_switch and vars_.get("gpufix_pcie_acs_bridges")
    ):
        text = "P2P between GPUs on one PCIe switch stays below the switch instead of going up to the root complex"
    elif reboot:  # the IOMMU setting changes at the reboot
        text = "P2P through the root complex without IOMMU translation"
    elif h.iommu_mode in (None, "unknown"):
        text = (
            "P2P through the root complex without ACS redirection; the IOMMU mode was not read, "
            "and a translating IOMMU still slows or blocks P2P (gather facts on the host with "
            "become to read it)"
        )
    else:
        text = "P2P through the root complex without ACS redirection"
    text += (
        "; the post-reboot probe re-checks P2P copy and NCCL init"
        if reboot
        else "; the ACS unit applies now and at each boot, and the probe after apply re-checks "
        "P2P copy and NCCL init"
    )
    cost = profile_cost(ctx, "no-p2p")
    if cost:
        text += f". The fallback, nccl-profile no-p2p, would cost: {cost}"
    return text


def _nothing_to_change(ctx: Ctx) -> str:
    """Why there is nothing to change; an unread fact is said to be unread, not absent."""
    h = ctx.host
    unread = []
    if not h.acs_known:
        unread.append("ACS on the bridges above the GPUs")
    if h.iommu_mode in (None, "unknown"):
        unread.append("the IOMMU mode")
    if unread:
        return (
            f"{' and '.join(unread)} not read (`gpufix facts HOST` with become): nothing to "
            "change on what is known"
        )
    return "no ACS redirect that matters above the GPUs and IOMMU not translating"


def evaluate(ctx: Ctx) -> Candidate:
    blocked = not_multi_gpu(ctx, "pcie-acs")
    if blocked is not None:
        return blocked
    if no_p2p(ctx.host, ctx.kb):
        return Candidate(
            "pcie-acs",
            False,
            "these GPUs have no PCIe P2P (nccl#1127): ACS/IOMMU settings cannot bring it back",
        )
    vars_, what, reboot = _changes(ctx)
    if not what:
        return Candidate("pcie-acs", False, _nothing_to_change(ctx))
    clears_acs = bool(vars_.get("gpufix_pcie_acs_bridges"))
    if clears_acs and ctx.host.secure_boot:
        return Candidate("pcie-acs", False, LOCKED_DOWN)
    step = Step(PLAYBOOK, "; ".join(what), vars_, reboot=reboot)
    risks = []
    if clears_acs:
        risks.append(
            "disabling ACS weakens isolation between devices (matters for VFIO pass-through hosts)"
        )
    if vars_.get("gpufix_pcie_acs_iommu_passthrough"):
        risks.append(
            "iommu=pt: devices the host itself drives do DMA untranslated, so the IOMMU no longer "
            "fences them off from memory (devices assigned to VMs stay translated)"
        )
    # Unread is not evidence: the plan stands and says what would stop it.
    if clears_acs and ctx.host.secure_boot is None:
        risks.append(LOCKDOWN_UNREAD)
    cand = Candidate(
        "pcie-acs", True, "; ".join(what), [step], _outcome(ctx, vars_, reboot), risks, reboot
    )
    return on_container_host(ctx, reboot_gate(ctx, cand))


STRATEGY = Strategy(
    name="pcie-acs",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=(
        "/etc/default/grub",
        "/etc/default/grub.d/99-gpufix-iommu.cfg",
        "/etc/systemd/system/gpufix-pcie-acs.service",
        "/usr/local/sbin/gpufix-pcie-acs",
        "/usr/local/sbin/gpufix-acs-bridges",
    ),
    disk_need_mib=(64, 64),
    reboot_after_restore=True,
)
