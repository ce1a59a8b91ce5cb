"""Issue 11: what a GPU-fleet engineer would do on real hosts. One test (or more) per finding the
engine owns; each failed on the engine before the change."""

from __future__ import annotations

import copy
import json
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import branches
from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.facts.host import from_facts

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
decide = partial(engine.decide, kb=load(), rules=load_rules())
TODAY = date(2026, 11, 30)


def facts(name: str) -> dict[str, Any]:
    return json.loads((HOSTS / f"{name}.json").read_text())["facts"]


def ids(plan: Any) -> set[str]:
    return {f.id for f in plan.findings}


def option(plan: Any, name: str) -> Any:
    return next(o for o in plan.options if o.strategy == name)


def with_gpus(f: dict[str, Any], name: str, cc: str) -> dict[str, Any]:
    f = copy.deepcopy(f)
    for gpu in f["gpus"]:
        gpu.update(name=name, compute_capability=cc)
    return f


def pin(name: str, when: date = TODAY, **changes: Any) -> Any:
    f = copy.deepcopy(facts(name))
    f.update(changes)
    return decide(f, constraints=Constraints(strategy="driver-pin", plan_date=when))


# --- finding 1: a supported branch that drives every GPU, from the release's archive ---------


def test_host04_gets_a_supported_branch_from_jammys_archive() -> None:
    """22.04 on R470 with torch cu121: not R525 (ended, not in jammy's archive) but the LTS
    branch NVIDIA supports on the plan date, from the Ubuntu archive the role installs from."""
    plan = decide(facts("jammy-470-torch23"), constraints=Constraints(plan_date=TODAY))
    assert plan.strategy == "driver-pin"
    (step,) = plan.steps
    assert step.vars["gpufix_driver_branch"] == "580"
    assert step.vars["gpufix_driver_source"] == "ubuntu"
    assert step.vars["gpufix_driver_flavour"] == "server"
    assert "2028-06" in step.description
    assert plan.extra["plan_date"] == "2026-11-30"


def test_plan_date_is_data_not_the_clock() -> None:
    """In late 2025, R535 (LTS to June 2026) was supported for more than the six months a move
    needs (branches.ENDS_SOON_DAYS) and the smaller move; by May 2026 it was ending, and R580
    (LTS to 2028) fits as well; in July 2026 R535 had ended."""
    early = pin("jammy-470-torch23", date(2025, 12, 1))
    ending = pin("jammy-470-torch23", date(2026, 5, 1))
    late = pin("jammy-470-torch23", date(2026, 7, 1))
    assert early.steps[0].vars["gpufix_driver_branch"] == "535"
    assert ending.steps[0].vars["gpufix_driver_branch"] == "580"
    assert late.steps[0].vars["gpufix_driver_branch"] == "580"
    assert pin("jammy-470-torch23").extra["plan_date"] == "2026-11-30"


def test_no_branch_past_support_is_ever_chosen() -> None:
    kb = load()
    for day in (date(2026, 3, 1), date(2026, 7, 1), TODAY, date(2027, 6, 1)):
        plan = pin("jammy-470-torch23", day)
        branch = kb.driver_branch(plan.steps[0].vars["gpufix_driver_branch"])
        assert branch is not None and branch.supported_on(day)


def test_blackwell_on_545_gets_r570_or_later_with_open_modules() -> None:
    """Four RTX 5090s on 545 were told to go to 535, which cannot drive Blackwell."""
    f = with_gpus(facts("focal-4x4090"), "NVIDIA GeForce RTX 5090", "12.0")
    f["os"].update(codename="noble", version_id="24.04")
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert "driver-cannot-drive-gpus" in ids(plan)
    assert plan.strategy == "driver-pin"
    (step,) = plan.steps
    assert int(step.vars["gpufix_driver_branch"]) >= 570
    # finding 2: the open kernel modules, which Blackwell needs
    assert step.vars["gpufix_driver_flavour"] in ("open", "server-open")


def test_kepler_has_no_supported_branch_and_says_so() -> None:
    """Kepler ends at R470, whose support ended: no driver move can be proposed, and the reason
    names the last branch for these GPUs, when its support ended (driver_branches.yaml) and that
    it is below what the host's torch needs (530.30.02 here)."""
    f = with_gpus(facts("jammy-470-torch23"), "Tesla K80", "3.7")
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    pin_ = option(plan, "driver-pin")
    assert not pin_.feasible and "Kepler" in pin_.reason
    assert pin_.reason.endswith(
        "R470, the newest that drives them, left support in 2024-07 and is below 530.30.02"
    )


