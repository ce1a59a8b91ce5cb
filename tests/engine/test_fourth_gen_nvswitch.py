"""HGX/DGX B200 and B300 boards use fourth-generation NVSwitches: there fabric manager brings the
NVLink fabric up only beside the NVLink Subnet Manager (NVLSM), which needs the InfiniBand
userspace (libibumad3, infiniband-diags) and an OFED/MOFED driver for the board's CX7 bridge
(NVIDIA Fabric Manager user guide, "Systems Using Fourth Generation NVSwitches", "Other NVIDIA
Software Packages", "Bare Metal Mode"). gpufix's driver-pin installs the driver, fabric manager
and NSCQ only: on such a host a finding says so, and a driver-pin plan carries it as a risk line
instead of claiming the fabric is fixed.

The host is the recorded HGX A100 (tests/fixtures/hosts/a100-fm-mismatch.json) with its GPUs
swapped for B200s ("NVIDIA B200", as developer.nvidia.com/cuda-gpus lists it; nine NVLinks from
each GPU to each of the board's two NVSwitches, per the guide: read here as NV18), an
R580 open driver (Blackwell runs only the open modules, from R570; R580 is supported on the plan
date) and fabric manager at the driver's version but stopped. The snapshot is built here rather
than recorded in tests/fixtures/hosts, whose list of hosts is fixed
(tests/test_facts_snapshot.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load as load_kb
from gpufix.engine.rules import load as load_rules
from gpufix.facts import snapshot as F
from gpufix.planning import plan_host

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KB, RULES = load_kb(), load_rules()
DRIVER = "580.95.05"
DEB = f"{DRIVER}-0ubuntu0.22.04.1"


def _snapshot(gpu: str = "NVIDIA B200", cc: str = "10.0", running: bool = False) -> dict[str, Any]:
    doc = copy.deepcopy(json.loads((HOSTS / "a100-fm-mismatch.json").read_text()))
    f = doc["facts"]
    for g in f["gpus"]:
        g.update(name=gpu, compute_capability=cc, memory_mib=183359)
    topo = f["topology"]
    topo["matrix"] = {
        a: {b: ("NV18" if c == "NV12" else c) for b, c in row.items()}
        for a, row in topo["matrix"].items()
    }
    topo["raw"] = topo["raw"].replace("NV12", "NV18")
    f["driver"].update(flavor="open", kernel_module=DRIVER, userspace=DRIVER)
    f["driver"]["userspace_sources"] = dict.fromkeys(f["driver"]["userspace_sources"], DRIVER)
    f["fabricmanager"] = {"installed": DRIVER, "running": running}
    f["packages"]["nvidia"] = {
        f"{name}-580-server-open" if name == "nvidia-driver" else f"{name}-580-server": DEB
        for name in (
            "libnvidia-compute",
            "libnvidia-nscq",
            "nvidia-compute-utils",
            "nvidia-driver",
            "nvidia-fabricmanager",
            "nvidia-kernel-common",
            "nvidia-utils",
        )
    }
    for d in f["dkms"]:
        d.update(module="nvidia", version=DRIVER)
    return doc


def _plan(doc: dict[str, Any], strategy: str | None = None) -> Any:
    assert F.schema_errors(doc) == [], "the edited snapshot must stay valid facts"
    return plan_host(
        doc["facts"],
        None,
        Constraints(strategy=strategy),
        host="h1",
        python_envs=[],
        kb=KB,
        rules=RULES,
    )


def _finding(plan: Any) -> Any:
    found = [f for f in plan.findings if f.id == "fabric-needs-nvlsm"]
    return found[0] if found else None


def test_the_models_come_from_the_knowledge_base() -> None:
    assert KB.uses_fourth_gen_nvswitch("NVIDIA B200")
    assert KB.uses_fourth_gen_nvswitch("NVIDIA B300 SXM6 AC")
    # GB200/GB300 are NVL72 racks (NVSwitches in switch trays, multi-node NVLink): not this case
    assert not KB.uses_fourth_gen_nvswitch("NVIDIA GB200")
    assert not KB.uses_fourth_gen_nvswitch("NVIDIA GB300")
    assert not KB.uses_fourth_gen_nvswitch("NVIDIA H100 80GB HBM3")
    assert not KB.uses_fourth_gen_nvswitch("NVIDIA A100-SXM4-80GB")


def test_a_b200_nvswitch_host_gets_a_warning_naming_nvlsm() -> None:
    plan = _plan(_snapshot())
    f = _finding(plan)
    assert f is not None, [x.id for x in plan.findings]
    assert f.severity == "warning"
    assert "NVLSM" in f.message and "nvlsm" in f.message
    assert "libibumad3" in f.message and "infiniband-diags" in f.message
    assert "nvlink5-<branch>" in f.message  # the meta-package in NVIDIA's CUDA repository
    assert f.evidence["gpus.name"] == ["NVIDIA B200"]
    assert f.evidence["fabricmanager.running"] is False
    assert "fabric-manager-user-guide" in f.source


def test_driver_pin_on_a_b200_host_says_the_fabric_is_not_fixed_by_it() -> None:
    plan = _plan(_snapshot())
    assert plan.strategy == "driver-pin", plan.path
    assert plan.steps[0].vars.get("gpufix_driver_fabricmanager") is True
    risk = [r for r in plan.risks if "NVLSM" in r]
    assert len(risk) == 1, plan.risks
    assert "does not install" in risk[0] and "nvlsm" in risk[0] and "libibumad3" in risk[0]
    assert "NVLSM" in plan.outcome


def test_fabric_manager_not_installed_the_plan_still_says_so() -> None:
    doc = _snapshot()
    doc["facts"]["fabricmanager"] = {"installed": None, "running": False}
    plan = _plan(doc)
    assert {"fabricmanager-missing", "fabric-needs-nvlsm"} <= {f.id for f in plan.findings}
    assert plan.strategy == "driver-pin", plan.path
    assert any("NVLSM" in r for r in plan.risks), plan.risks


def test_a_healthy_b200_host_is_warned_but_nothing_changes() -> None:
    """Fabric manager running at the driver's version: gpufix cannot tell whether NVLSM runs
    (the facts do not read it), so the warning stays; it is no evidence for a change."""
    plan = _plan(_snapshot(running=True))
    assert _finding(plan) is not None
    assert plan.strategy == "none" and not plan.steps


@pytest.mark.parametrize(
    ("gpu", "cc"),
    [("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA GB200", "10.0")],
)
def test_other_nvswitch_hosts_get_no_such_warning(gpu: str, cc: str) -> None:
    plan = _plan(_snapshot(gpu, cc))
    assert _finding(plan) is None
    assert not any("NVLSM" in r for r in plan.risks)


def test_no_warning_without_nvswitches() -> None:
    """B200s whose pairs the facts do not show on NVLink: no NVSwitch system as gpufix reads it,
    so neither fabric manager finding nor this one."""
    doc = _snapshot()
    doc["facts"]["topology"]["matrix"] = {
        a: dict.fromkeys(row, "SYS") for a, row in doc["facts"]["topology"]["matrix"].items()
    }
    doc["facts"]["topology"]["raw"] = doc["facts"]["topology"]["raw"].replace("NV18", "SYS")
    doc["facts"]["topology"]["worst"] = "SYS"
    plan = _plan(doc)
    assert _finding(plan) is None
