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
    assert "take them out of the environment or ~/.nccl.conf" in option.reason
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


def test_the_step_writes_nccl_s_defaults_over_the_administrators_offs() -> None:
    """The role keeps an administrator's NCCL_* lines no profile sets: the `default` profile
    alone would have kept NCCL_P2P_DISABLE=1 (review, 2026-12-07). The step writes NCCL's
    documented defaults for every "off" /etc/nccl.conf held."""
    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1",
                                             "NCCL_TOPO_FILE": "/opt/topo.xml"}}  # fmt: skip
    (step,) = decide(f, STALL).steps
    assert step.vars["gpufix_nccl_profile_extra"] == {
        "NCCL_P2P_DISABLE": "0",
        "NCCL_SHM_DISABLE": "0",
    }


def test_a_setting_in_the_users_nccl_conf_is_for_the_operator() -> None:
    """NCCL reads ~/.nccl.conf before /etc/nccl.conf: the step could not undo it there."""
    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/root/.nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    option = next(o for o in decide(f, STALL).options if o.strategy == "nccl-profile")
    assert not option.feasible and "~/.nccl.conf" in option.reason


def test_an_experiment_that_decided_is_not_undone_by_newer_facts() -> None:
    """p2p-off made the run healthy: the failing run did not have P2P off, whatever facts
    gathered later (after an interim was applied, say) hold."""
    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    exp = {"id": "p2p-off", "env": {"NCCL_P2P_DISABLE": "1"}, "gpus": None,
           "verdict": "healthy", "stalled": None, "error": None, "elapsed_s": 3.0}  # fmt: skip
    plan = decide(f, {**STALL, "experiments": [exp], "decided_by": "p2p-off"})
    assert "default" not in names(plan) and not any("already had" in o.reason for o in plan.options)


def test_outside_nccl_or_at_nccl_s_default_it_was_not_in_force() -> None:
    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    copy_stall = {**STALL, "stalled": {"phase": "p2p_copy", "ranks": [0, 1]}}
    assert "default" not in names(decide(f, copy_stall))
    note = (
        "ran with NCCL_P2P_DISABLE=0 in the environment, over any NCCL config file (--nccl-default)"
    )
    assert "default" not in names(decide(f, {**STALL, "notes": [note]}))


def test_a_fix_that_rests_on_p2p_passes_over_a_run_that_had_p2p_off() -> None:
    """ACS on: pcie-acs with P2P off as its interim, a row that rests on the P2P path. A run
    that hung with P2P off already (an administrator's /etc/nccl.conf) is what a p2p-off
    experiment that still hung shows: the row passes over, as for that experiment, and the
    settings go back to NCCL's defaults."""
    f = json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]
    plain = decide(f, STALL)
    assert plain.strategy == "pcie-acs" and plain.interim is not None
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    plan = decide(f, STALL)
    assert plan.extra["decision"]["row"] != "collective-acs-iommu"
    assert (plan.strategy, names(plan), plan.interim) == ("nccl-profile", ["default"], None)
    assert any(line.startswith("the run that was not healthy already had") for line in plan.path)


def test_apply_takes_the_step_s_variables() -> None:
    """Plan files are checked against the role's argument specs and patterns before a run."""
    from gpufix.apply.rolevars import check_vars

    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    (step,) = decide(f, STALL).steps
    check_vars(step.playbook, step.vars, "step 1", plan_step=True)


def test_a_file_gpufix_wrote_is_not_what_the_failing_run_had() -> None:
    """After `apply --interim` the facts hold gpufix's own P2P off; planning again with the same
    verdict must not call it the run's setting, nor undo it (re-read, 2026-12-07)."""
    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    f["nccl"]["gpufix_written"] = ["/etc/nccl.conf"]
    plan = decide(f, STALL)
    assert names(plan) == ["no-p2p"]
    assert not any("already had" in o.reason for o in plan.options)
    acs = json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]
    acs["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    acs["nccl"]["gpufix_written"] = ["/etc/nccl.conf"]
    assert decide(acs, STALL).interim is not None


def test_the_reset_keeps_what_it_cannot_judge_or_undo() -> None:
    """Between-host "off"s stay on a one-host run; an "off" the environment sets is not claimed
    back; on GPUs without P2P, P2P off stays off."""
    f = quiet_pcie_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1",
                                             "NCCL_IB_DISABLE": "1"}}  # fmt: skip
    f["nccl"]["env"] = {"NCCL_SHM_DISABLE": "1"}
    (step,) = decide(f, STALL).steps
    assert step.vars["gpufix_nccl_profile_extra"] == {"NCCL_P2P_DISABLE": "0"}


def four_4090s(driver: str = "580.95.05") -> dict[str, Any]:
    """Four 4090s (no PCIe P2P) whose /etc/nccl.conf already turned P2P off."""
    f: dict[str, Any] = json.loads((HOSTS / "focal-4x4090.json").read_text())["facts"]
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    f["driver"]["kernel_module"] = f["driver"]["userspace"] = driver
    return f


def test_on_gpus_without_p2p_p2p_off_already_in_force_is_not_written_again() -> None:
    f = four_4090s()
    plan = decide(f, STALL)
    option = next(o for o in plan.options if o.strategy == "nccl-profile")
    assert not option.feasible and "no evidence that an NCCL setting would help" in option.reason
    assert not any("NCCL_P2P_DISABLE" in str(s.vars) for s in plan.steps)


def test_gpus_without_p2p_that_had_p2p_off_go_to_the_next_layer() -> None:
    """NCCL was told (the run had P2P off) and still hung: neither P2P nor ACS/IOMMU is on the
    path, so the unexplained stall asks for experiments and moves NCCL up, as where the driver's
    refusal is honoured; it no longer says "NCCL was not told" and ends in `none`."""
    plan = decide(four_4090s(), STALL)
    assert plan.extra["decision"]["row"] == "collective-unexplained-p2p-held"
    assert plan.strategy == "cuda-downgrade" and "move up" in plan.options[0].reason
    assert [n["id"] for n in plan.extra["needs"]] == ["experiments"]
    assert not any("NCCL was not told" in line for line in plan.path)


def test_gpus_without_p2p_that_had_p2p_off_on_a_new_feature_driver() -> None:
    plan = decide(four_4090s("545.29.06"), STALL)
    assert plan.extra["decision"]["row"] == "collective-new-feature-driver"
    assert plan.strategy == "driver-pin"


def test_an_experiment_that_turned_p2p_off_is_still_the_fix_on_gpus_without_p2p() -> None:
    f = four_4090s()
    exp = {"id": "p2p-off", "env": {"NCCL_P2P_DISABLE": "1"}, "gpus": None,
           "verdict": "healthy", "stalled": None, "error": None, "elapsed_s": 9.0}  # fmt: skip
    plan = decide(f, {**STALL, "experiments": [exp], "decided_by": "p2p-off"})
    assert plan.extra["decision"]["row"] == "p2p-off-gpu-without-p2p"


def test_the_path_offers_no_interim_the_run_already_had() -> None:
    f = json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}
    assert not any("the interim beside" in line for line in decide(f, STALL).path)
