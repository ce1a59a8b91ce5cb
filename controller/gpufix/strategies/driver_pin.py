"""driver-pin: one NVIDIA driver version (and fabric manager) installed, loaded and held."""

from __future__ import annotations

from typing import Any

from gpufix import versions
from gpufix.engine.context import Candidate, Ctx, reboot_gate
from gpufix.engine.diagnose import known_driver_issues
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy

PLAYBOOK = "driver_pin.yml"


def _driver_target(ctx: Ctx) -> tuple[str | None, str]:
    """(target driver version or branch, why)."""
    h, kb = ctx.host, ctx.kb
    if ctx.has("driver-library-mismatch") and h.driver_userspace:
        return (
            h.driver_userspace,
            f"load the installed userspace {h.driver_userspace} (reboot) and hold it",
        )
    if ctx.has("fabricmanager-missing") or ctx.has("fabricmanager-version-mismatch"):
        return h.driver, f"install fabric manager at exactly the driver's {h.driver} and hold both"
    issues = known_driver_issues(h, kb)
    available = _available_branches(ctx)
    if issues:
        for b in issues[0].good_branches:
            if not available or b in available:
                return str(b), f"move from {h.driver} to branch {b} ({issues[0].id}) and hold it"
    if ctx.stack.driver_ok is False and ctx.stack.required_driver:
        need = versions.driver_branch(ctx.stack.required_driver) or 0
        bad = {versions.driver_branch(h.driver)}
        for b in sorted(available):
            if b >= need and b not in bad:
                return str(
                    b
                ), f"upgrade to branch {b} so torch's CUDA {ctx.stack.cuda} runs, and hold it"
    return None, "no driver evidence"


def _available_branches(ctx: Ctx) -> list[int]:
    try:
        rows = ctx.kb.ubuntu_driver_packages(ctx.host.codename) if ctx.host.codename else []
    except (KeyError, AttributeError):
        rows = []
    return sorted({b for r in rows for b in r.branches})


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    if h.gpu_count == 0:
        return Candidate("driver-pin", False, "no GPU")
    target, why = _driver_target(ctx)
    if target is None:
        return Candidate("driver-pin", False, why)
    branch = versions.driver_branch(target)
    vars_: dict[str, Any] = {
        "gpufix_driver_branch": branch,
    }
    if "." in target:
        vars_["gpufix_driver_version"] = target
    if h.nvswitch:
        vars_["gpufix_driver_fabricmanager"] = True
    step = Step(PLAYBOOK, why, vars_, reboot=True)
    risks = []
    if h.secure_boot and h.dkms_nvidia:
        risks.append("Secure Boot is on: an unsigned DKMS module will not load")
    risks.append("every nvidia-*/libnvidia-* package is held; upgrades need an explicit unpin")
    outcome = (
        f"driver {target} loaded and held (apt pin + dpkg hold + unattended-upgrades blacklist)"
    )
    return reboot_gate(ctx, Candidate("driver-pin", True, why, [step], outcome, risks, True))


STRATEGY = Strategy(
    name="driver-pin",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=(
        "/etc/apt/preferences.d/gpufix-nvidia-driver.pref",
        "/etc/apt/apt.conf.d/51gpufix-nvidia-driver",
    ),
    disk_need_mib=(200, 1024),
    reboot_after_restore=False,
)
