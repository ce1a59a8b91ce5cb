"""pcie-acs under Secure Boot: Ubuntu's kernels then run in lockdown, which refuses setpci's
PCI config-space writes (pci_write_config, LOCKDOWN_PCI_ACCESS; kernel_lockdown(7)), so a plan
that clears ACS is not feasible there. Recorded facts (tests/fixtures/hosts): bionic-ga-2x3090
has ACS redirect on the root ports above its GPUs and a translating IOMMU."""

from __future__ import annotations

import copy
import json
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.errors import InvalidInput

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
decide = partial(engine.decide, kb=load(), rules=load_rules())
ASKED = Constraints(strategy="pcie-acs", plan_date=date(2026, 11, 30))


def host(secure_boot: dict[str, Any]) -> dict[str, Any]:
    f = copy.deepcopy(json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"])
    f["secure_boot"] = secure_boot
    return f


def option(plan: Any) -> Any:
    return next(o for o in plan.options if o.strategy == "pcie-acs")


def test_secure_boot_on_rules_out_clearing_acs_with_the_ways_out() -> None:
    plan = decide(host({"efi": True, "enabled": True}))
    acs = option(plan)
    assert not acs.feasible
    assert "Secure Boot is on" in acs.reason and "lockdown" in acs.reason
    for way_out in ("BIOS/firmware", "Secure Boot off", "nccl-profile"):
        assert way_out in acs.reason
    # asked for by name, the user gets the same reason in one line
    with pytest.raises(InvalidInput, match="lockdown"):
        decide(host({"efi": True, "enabled": True}), constraints=ASKED)


def test_secure_boot_off_still_clears_acs() -> None:
    plan = decide(host({"efi": True, "enabled": False}), constraints=ASKED)
    assert plan.steps[0].vars["gpufix_pcie_acs_bridges"] == ["0000:00:01.1", "0000:20:03.1"]
    assert not any("lockdown" in r for r in plan.risks)


def test_secure_boot_unread_is_no_evidence_but_the_plan_names_lockdown() -> None:
    plan = decide(
        host({"unknown": "mokutil: not found and no SecureBoot EFI variable"}), constraints=ASKED
    )
    assert plan.strategy == "pcie-acs" and plan.steps[0].vars["gpufix_pcie_acs_bridges"]
    assert any("Secure Boot was not read" in r and "lockdown" in r for r in plan.risks), plan.risks


def test_secure_boot_on_with_acs_already_off_keeps_iommu_passthrough() -> None:
    """ACS off in firmware (lspci read, no redirect): only the kernel command line changes, which
    lockdown does not stop."""
    f = host({"efi": True, "enabled": True})
    for bridge in f["pcie"]["bridges"]:
        bridge["acs_enabled"] = False
        bridge["acs_ctl"] = {k: False for k in bridge["acs_ctl"]}
    plan = decide(f, constraints=ASKED)
    (step,) = plan.steps
    assert "gpufix_pcie_acs_bridges" not in step.vars
    assert step.vars["gpufix_pcie_acs_iommu_passthrough"] is True
