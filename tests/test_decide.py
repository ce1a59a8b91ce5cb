"""The decision engine over recorded hosts: table-driven, plus properties over mutated facts."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix import versions
from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.errors import InvalidInput

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
# The engine does no I/O: the knowledge base and the rules are loaded here, once.
decide = partial(engine.decide, kb=load(), rules=load_rules())


def facts(name: str) -> dict[str, Any]:
    return json.loads((HOSTS / f"{name}.json").read_text())["facts"]


def ids(plan) -> set[str]:
    return {f.id for f in plan.findings}


# host, probe verdict (or None), expected strategy, findings that must be present
TABLE = [
    # No verdict: a kernel below accelerate's threshold and ACS/IOMMU above the GPUs are warnings,
    # risk factors the probe has not tied to a hang, so no reboot is chosen (the plan needs probe).
    ("bionic-ga-2x3090", None, "none", {"kernel-below-accelerate-threshold"}),
    (
        "bionic-hwe-8xa100",
        None,
        "none",
        {"kernel-below-accelerate-threshold", "kernel-at-release-ceiling"},
    ),
    # RTX 4090s have no P2P (nccl#1127): the driver says so (every pair CNS), but this torch's
    # NCCL 2.18.1 still tries P2P in ranks that see one GPU each (it follows NVML's P2P status
    # only from 2.19.1), so NCCL_P2P_DISABLE=1 is the fix; no supported driver branch is
    # packaged for focal, so the known 545 issue cannot be fixed by a driver move.
    ("focal-4x4090", None, "nccl-profile", {"gpu-no-p2p", "driver-branch-unsupported"}),
    (
        "jammy-470-torch23",
        None,
        "driver-pin",
        {"torch-cuda-needs-newer-driver", "driver-branch-unsupported"},
    ),
    ("bionic-single-gpu", None, "none", {"single-gpu-host"}),
    ("nogpu", None, "none", {"no-gpu"}),
    ("container-shm64m", None, "container-fix", {"shm-too-small"}),
    ("a100-fm-mismatch", None, "driver-pin", {"fabricmanager-version-mismatch"}),
    ("bionic-mismatch", None, "driver-pin", {"driver-library-mismatch"}),
    # issue 11's example hosts: Blackwell, Pascal, and facts from inside a container
    ("noble-4x5090", None, "driver-pin", {"torch-cuda-needs-newer-driver", "gpu-p2p-refused"}),
    ("jammy-4xp100-torch28", None, "cuda-downgrade", {"gpu-arch-dropped"}),
    ("container-acs-4xada", None, "none", {"acs-enabled-above-gpus", "facts-from-container"}),
]


@pytest.mark.parametrize(("host", "verdict", "strategy", "must"), TABLE, ids=[t[0] for t in TABLE])
def test_recorded_hosts(host: str, verdict: Any, strategy: str, must: set[str]) -> None:
    plan = decide(facts(host), verdict, host_name=host)
    assert plan.strategy == strategy, plan.path
    assert must <= ids(plan)
    chosen = [o for o in plan.options if o.strategy == strategy]
    assert chosen and chosen[0].feasible
    assert all(f.source for f in plan.findings)


def test_nccl_profile_on_a_docker_host_says_containers_need_the_file_mounted() -> None:
    """/etc/nccl.conf on the host does not reach a job in a container unless mounted."""
    plan = decide(facts("focal-4x4090"), None, host_name="h")
    assert plan.strategy == "nccl-profile"
    assert "-v /etc/nccl.conf:/etc/nccl.conf:ro" in plan.outcome
    bare = facts("focal-4x4090")
    bare["containers"]["docker"] = None
    assert "-v /etc/nccl.conf" not in decide(bare, None, host_name="h").outcome


def test_without_a_verdict_warnings_choose_no_reboot() -> None:
    plan = decide(facts("bionic-ga-2x3090"), host_name="h")
    assert plan.strategy == "none" and not plan.reboot_required
    assert any(
        "not chosen without a probe verdict" in p and "kernel-upgrade" in p for p in plan.path
    )
    assert plan.extra["needs"][0]["id"] == "probe"
    options = {o.strategy: o for o in plan.options}
    assert options["kernel-upgrade"].feasible and options["pcie-acs"].feasible  # still offered


def test_bionic_kernel_step_says_what_it_really_gets() -> None:
    c = Constraints(strategy="kernel-upgrade")
    plan = decide(facts("bionic-ga-2x3090"), constraints=c, host_name="h")
    assert plan.reboot_required
    assert "5.4" in plan.outcome and "still below" in plan.outcome
    (step,) = plan.steps
    assert step.playbook == "kernel_upgrade.yml"
    assert step.vars["gpufix_kernel_target"].startswith("5.4.0-")  # from apt's HWE candidate


def test_focal_kernel_step_reaches_the_threshold() -> None:
    f = facts("focal-4x4090")
    plan = decide(f, constraints=Constraints(strategy="kernel-upgrade"), host_name="h")
    assert "5.15" in plan.outcome and "warning goes away" in plan.outcome


def p2p_capable(f: dict[str, Any]) -> dict[str, Any]:
    """The same host with GPUs that can do PCIe P2P (a workstation Ada card, topo -p2p r OK)."""
    f = copy.deepcopy(f)
    names = [f"GPU{i}" for i in range(len(f["gpus"]))]
    for gpu in f["gpus"]:
        gpu["name"] = "NVIDIA RTX 6000 Ada Generation"
    f["p2p"] = {"read": {a: {b: "OK" for b in names if b != a} for a in names}}
    return f


def test_jammy_470_gets_a_cuda_the_driver_runs() -> None:
    kb = load()
    forced = Constraints(strategy="cuda-downgrade")
    plan = decide(facts("jammy-470-torch23"), constraints=forced, host_name="h")
    cuda = versions.cuda_from_tag(plan.steps[0].vars["gpufix_ml_stack_torch_variant"])
    assert cuda is not None and cuda[0] == 11  # 470 runs 11.x through minor-version compatibility
    assert versions.at_least("470.223.02", kb.cuda_minor_compat_floor(11))


def test_probe_p2p_evidence_prefers_acs_over_no_p2p() -> None:
    verdict = {
        "format": "gpufix-probe",
        "version": 1,
        "verdict": "hung",
        "stalled": {"phase": "pg_init", "ranks": [1, 2]},
        "no_p2p_rerun": {"verdict": "healthy"},
        "single_gpu": {"verdict": "healthy", "init_s": 0.8},
        "causes": [{"id": "p2p-path", "strategy": "pcie-acs", "why": "healthy without P2P"}],
    }
    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="535.183.01", userspace="535.183.01")  # no known issue
    plan = decide(f, verdict, host_name="h")
    assert plan.strategy == "pcie-acs"
    assert plan.alternatives()[0] == "nccl-profile"
    assert "single-gpu-fine" in ids(plan)
    assert "NCCL_P2P_DISABLE=1" in " ".join(plan.path)
    # the fallback's bandwidth cost is stated, so the user sees why ACS comes first
    assert "fallback" in plan.outcome


def test_new_feature_driver_is_the_permanent_fix_with_p2p_off_now() -> None:
    """P2P hangs on a new-feature branch with ACS/IOMMU unread: a supported branch for the next
    window, P2P off now (issue 12 item 6), and the ACS facts named as what would decide."""
    verdict = {
        "format": "gpufix-probe",
        "version": 1,
        "verdict": "hung",
        "stalled": {"phase": "allreduce", "ranks": [0]},
        "no_p2p_rerun": {"verdict": "healthy"},
        "causes": [{"id": "p2p-path", "strategy": "pcie-acs", "why": "healthy without P2P"}],
    }
    f = p2p_capable(facts("focal-4x4090"))  # driver 545.29.06: a new-feature branch
    f["os"].update(codename="jammy", version_id="22.04")  # a release with a supported branch
    f["pcie"] = {"unknown": "lspci needs root"}
    f["iommu"] = {"unknown": "not read"}
    plan = decide(f, verdict, host_name="h")
    assert plan.strategy == "driver-pin"
    assert plan.steps[0].vars["gpufix_driver_branch"] == "580"
    assert plan.interim is not None and plan.interim.strategy == "nccl-profile"
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["no-p2p"]
    assert plan.interim.reboot_required is False
    assert {n["id"] for n in plan.extra["needs"]} >= {"acs", "iommu"}
    assert plan.extra["decision"]["row"] == "p2p-off-new-feature-driver"


def test_probe_healthy_means_nothing_to_do() -> None:
    verdict = {"format": "gpufix-probe", "version": 1, "verdict": "healthy"}
    plan = decide(facts("bionic-hwe-8xa100"), verdict, host_name="h")
    assert plan.strategy == "none" and not plan.steps


def test_multi_gpu_not_required_gives_single_gpu() -> None:
    plan = decide(facts("bionic-hwe-8xa100"), constraints=Constraints(multi_gpu_required=False))
    assert plan.strategy == "single-gpu"


def test_no_reboot_constraint_skips_kernel_upgrade() -> None:
    plan = decide(facts("bionic-ga-2x3090"), constraints=Constraints(reboot_allowed=False))
    assert plan.strategy != "kernel-upgrade"
    assert not plan.reboot_required
    ku = next(o for o in plan.options if o.strategy == "kernel-upgrade")
    assert not ku.feasible and "reboot" in ku.reason


def test_forced_infeasible_strategy_is_refused() -> None:
    with pytest.raises(InvalidInput, match="not feasible"):
        decide(facts("bionic-hwe-8xa100"), constraints=Constraints(strategy="kernel-upgrade"))


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(InvalidInput, match="unknown strategy"):
        decide(facts("nogpu"), constraints=Constraints(strategy="reinstall-everything"))


def test_bionic_stack_respects_glibc_and_python() -> None:
    """glibc 2.27 caps torch below 2.7; Python 3.6 alone caps it at 1.10."""
    f = facts("bionic-ga-2x3090")
    f = copy.deepcopy(f)
    f["python_envs"] = []
    f["pythons"] = [{"path": "/usr/bin/python3.6", "version": "3.6.9"}]
    plan = decide(f, constraints=Constraints(strategy="cuda-downgrade"))
    torch = plan.steps[0].vars["gpufix_ml_stack_torch_version"]
    assert versions.parse(torch) < versions.parse("1.11")
    assert plan.steps[0].vars["gpufix_ml_stack_python"] == "/usr/bin/python3.6"
    tr = plan.steps[0].vars["gpufix_ml_stack_transformers_version"]
    assert versions.parse(tr) <= versions.parse("4.18.0")


def test_plan_json_round_trip(tmp_path: Path) -> None:
    from gpufix.engine.plan import load_plans, save_plans

    plan = decide(facts("bionic-ga-2x3090"), host_name="host01")
    save_plans([plan], tmp_path / "p.json")
    (back,) = load_plans(tmp_path / "p.json")
    assert back == plan


@pytest.mark.parametrize("auto_reboot", [True, False, None])
def test_driver_pin_warns_when_unattended_upgrades_reboots_by_itself(auto_reboot) -> None:
    f = facts("bionic-mismatch")
    uu = {"installed": True, "enabled": True, "nvidia_blacklisted": False}
    if auto_reboot is not None:  # facts before module 1.2.0's key read as "not known"
        uu["automatic_reboot"] = auto_reboot
    f["unattended_upgrades"] = uu
    plan = decide(f, host_name="h")
    assert plan.strategy == "driver-pin"
    warned = [r for r in plan.risks if "Automatic-Reboot" in r]
    assert bool(warned) is bool(auto_reboot)


@pytest.mark.parametrize(
    ("running", "refused"),
    [("4.15.0-1099-aws", True), ("4.15.0-1115-azure", True), ("4.15.0-213-lowlatency", True),
     ("4.15.0-213-generic", False)],
)  # fmt: skip
def test_kernel_upgrade_leaves_a_cloud_kernel_variant_alone(running: str, refused: bool) -> None:
    """lowlatency too since a review (2026-12-06): linux-generic-hwe-* would have switched a
    lowlatency host to -generic for good once the new kernel was made the default."""
    f = facts("bionic-ga-2x3090")
    f["kernel"]["running"] = running
    c = Constraints(strategy="kernel-upgrade")
    if not refused:
        assert decide(f, constraints=c, host_name="h").strategy == "kernel-upgrade"
        return
    flavour = running.rsplit("-", 1)[1]
    with pytest.raises(InvalidInput, match=f"Ubuntu's {flavour} kernel: .* leave the {flavour}"):
        decide(f, constraints=c, host_name="h")


@pytest.mark.parametrize(
    ("driver", "unlisted"),
    [("530.30.02", True), ("390.157", True), ("465.19.01", True), ("535.154.05", False),
     ("999.10", False)],
)  # fmt: skip
def test_a_branch_nvidia_does_not_list_is_unsupported(driver: str, unlisted: bool) -> None:
    """A review (2026-12-06): R530 (CUDA 12.1's own driver), R390 or R465 have no row, so a host
    on one got no warning at all, while an older listed branch (R470) did. A branch older than
    the table's newest and not in it is not among those NVIDIA supports; one newer than the
    table (released after it) is not judged."""
    from gpufix.engine.diagnose import unlisted_branch

    got = facts("jammy-470-torch23")
    got["driver"] = {**got["driver"], "kernel_module": driver, "userspace": driver}
    plan = decide(got, None, host_name="h")
    found = [f for f in plan.findings if f.id == "driver-branch-unsupported"]
    assert (unlisted_branch(load(), driver) is not None) is unlisted
    if unlisted:
        assert found and found[0].evidence["branch.kind"] == "unlisted"
        assert f"R{driver.split('.')[0]} is older than the newest branch" in found[0].message
    elif driver.startswith("999"):
        assert not found