def test_pascal_stays_at_or_below_r580() -> None:
    f = with_gpus(facts("jammy-470-torch23"), "Tesla P100-PCIE-16GB", "6.0")
    plan = decide(f, constraints=Constraints(strategy="driver-pin", plan_date=TODAY))
    assert int(plan.steps[0].vars["gpufix_driver_branch"]) <= 580
    assert plan.steps[0].vars["gpufix_driver_flavour"] == "server"  # no open modules for Pascal


def test_a_reported_good_branch_that_ended_is_not_chosen() -> None:
    """r545-ddp-hang names 535, which ended in June 2026."""
    f = copy.deepcopy(facts("focal-4x4090"))
    f["os"].update(codename="jammy", version_id="22.04")
    f["gpus"] = with_gpus(f, "NVIDIA RTX A6000", "8.6")["gpus"]
    f["p2p"] = {"read": {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}}
    plan = decide(f, constraints=Constraints(strategy="driver-pin", plan_date=TODAY))
    assert plan.steps[0].vars["gpufix_driver_branch"] == "580"


def test_bionic_gets_the_lts_branch_canonical_packages_for_it() -> None:
    """Canonical's packaging carries 580-server for bionic (580.126.20-0ubuntu0.18.04.1)."""
    f = copy.deepcopy(facts("bionic-ga-2x3090"))
    f["python_envs"][0]["packages"]["torch"] = "2.1.2+cu121"
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    pin_ = option(plan, "driver-pin")
    assert pin_.feasible and "R580" in pin_.reason and "Ubuntu archive" in pin_.reason


def test_a_release_without_a_supported_branch_is_not_offered_one() -> None:
    """After R580's end (June 2028) bionic's archive and NVIDIA's frozen ubuntu1804 repository
    carry no branch NVIDIA still supports."""
    f = copy.deepcopy(facts("bionic-ga-2x3090"))
    f["python_envs"][0]["packages"]["torch"] = "2.1.2+cu121"
    plan = decide(f, constraints=Constraints(plan_date=date(2028, 7, 1)))
    pin_ = option(plan, "driver-pin")
    assert not pin_.feasible and "bionic" in pin_.reason


# --- finding 3 (engine side): fabric manager alone needs no reboot ------------------------------


def test_keeping_a_driver_keeps_its_package_flavour() -> None:
    """nvidia-driver-535-server stays -server: pinning nvidia-driver-535 would swap packages.
    (Before R535's end of support: after it the driver leaves the branch.)"""
    f = copy.deepcopy(facts("a100-fm-mismatch"))
    f["packages"]["nvidia"] = {
        k.replace("-535", "-535-server"): v for k, v in f["packages"]["nvidia"].items()
    }
    day = date(2026, 5, 1)
    plan = decide(f, constraints=Constraints(plan_date=day))
    assert plan.steps[0].vars["gpufix_driver_flavour"] == "server"
    plain = decide(facts("a100-fm-mismatch"), constraints=Constraints(plan_date=day))
    assert plain.steps[0].vars["gpufix_driver_flavour"] == ""


@pytest.mark.parametrize("installable", [True, False])
def test_fabric_manager_on_the_desktop_flavour_names_the_archive_s_server_coupling(
    installable: bool,
) -> None:
    """Canonical's fabric manager follows the -server driver's uploads (535-server-jammy has
    535.216.03, 535-jammy 535.216.01): the plan says the role may refuse and what gets out.
    (While R535 is supported: after that a moving driver leaves the branch, on -server.)"""
    day = date(2026, 5, 1)
    plan = decide(fm_host(installable), constraints=Constraints(plan_date=day))
    assert plan.steps[0].vars["gpufix_driver_fabricmanager"] is True
    assert any("builds fabric manager beside the -server driver" in r for r in plan.risks)
    server = fm_host(installable)
    server["packages"]["nvidia"] = {
        k.replace("-535", "-535-server"): v for k, v in server["packages"]["nvidia"].items()
    }
    plan = decide(server, constraints=Constraints(plan_date=day))
    assert not any("beside the -server driver" in r for r in plan.risks)


def fm_host(installable: bool | None) -> dict[str, Any]:
    f = copy.deepcopy(facts("a100-fm-mismatch"))
    if installable is not None:
        f["packages"]["driver_rollback"] = {
            "package": "nvidia-driver-535",
            "version": "535.154.05-0ubuntu0.22.04.1",
            "installable": installable,
        }
    return f


