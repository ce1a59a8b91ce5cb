"""What a plan says about the host is true of the snapshot: an unread fact is said to be unread,
and a risk names a change the plan makes. An outside review (2026-12-07) wrote snapshots by hand
and found "training does not run in containers here" and "no HWE kernel for this OS" said of
sections left unknown, the ACS isolation risk on a plan that only sets iommu=pt, and a guessed
reason ("facts older than module 1.1.0") for a reading a 1.3.0 snapshot lacked."""

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


def facts(name: str = "bionic-ga-2x3090") -> dict[str, Any]:
    loaded: dict[str, Any] = copy.deepcopy(json.loads((HOSTS / f"{name}.json").read_text()))
    return loaded["facts"]


def reason(f: dict[str, Any], strategy: str) -> str:
    plan = decide(f, STALL)
    return next(o.reason for o in plan.options if o.strategy == strategy)


def test_unread_containers_and_os_are_said_to_be_unread() -> None:
    f = facts()
    f["containers"] = {"unknown": "not read"}
    f["os"] = {"unknown": "not read"}
    assert reason(f, "container-fix") == "whether training runs in containers is not in the facts"
    assert reason(f, "kernel-upgrade").startswith("the OS release is not in the facts")
    known = facts()  # a host the facts say runs no container, on bionic
    assert reason(known, "container-fix") == "training does not run in containers here"


def test_a_plan_that_only_sets_iommu_pt_names_its_own_risk() -> None:
    f = facts()
    f["pcie"] = {**f["pcie"], "bridges": []}  # ACS read: nothing redirects
    f["iommu"] = {**f["iommu"], "mode": "translated"}
    plan = decide(f, STALL)
    assert plan.strategy == "pcie-acs"
    assert plan.steps[0].vars.get("gpufix_pcie_acs_iommu_passthrough") is True
    assert not plan.steps[0].vars.get("gpufix_pcie_acs_bridges")
    assert not any("disabling ACS" in r for r in plan.risks)
    assert any(r.startswith("iommu=pt:") for r in plan.risks)


def test_the_kernel_finding_says_when_the_installed_accelerate_does_not_check() -> None:
    """accelerate 0.20.3 predates check_os_kernel (0.24.0): it prints no warning (review,
    2026-12-07); the kernel stays a risk factor, and the finding says which accelerate it saw."""
    f = facts()
    plan = decide(f, STALL)
    (found,) = [x for x in plan.findings if x.id == "kernel-below-accelerate-threshold"]
    assert "accelerate 0.20.3 here predates the check and prints no warning" in found.message
    f["python_envs"][0]["packages"]["accelerate"] = "0.34.2"
    (found,) = [x for x in decide(f, STALL).findings if x.id == "kernel-below-accelerate-threshold"]
    assert "predates" not in found.message


def test_a_stack_not_asked_for_on_unread_facts_is_said_to_be_unread() -> None:
    """ "no torch release fits glibc unknown, Python unknown and driver unknown" read as a checked
    misfit (review, 2026-12-07): nothing was checked, as nothing asked for a stack change."""
    f = facts()
    f["glibc"] = {"unknown": "not stated"}
    f["pythons"] = {"unknown": "not stated"}
    f["driver"] = {"unknown": "not stated"}
    why = reason(f, "cuda-downgrade")
    assert why.startswith(
        "glibc not in the facts, and the evidence does not ask"
    )  # Python: the env


def test_the_kernel_risk_does_not_promise_a_warning_an_old_accelerate_never_printed() -> None:
    plan = decide(facts(), STALL)
    assert plan.strategy != "kernel-upgrade"
    (line,) = [r for r in plan.risks if r.startswith("the kernel stays below")]
    assert "accelerate >= 0.24.0 would warn of it" in line and "remains" not in line
