"""What a pcie-acs plan says it buys, no more (an expert review, 2026-12-06): a plan with no
reboot promised "the post-reboot probe", and one whose IOMMU mode was never read promised P2P
"without IOMMU translation". Recorded facts: bionic-ga-2x3090 (ACS redirect on the root ports
above its GPUs, a translating IOMMU)."""

from __future__ import annotations

import copy
import json
from typing import Any

from test_pcie_acs_lockdown_strategy import ASKED, HOSTS, decide


def host(iommu: dict[str, Any]) -> dict[str, Any]:
    f = copy.deepcopy(json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"])
    f["iommu"] = iommu
    return f


def test_a_translating_iommu_is_changed_at_a_reboot_and_the_outcome_says_so() -> None:
    plan = decide(
        host(json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]["iommu"]),
        constraints=ASKED,
    )
    assert plan.reboot_required
    assert "without IOMMU translation" in plan.outcome and "post-reboot probe" in plan.outcome


def test_an_unread_iommu_is_not_promised_away_and_no_reboot_is_not_a_post_reboot_probe() -> None:
    plan = decide(host({"unknown": "permission denied: /sys/class/iommu"}), constraints=ASKED)
    assert plan.strategy == "pcie-acs" and not plan.reboot_required
    assert "without IOMMU translation" not in plan.outcome
    assert "IOMMU mode was not read" in plan.outcome
    assert "post-reboot" not in plan.outcome and "applies now and at each boot" in plan.outcome