def test_fabric_manager_fix_needs_no_reboot_when_the_driver_version_is_installable() -> None:
    plan = decide(fm_host(True), constraints=Constraints(plan_date=TODAY))
    assert plan.strategy == "driver-pin"
    assert not plan.reboot_required and not plan.steps[0].reboot
    assert plan.steps[0].vars["gpufix_driver_version"] == "535.154.05"
    assert plan.steps[0].vars["gpufix_driver_fabricmanager"] is True


@pytest.mark.parametrize(
    ("origin", "source", "risk"),
    [("nvidia", "nvidia", False), ("ubuntu", "ubuntu", False), (None, None, False),
     ("ppa", None, True)],
)  # fmt: skip
def test_a_kept_driver_is_resolved_from_where_it_came(
    origin: str | None, source: str | None, risk: bool
) -> None:
    """Fabric manager at the driver's version: a driver installed from NVIDIA's CUDA repository
    is looked up there, not in the Ubuntu archive (the role's default source)."""
    f = fm_host(True)
    f["packages"]["driver_rollback"]["origin"] = origin
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert plan.strategy == "driver-pin"
    assert plan.steps[0].vars.get("gpufix_driver_source") == source
    said = [r for r in plan.risks if "graphics-drivers PPA" in r]
    assert len(said) == (1 if risk else 0)


@pytest.mark.parametrize("installable", [False, None])
@pytest.mark.parametrize(
    ("day", "branch", "flavour"), [(date(2026, 5, 1), "535", ""), (TODAY, "580", "server")]
)
def test_fabric_manager_moves_with_the_driver_when_apt_may_not_offer_its_version(
    installable: bool | None, day: date, branch: str, flavour: str
) -> None:
    """The Ubuntu archive keeps one version per package per pocket: 535.154.05 (and its fabric
    manager) is gone once 535.288.01 is published, and resolve.yml refuses an exact superseded
    version. Driver and fabric manager move together, with a reboot: to the pocket's current
    R535 while NVIDIA supports it (to June 2026, its supported-drivers table), after that to a
    branch it still supports (R580, on -server, which fabric manager is built beside)."""
    plan = decide(fm_host(installable), constraints=Constraints(plan_date=day))
    assert plan.strategy == "driver-pin"
    (step,) = plan.steps
    assert step.reboot and plan.reboot_required
    assert "gpufix_driver_version" not in step.vars
    assert step.vars["gpufix_driver_branch"] == branch
    assert step.vars["gpufix_driver_fabricmanager"] is True
    assert step.vars["gpufix_driver_flavour"] == flavour
    assert "fabric manager" in plan.outcome and "reboot" in plan.outcome
    ended = "past NVIDIA's support on 2026-11-30" in step.description
    assert ended == (day == TODAY)
    if ended:
        assert not any("plan a move" in r or "beside the -server" in r for r in plan.risks)


def test_a_fabric_manager_repair_without_a_reboot_keeps_the_branch_and_says_it_ended() -> None:
    """apt still offers the driver's exact version: fabric manager alone is installed (no
    reboot); the ended branch is a risk line for the next window, not a reason to reboot now."""
    plan = decide(fm_host(True), constraints=Constraints(plan_date=TODAY))
    (step,) = plan.steps
    assert not step.reboot and step.vars["gpufix_driver_version"] == "535.154.05"
    assert any("R535 is past NVIDIA's support" in r for r in plan.risks)


@pytest.mark.parametrize("installable", [True, False, None])
def test_table_and_facts_agree_on_the_fabric_manager_reboot(installable: bool | None) -> None:
    """The probe's 'system not yet initialized' (decision table) and the facts' fabric manager
    mismatch are the same repair: the same reboot flag."""
    by_facts = decide(fm_host(installable), constraints=Constraints(plan_date=TODAY))
    f = fm_host(installable)
    f["fabricmanager"] = {"unknown": "not read"}
    by_table = decide(
        f,
        {
            "format": "gpufix-probe",
            "version": 1,
            "verdict": "failed",
            "causes": [],
            "failed_in": {"phase": "cuda_init", "ranks": [0, 1]},
            "error": "cudaErrorSystemNotReady: system not yet initialized",
        },
        constraints=Constraints(plan_date=TODAY),
    )
    assert by_table.strategy == by_facts.strategy == "driver-pin"
    assert by_table.steps[0].reboot == by_facts.steps[0].reboot == (installable is not True)


