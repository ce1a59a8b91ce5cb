"""kernel-upgrade: the release's HWE kernel, booted once, default after the probe passes."""

from __future__ import annotations

import re
from typing import Any

from gpufix import versions
from gpufix.engine.context import Candidate, Ctx, reboot_gate
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy

PLAYBOOK = "kernel_upgrade.yml"
# Ubuntu kernel releases are VERSION-ABI-FLAVOUR (5.4.0-150-generic). The HWE metapackages the
# release table names (linux-generic-hwe-*) install -generic kernels; any other flavour moves with
# its own metapackage: lowlatency (linux-lowlatency-hwe-*) would be switched to -generic for good
# once the new kernel is made the default, and a cloud or OEM variant (aws, azure, gcp, oracle, ...;
# ubuntu.com/kernel/variants), whose ABI numbers from 1000 up sort after -generic's in GRUB's
# newest-first order, would boot again once GRUB's own order is back.
_RELEASE = re.compile(r"^\d+\.\d+\.\d+-\d+-([a-z][a-z0-9-]*)$")
_HWE_FLAVOURS = ("generic",)


def evaluate(ctx: Ctx) -> Candidate:
    h, kb = ctx.host, ctx.kb
    if h.from_container:
        return Candidate(
            "kernel-upgrade",
            False,
            "facts come from inside a container: the kernel is the host's, but the host's release "
            "(and so its HWE kernel) is not visible from there; gather facts on the host",
        )
    rel = kb.ubuntu(h.codename) if h.codename else None
    if not (h.os_id or h.codename):
        return Candidate(
            "kernel-upgrade", False, "the OS release is not in the facts: `gpufix facts HOST`"
        )
    if h.os_id and h.os_id.lower() != "ubuntu" and rel is not None and rel.hwe_metapackage:
        # A derivative (Linux Mint, Pop!_OS) names the Ubuntu release it is built on, but its
        # kernels come from its own packages; the kernel role knows Ubuntu's HWE releases only.
        return Candidate(
            "kernel-upgrade",
            False,
            f"{h.os_id} is built on Ubuntu {rel.codename} but is not Ubuntu: the HWE "
            "metapackages are Ubuntu's, and gpufix's kernel role refuses another distribution",
        )
    if rel is not None and not rel.hwe_metapackage and rel.hwe_kernel:
        return Candidate(
            "kernel-upgrade",
            False,
            f"{rel.codename}'s newest HWE series is {rel.hwe_kernel}, but gpufix's kernel role "
            f"does not support {rel.codename} (standard support ended {rel.standard_support_end})",
        )
    if rel is None or not rel.hwe_metapackage:
        return Candidate(
            "kernel-upgrade",
            False,
            f"no HWE kernel for {h.os_id or 'this OS'} {h.version_id or ''}".strip(),
        )
    running = versions.major_minor(h.kernel)
    hwe = rel.hwe_kernel
    target = versions.major_minor(hwe)
    if hwe is None or target is None:
        return Candidate(
            "kernel-upgrade", False, f"no HWE kernel series recorded for {rel.codename}"
        )
    if running is None:
        return Candidate("kernel-upgrade", False, "running kernel unknown")
    variant = _RELEASE.fullmatch(h.kernel or "")
    if variant and variant.group(1) not in _HWE_FLAVOURS:
        return Candidate(
            "kernel-upgrade",
            False,
            f"{h.kernel} is Ubuntu's {variant.group(1)} kernel: {rel.hwe_metapackage} installs a "
            f"-generic kernel, so the host would either leave the {variant.group(1)} flavour or "
            f"boot it again after the one-shot (a variant's ABI sorts after -generic's in GRUB); "
            f"its own metapackage (linux-{variant.group(1)}, or its -hwe- one) moves it forward",
        )
    if running >= target:
        return Candidate(
            "kernel-upgrade",
            False,
            f"already on {h.kernel}; {rel.codename}'s newest supported series is {rel.hwe_kernel}",
        )
    threshold = kb.accelerate_kernel_check.threshold
    gets = f"{rel.hwe_metapackage} gives {rel.hwe_kernel}"
    if versions.at_least(hwe + ".0", threshold):
        outcome = (
            f"{gets}, at or above accelerate's {threshold}: the warning goes away; the kernel was a "
            "risk factor, so the post-reboot probe decides whether the hang is gone"
        )
    else:
        outcome = (
            f"{gets}: still below accelerate's {threshold} threshold (no supported kernel >= "
            f"{threshold} exists for {rel.codename}); the post-reboot probe decides"
        )
    risks = []
    if not h.dkms_nvidia and not h.kernel_nvidia_modules:
        risks.append(
            "no NVIDIA DKMS module or linux-modules-nvidia package seen: the kernel role refuses "
            "to reboot unless a module exists for the new kernel"
        )
    if h.secure_boot and h.dkms_nvidia:
        risks.append("Secure Boot is on: the DKMS module built for the new kernel must be signed")
    step = Step(
        PLAYBOOK,
        f"install {rel.hwe_metapackage} and headers, keep {h.kernel} as fallback, boot the new "
        "kernel once, make it default after the probe passes",
        _kernel_vars(ctx),
        reboot=True,
    )
    return reboot_gate(ctx, Candidate("kernel-upgrade", True, gets, [step], outcome, risks, True))


def _kernel_vars(ctx: Ctx) -> dict[str, Any]:
    """Role variables: the role installs the release's HWE packages; name the target kernel
    release when apt's candidate is known ('5.4.0.150.167~18.04.1' -> '5.4.0-150-generic')."""
    out: dict[str, Any] = {"gpufix_kernel_reboot_allowed": ctx.c.reboot_allowed}
    cand = ctx.host.hwe_candidate or ""
    m = re.match(r"(\d+\.\d+\.\d+)\.(\d+)\.", cand)
    if m:
        out["gpufix_kernel_target"] = f"{m.group(1)}-{m.group(2)}-generic"
    return out


STRATEGY = Strategy(
    name="kernel-upgrade",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/default/grub", "/etc/default/grub.d/99-gpufix-kernel.cfg"),
    disk_need_mib=(200, 1024),
    reboot_after_restore=False,
)
