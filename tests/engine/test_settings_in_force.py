"""An NCCL setting the failing run already had is not its cure. A host whose /etc/nccl.conf
already turned P2P off and still hung got NCCL_P2P_DISABLE=1 written again (outside review,
2026-12-07, pytorch#7019: the hang went away when the reporter deleted NCCL_P2P_DISABLE and
NCCL_SHM_DISABLE from /etc/nccl.conf). Now the plan goes back to NCCL's defaults where the file
holds them, and says to take them out of the environment where that sets them (NCCL reads its
files only for variables the environment does not set)."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
STALL = {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": "nccl",
         "world_size": 2, "stalled": {"phase": "allreduce", "ranks": [0, 1]}, "causes": [],
         "experiments": [], "decided_by": None}  # fmt: skip


def quiet_pcie_host() -> dict[str, Any]:
    """Two 3090s with ACS off and the IOMMU in pass-through: an all-reduce stall there is the
    unexplained-host row, whose profile is P2P off."""
    f: dict[str, Any] = copy.deepcopy(
        json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]
    )
    f["iommu"]["mode"] = "pt"
    for b in f["pcie"]["bridges"]:
        b["acs_enabled"] = False
    return f


def names(plan: Any) -> list[str]:
    return [n for s in plan.steps for n in s.vars.get("gpufix_nccl_profile_names", [])]


def test_without_the_setting_the_row_turns_p2p_off() -> None:
    plan = decide(quiet_pcie_host(), STALL)
    assert plan.extra["decision"]["row"] == "collective-unexplained-host"
    assert (plan.strategy, names(plan)) == ("nccl-profile", ["no-p2p"])


def test_p2p_off_already_in_nccl_conf_goes_back_to_the_defaults() -> None:
    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}}
    plan = decide(f, STALL)
    assert (plan.strategy, names(plan)) == ("nccl-profile", ["default"])
    reason = next(o.reason for o in plan.options if o.strategy == "nccl-profile")
    assert "already had NCCL_P2P_DISABLE=1" in reason and "would change nothing" in reason


def test_p2p_off_in_the_environment_is_for_the_operator_to_remove() -> None:
    f = quiet_pcie_host()
    f["nccl"]["env"] = {"NCCL_P2P_DISABLE": "1"}
    plan = decide(f, STALL)
    option = next(o for o in plan.options if o.strategy == "nccl-profile")
    assert not option.feasible
    assert "take them out of the job's environment" in option.reason
    assert plan.strategy != "nccl-profile"


def test_the_job_s_own_settings_count_too() -> None:
    verdict = {**STALL, "job_env": {"NCCL_P2P_DISABLE": "1"}}
    plan = decide(quiet_pcie_host(), verdict)
    option = next(o for o in plan.options if o.strategy == "nccl-profile")
    assert not option.feasible and "from the environment" in option.reason


def test_another_value_is_a_change() -> None:
    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "0"}}
    assert names(decide(f, STALL)) == ["no-p2p"]


def test_gpus_without_p2p_keep_p2p_off() -> None:
    """On 4090s P2P off is the fix itself: nothing here turns it back on."""
    f: dict[str, Any] = json.loads((HOSTS / "focal-4x4090.json").read_text())["facts"]
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    plan = decide(f, STALL)
    assert "default" not in names(plan)