# --- finding 8: is the old version still installable -------------------------------------------


@pytest.mark.parametrize(
    ("installable", "needle"),
    [(False, "no longer in any apt index"), (None, "not known whether"), (True, None)],
)
def test_rollback_reinstall_is_a_plan_risk(installable: bool | None, needle: str | None) -> None:
    f = copy.deepcopy(facts("jammy-470-torch23"))
    f["packages"]["driver_rollback"] = {
        "package": "nvidia-driver-470",
        "version": "470.223.02-0ubuntu0.22.04.1",
        "installable": installable,
    }
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert plan.strategy == "driver-pin"
    text = " ".join(plan.risks)
    if needle:
        assert needle in text
    else:
        assert "apt index" not in text


# --- finding 13: ACS only where it matters; no P2P promises on GPUs without P2P ---------------


def test_acs_on_root_ports_with_the_iommu_off_is_not_a_finding() -> None:
    """host04: ACS redirect on its root ports, IOMMU off: P2P is not redirected through it."""
    h = from_facts(facts("jammy-470-torch23"))
    assert h.acs_bridges and h.iommu_mode == "off" and not h.behind_switch
    plan = decide(facts("jammy-470-torch23"), constraints=Constraints(plan_date=TODAY))
    assert "acs-enabled-above-gpus" not in ids(plan)
    assert not option(plan, "pcie-acs").feasible


def test_acs_on_root_ports_with_a_translating_iommu_is_a_finding() -> None:
    f = copy.deepcopy(facts("jammy-470-torch23"))
    f["iommu"].update(mode="translated", groups=40, units=2)
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert "acs-enabled-above-gpus" in ids(plan)


def test_acs_on_root_ports_with_the_iommu_unknown_is_still_a_finding() -> None:
    f = copy.deepcopy(facts("jammy-470-torch23"))
    f["iommu"] = {"unknown": "not readable"}
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert "acs-enabled-above-gpus" in ids(plan)


def test_gpus_without_p2p_get_no_acs_finding_and_no_full_rate_promise() -> None:
    """RTX 4090 has no P2P (nccl#1127): ACS and IOMMU cannot be its problem. Read CNS by the
    driver and the job's NCCL 2.19.1 or later, which follows NVML's P2P status in every process
    (ncclTopoCheckP2p): nothing to turn off. With this host's NCCL 2.18.1 (torch 2.1.2), ranks
    that see one GPU each still try P2P: P2P off is the fix, as before."""
    newer = facts("focal-4x4090")
    newer["python_envs"][0]["packages"]["nvidia-nccl-cu12"] = "2.21.5"
    refused = decide(newer, constraints=Constraints(plan_date=TODAY))
    assert "gpu-p2p-refused" in ids(refused) and "gpu-no-p2p" not in ids(refused)
    assert "acs-enabled-above-gpus" not in ids(refused)
    assert refused.strategy == "none" and not option(refused, "pcie-acs").feasible
    plan = decide(facts("focal-4x4090"), constraints=Constraints(plan_date=TODAY))
    assert "acs-enabled-above-gpus" not in ids(plan) and "iommu-translated" not in ids(plan)
    assert "gpu-no-p2p" in ids(plan)
    acs = option(plan, "pcie-acs")
    assert not acs.feasible and "no PCIe P2P" in acs.reason
    assert plan.strategy == "nccl-profile"
    assert plan.steps[0].vars["gpufix_nccl_profile_names"] == ["no-p2p"]
    assert "full rate" not in plan.outcome and "bandwidth" not in plan.outcome


def test_pcie_acs_outcome_matches_what_it_touches() -> None:
    """Root ports only: P2P goes through the root complex either way; only switch ports keep it
    below the switch."""
    f = copy.deepcopy(facts("jammy-470-torch23"))
    f["iommu"].update(mode="translated", groups=40, units=2)
    f["secure_boot"]["enabled"] = False  # under Secure Boot's lockdown ACS cannot be cleared
    plan = decide(f, constraints=Constraints(strategy="pcie-acs", plan_date=TODAY))
    assert "below the switch" not in plan.outcome and "full rate" not in plan.outcome


# --- finding 14: a torch build with kernels for every GPU --------------------------------------


