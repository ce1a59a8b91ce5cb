"""Lines of decide() a mutation review (2026-12-05) found no test held: a healthy probe does not
hide an error the facts show, the kernel-threshold risk names what a plan leaves, and the
kernel-upgrade plan's own risks (no NVIDIA module for a new kernel, Secure Boot with DKMS)."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
HEALTHY = {"format": "gpufix-probe", "version": 1, "verdict": "healthy", "causes": []}
THRESHOLD_RISK = "the kernel stays below accelerate's threshold"


def facts(name: str) -> dict[str, Any]:
    path = Path(__file__).parents[1] / "fixtures" / "hosts" / f"{name}.json"
    return copy.deepcopy(json.loads(path.read_text())["facts"])


def test_a_healthy_probe_does_not_hide_an_error_in_the_facts() -> None:
    """Fabric manager missing on an NVSwitch host is an error the facts show; a probe that
    passed today (a job on fewer GPUs, a run before the service died) does not make it none."""
    plan = decide(facts("a100-fm-mismatch"), HEALTHY)
    assert {f.id for f in plan.findings if f.severity == "error"} >= {"fabricmanager-missing"}
    assert plan.strategy == "driver-pin"
    assert "probe healthy and no error findings -> none" not in plan.path


def test_a_healthy_probe_with_no_error_is_none() -> None:
    plan = decide(facts("bionic-ga-2x3090"), HEALTHY)
    assert (
        plan.strategy == "none" and plan.path[-1] == "probe healthy and no error findings -> none"
    )


def test_the_kernel_threshold_risk_is_named_where_the_kernel_stays() -> None:
    """bionic on 4.15: a plan that changes something else keeps the kernel below 5.5, and says
    so; the kernel-upgrade plan moves it (to 5.4, still below: its outcome says that instead)."""
    f = facts("bionic-ga-2x3090")
    other = decide(f, None, Constraints(strategy="driver-pin"))
    assert other.strategy == "driver-pin"
    assert any(r.startswith(THRESHOLD_RISK) for r in other.risks)
    kernel = decide(f, None, Constraints(strategy="kernel-upgrade", reboot_allowed=True))
    assert kernel.strategy == "kernel-upgrade"
    assert not any(r.startswith(THRESHOLD_RISK) for r in kernel.risks)
    assert "still below accelerate's 5.5.0 threshold" in kernel.outcome
    assert not any(r.startswith(THRESHOLD_RISK) for r in decide(f, HEALTHY).risks)  # none


def test_a_kernel_upgrade_without_a_module_for_the_new_kernel_says_so() -> None:
    f = facts("bionic-ga-2x3090")
    f["dkms"] = []
    kernel = decide(f, None, Constraints(strategy="kernel-upgrade", reboot_allowed=True))
    assert any("no NVIDIA DKMS module or linux-modules-nvidia package" in r for r in kernel.risks)
    with_dkms = decide(
        facts("bionic-ga-2x3090"), None, Constraints(strategy="kernel-upgrade", reboot_allowed=True)
    )
    assert not any("no NVIDIA DKMS module" in r for r in with_dkms.risks)


def test_secure_boot_is_a_risk_of_a_kernel_upgrade_only_with_dkms() -> None:
    f = facts("bionic-ga-2x3090")
    f["secure_boot"] = {"efi": True, "enabled": True}
    risky = decide(f, None, Constraints(strategy="kernel-upgrade", reboot_allowed=True))
    assert any(r.startswith("Secure Boot is on") for r in risky.risks)
    f["dkms"] = []
    plain = decide(f, None, Constraints(strategy="kernel-upgrade", reboot_allowed=True))
    assert not any(r.startswith("Secure Boot is on") for r in plain.risks)