def test_pascal_gets_a_build_with_sm_60_kernels() -> None:
    """torch >= 2.8 cu128/cu129 dropped sm_50-61: a Pascal host gets the cu126 build."""
    f = with_gpus(facts("jammy-470-torch23"), "Tesla P100-PCIE-16GB", "6.0")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["python_envs"][0]["packages"]["torch"] = "2.8.0+cu128"
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert "gpu-arch-dropped" in ids(plan)
    assert plan.strategy == "cuda-downgrade"
    stack = plan.extra["stack"]
    assert stack["tag"] == "cu126" and "6.0" in stack["archs"]


def test_volta_leaves_cu128_from_2_11() -> None:
    kb = load()
    b = kb.torch_build("2.11.0", "12.8")
    assert b is not None and b.runs_on("7.0") is False
    f = with_gpus(facts("jammy-470-torch23"), "Tesla V100-SXM2-32GB", "7.0")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["python_envs"][0]["packages"]["torch"] = "2.11.0+cu128"
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert "gpu-arch-dropped" in ids(plan)
    assert plan.extra["stack"]["tag"] in ("cu126",)


def test_blackwell_gets_a_build_with_its_kernels() -> None:
    f = with_gpus(facts("jammy-470-torch23"), "NVIDIA GeForce RTX 5090", "12.0")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05", flavor="open")
    plan = decide(f, constraints=Constraints(strategy="cuda-downgrade", plan_date=TODAY))
    assert "12.0" in plan.extra["stack"]["archs"]


# --- finding 15: facts from a container; host-level steps aim at its host ----------------------


def container(f: dict[str, Any]) -> dict[str, Any]:
    f = copy.deepcopy(f)
    f["gathered_in"] = {"where": "container", "evidence": "/.dockerenv"}
    f["containers"] = dict(f["containers"], in_container=True, ipc_host=True, net_host=True)
    return f


def test_container_facts_do_not_plan_kernel_or_driver_changes_for_the_container() -> None:
    plan = decide(container(facts("bionic-ga-2x3090")), constraints=Constraints(plan_date=TODAY))
    assert "facts-from-container" in ids(plan)
    assert plan.strategy != "kernel-upgrade"
    ku = option(plan, "kernel-upgrade")
    assert not ku.feasible and "container" in ku.reason


def test_driver_pin_from_container_facts_targets_the_host_without_guessing_its_release() -> None:
    """The image's os-release is not the host's: no repository is named, and the step is for
    the container's host."""
    f = container(facts("jammy-470-torch23"))
    plan = decide(f, constraints=Constraints(strategy="driver-pin", plan_date=TODAY))
    (step,) = plan.steps
    assert step.target == "container-host" and "gpufix_driver_source" not in step.vars
    assert step.vars["gpufix_driver_branch"] == "580"
    assert any("release is not visible from the container" in r for r in plan.risks)


def test_host_level_steps_from_container_facts_target_the_container_host() -> None:
    f = container(facts("bionic-ga-2x3090"))  # translated IOMMU, ACS on root ports
    plan = decide(f, constraints=Constraints(strategy="pcie-acs", plan_date=TODAY))
    assert all(s.target == "container-host" for s in plan.steps)
    assert "container's host" in plan.steps[0].description
    assert "host that runs it" in plan.outcome


def test_host_facts_target_the_host() -> None:
    c = Constraints(strategy="kernel-upgrade", plan_date=TODAY)
    plan = decide(facts("bionic-ga-2x3090"), constraints=c)
    assert plan.steps and all(s.target == "host" for s in plan.steps)


def test_container_facts_hide_the_hosts_packages() -> None:
    """A container's dpkg has no fabric manager: that says nothing about the host's."""
    f = container(facts("a100-fm-mismatch"))
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert not {"fabricmanager-missing", "fabricmanager-version-mismatch"} & ids(plan)


def test_old_snapshots_without_gathered_in_fall_back_to_in_container() -> None:
    f = facts("container-shm64m")
    f.pop("gathered_in", None)
    assert from_facts(f).from_container


# --- finding 16: the container-fix outcome says what really happens ----------------------------


def test_container_fix_without_an_image_promises_no_wrapper() -> None:
    plan = decide(facts("container-shm64m"), constraints=Constraints(plan_date=TODAY))
    assert plan.strategy == "container-fix"
    (step,) = plan.steps
    assert "gpufix_container_runtime_ipc_host" not in step.vars
    assert "gpufix_container_runtime_image" not in step.vars
    assert "no gpufix-run wrapper" in plan.outcome
    # dockerd applies default-shm-size on reload (moby reloadPlatform); the role reloads it.
    assert "reloads dockerd" in plan.outcome and "restart Docker" not in plan.outcome
    assert "running containers keep their /dev/shm" in plan.outcome
    assert "with your consent" in plan.outcome
    assert "the next container start gets host IPC" not in plan.outcome


def test_container_fix_with_an_image_installs_the_wrapper() -> None:
    image = "nvcr.io/nvidia/pytorch:24.04-py3@sha256:" + "a" * 64
    c = Constraints(plan_date=TODAY, container_image=image)
    plan = decide(facts("container-shm64m"), constraints=c)
    (step,) = plan.steps
    assert step.vars["gpufix_container_runtime_image"] == image
    assert step.vars["gpufix_container_runtime_ipc_host"] is True
    assert "--ipc=host" in plan.outcome


# --- issue 15: an unknown GPU count is unknown to every strategy alike -------------------------


def test_unknown_gpu_count_is_not_fewer_than_two_for_one_and_fine_for_another() -> None:
    f = copy.deepcopy(facts("bionic-ga-2x3090"))
    f["gpus"] = {"unknown": "nvidia-smi: timed out"}
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    reasons = {o.strategy: o for o in plan.options}
    for name in ("nccl-profile", "single-gpu", "pcie-acs"):
        assert not reasons[name].feasible, name
        assert "GPU count unknown" in reasons[name].reason, name


# --- shared definitions (issue 14 item 5) ----------------------------------------------------


def test_soc_topology_is_the_worst_link() -> None:
    f = copy.deepcopy(facts("bionic-ga-2x3090"))
    f["topology"] = {"matrix": {"GPU0": {"GPU1": "SOC"}, "GPU1": {"GPU0": "SOC"}}, "raw": None}
    assert from_facts(f).worst_link == "SYS"


def test_one_shm_floor() -> None:
    from gpufix.engine.rules import shm_floor_bytes

    assert shm_floor_bytes() == 1 << 30


# --- the example hosts (inventory/example.yml): what a GPU-fleet engineer would do ------------


def test_example_blackwell_host_gets_r570_or_later_open() -> None:
    plan = decide(facts("noble-4x5090"), constraints=Constraints(plan_date=TODAY))
    v = plan.steps[0].vars
    assert plan.strategy == "driver-pin" and int(v["gpufix_driver_branch"]) >= 570
    assert v["gpufix_driver_flavour"].endswith("open") and v["gpufix_driver_source"] == "ubuntu"


def test_example_pascal_host_gets_a_build_with_sm_60_kernels() -> None:
    plan = decide(facts("jammy-4xp100-torch28"), constraints=Constraints(plan_date=TODAY))
    assert plan.strategy == "cuda-downgrade"
    assert plan.steps[0].vars["gpufix_ml_stack_torch_variant"] == "cu126"
    assert "6.0" in plan.extra["stack"]["archs"]
    # the same release rebuilt, not "the newest stack that fits" (an expert review, 2026-12-06)
    [option] = [o for o in plan.options if o.strategy == "cuda-downgrade"]
    assert "the installed torch release, its cu126 build" in option.reason
    assert "newest" not in option.reason


def test_example_container_host_aims_host_level_steps_at_its_host() -> None:
    c = Constraints(strategy="pcie-acs", plan_date=TODAY)  # no verdict: asked for, not chosen
    plan = decide(facts("container-acs-4xada"), constraints=c)
    assert plan.strategy == "pcie-acs"
    assert [s.target for s in plan.steps] == ["container-host"]
    assert "host that runs it" in plan.outcome


def test_unknown_release_still_gets_a_supported_branch_with_the_gap_stated() -> None:
    f = copy.deepcopy(facts("jammy-470-torch23"))
    f["os"] = {"unknown": "os-release not readable"}
    plan = decide(f, constraints=Constraints(strategy="driver-pin", plan_date=TODAY))
    v = plan.steps[0].vars
    assert v["gpufix_driver_branch"] == "580" and "gpufix_driver_source" not in v
    assert any("release is not in the facts" in r for r in plan.risks)


def test_debug_knobs_come_from_the_knowledge_bases_debug_profile() -> None:
    f = copy.deepcopy(facts("bionic-hwe-8xa100"))
    f["nccl"]["files"]["/etc/nccl.conf"]["NCCL_DEBUG_FILE"] = "/tmp/nccl.%h.log"
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    found = next(x for x in plan.findings if x.id == "nccl-debug-knobs")
    assert found.evidence == {"nccl": ["NCCL_DEBUG_FILE"]}


# --- finding 2: Grace Hopper needs the open kernel modules --------------------------------------


def test_grace_hopper_needs_the_open_modules_h100_does_not() -> None:
    """GH200 and H100 are both compute capability 9.0; NVIDIA supports only the open modules on
    Grace Hopper (NVIDIA blog, 'transitions fully towards open-source GPU kernel modules')."""
    kb_ = load()
    gh = branches.gpu_needs(kb_, ("9.0",), ("NVIDIA GH200 480GB",))
    h100 = branches.gpu_needs(kb_, ("9.0",), ("NVIDIA H100 80GB HBM3",))
    assert gh.open and "Grace Hopper" in gh.archs
    assert not h100.open
    gh_plan = decide(
        with_gpus(facts("jammy-470-torch23"), "NVIDIA GH200 480GB", "9.0"),
        constraints=Constraints(plan_date=TODAY),
    )
    h100_plan = decide(
        with_gpus(facts("jammy-470-torch23"), "NVIDIA H100 80GB HBM3", "9.0"),
        constraints=Constraints(plan_date=TODAY),
    )
    assert gh_plan.strategy == h100_plan.strategy == "driver-pin"
    assert gh_plan.steps[0].vars["gpufix_driver_flavour"].endswith("open")
    assert not h100_plan.steps[0].vars["gpufix_driver_flavour"].endswith("open")


def test_grace_hopper_on_the_proprietary_module_is_a_finding() -> None:
    """The same supported R580 drives an H100 with either module, a GH200 only with the open one."""
    f = with_gpus(facts("jammy-470-torch23"), "NVIDIA GH200 480GB", "9.0")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05", flavor="proprietary")
    h100 = with_gpus(f, "NVIDIA H100 80GB HBM3", "9.0")
    found = {x.id for x in decide(f, constraints=Constraints(plan_date=TODAY)).findings}
    assert "driver-cannot-drive-gpus" in found
    found_h100 = {x.id for x in decide(h100, constraints=Constraints(plan_date=TODAY)).findings}
    assert "driver-cannot-drive-gpus" not in found_h100


# --- finding 7: Secure Boot is a risk whether or not DKMS is installed ---------------------------


@pytest.mark.parametrize(
    "dkms",
    [
        [],
        [{"module": "nvidia", "version": "470.182.03", "kernel": "5.15.0-91-generic",
          "arch": "x86_64", "status": "installed"}],
    ],
    ids=["no-dkms", "dkms-nvidia"],
)  # fmt: skip
def test_host04_secure_boot_is_a_plan_risk_with_and_without_dkms(dkms: list[Any]) -> None:
    f = copy.deepcopy(facts("jammy-470-torch23"))
    assert f["secure_boot"]["enabled"] is True
    f["dkms"] = dkms
    assert from_facts(f).dkms_nvidia is bool(dkms)
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert plan.strategy == "driver-pin"
    assert any("Secure Boot is on" in r for r in plan.risks), plan.risks
    off = copy.deepcopy(f)
    off["secure_boot"]["enabled"] = False
    assert not any(
        "Secure Boot" in r for r in decide(off, constraints=Constraints(plan_date=TODAY)).risks
    )


@pytest.mark.parametrize("installable", [True, False, None])
def test_a_stopped_fabric_manager_at_the_drivers_version_is_started_not_moved(
    installable: bool | None,
) -> None:
    """A review (2026-12-03): fabric manager installed at exactly the driver's version but not
    running got a driver move and a reboot. Nothing needs downloading: start it (Fabric Manager
    user guide, "Starting Fabric Manager"), no reboot, the driver kept."""
    f = fm_host(installable)
    f["fabricmanager"] = {"installed": "535.154.05", "running": False}
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert plan.strategy == "driver-pin"
    (step,) = plan.steps
    assert not step.reboot and not plan.reboot_required
    assert step.vars["gpufix_driver_version"] == "535.154.05"
    assert step.vars["gpufix_driver_fabricmanager"] is True
    assert "not running: enable and start it" in step.description
    said = any("refuses before changing anything: then start it by hand" in r for r in plan.risks)
    assert said == (installable is not True)


def test_debug_knobs_are_removed_by_the_default_profile() -> None:
    """The finding's fix, asked for by name: the nccl-profile step writes the `default` profile
    (a mutation review, 2026-12-05: only the finding was held by a test)."""
    f = copy.deepcopy(facts("bionic-hwe-8xa100"))
    f["nccl"]["files"]["/etc/nccl.conf"]["NCCL_DEBUG_FILE"] = "/tmp/nccl.%h.log"
    plan = decide(f, constraints=Constraints(strategy="nccl-profile", plan_date=TODAY))
    assert [s.vars for s in plan.steps] == [{"gpufix_nccl_profile_names": ["default"]}]


def test_a_transport_stall_turns_ib_off_only_where_there_is_ib() -> None:
    """NCCL stalled setting its communicator up: the profile tries without IB on a host with HCAs,
    and pins the socket interface to the first physical one (the loopback and IPoIB aside). Past
    set-up on one host neither is tried (tests/engine/test_transport_stall_one_host.py)."""
    from test_decide_evidence import verdict

    v = verdict(
        "hung", "pg_init", causes=[{"id": "nccl-transport", "evidence": "x", "source": "y"}]
    )
    f = copy.deepcopy(facts("bionic-hwe-8xa100"))
    c = Constraints(strategy="nccl-profile", plan_date=TODAY)
    plan = decide(f, v, c)
    (step,) = plan.steps
    assert step.vars["gpufix_nccl_profile_names"] == ["ib-off", "socket-ifname"]
    assert step.vars["gpufix_nccl_profile_socket_ifname"] == "enp226s0"
    # nccl.conf reaches NCCL only: gloo groups need the interface in the job (expert review)
    assert any("GLOO_SOCKET_IFNAME=enp226s0 in the job" in r for r in plan.risks), plan.risks
    f["network"]["infiniband"] = []
    (step,) = decide(f, v, c).steps
    assert step.vars["gpufix_nccl_profile_names"] == ["socket-ifname"]


def test_a_release_past_standard_support_says_the_drivers_may_need_esm() -> None:
    """An expert review (2026-12-06): bionic plans named nvidia-driver-580-server from the
    archive with no caveat; bionic left standard support in May 2023 (Canonical's release
    cycle), after which updates reach only Ubuntu Pro (ESM) hosts."""
    c = Constraints(strategy="driver-pin", plan_date=TODAY)
    bionic = decide(facts("bionic-ga-2x3090"), constraints=c)
    assert bionic.steps[0].vars["gpufix_driver_source"] == "ubuntu"
    assert any("left Ubuntu's standard support after 2023-05" in r for r in bionic.risks)
    jammy = decide(facts("jammy-470-torch23"), constraints=c)
    assert not any("standard support" in r for r in jammy.risks)


def test_an_nccl_profile_from_container_facts_says_it_lives_in_the_container() -> None:
    """The interim or profile is written where the facts came from: inside a container it is
    lost when the container is recreated, which the outcome did not say (expert review)."""
    c = Constraints(plan_date=TODAY, strategy="nccl-profile")
    from test_decide_evidence import verdict

    v = verdict(
        "hung", "pg_init", causes=[{"id": "nccl-transport", "evidence": "x", "source": "y"}]
    )
    plan = decide(facts("container-shm64m"), v, c)
    assert plan.strategy == "nccl-profile"
    assert "lost when the container is recreated" in plan.outcome


@pytest.mark.parametrize("installable", [True, False, None])
def test_a_stopped_fabric_manager_of_unknown_version_is_started(installable: bool | None) -> None:
    """A review (2026-12-07, gpu-operator#375: the CUDA validator failed on an HGX A100 until the
    stopped fabric manager was started) wrote `running: false` with the version unknown, as
    facts.md allows: no finding, and the plan moved R470 to R580 with a reboot. A stopped
    service is a stopped service: start it at the driver's version, no reboot."""
    f = fm_host(installable)
    f["fabricmanager"] = {"installed": {"unknown": "not stated"}, "running": False}
    plan = decide(f, constraints=Constraints(plan_date=TODAY))
    assert "fabricmanager-missing" in ids(plan)
    assert any(x.message.startswith("fabric manager not running") for x in plan.findings)
    assert plan.strategy == "driver-pin"
    (step,) = plan.steps
    assert not step.reboot and step.vars["gpufix_driver_version"] == "535.154.05"
    assert "not running and the facts do not give its version" in step.description
    said = any("refuses before changing anything" in r for r in plan.risks)
    assert said == (installable is not True)


def test_a_fabric_manager_nobody_read_raises_nothing() -> None:
    f = fm_host(True)
    f["fabricmanager"] = {"installed": {"unknown": "not stated"}, "running": {"unknown": "x"}}
    assert "fabricmanager-missing" not in ids(decide(f, constraints=Constraints(plan_date=TODAY)))
