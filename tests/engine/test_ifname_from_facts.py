"""An interface the verdict names but the host's facts do not list is not written into a profile
(docs/decision.md, "What `strategy` is when the permanent fix cannot be determined": the plan is
incomplete and asks for the interfaces; review of issue 12, defect 12)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
ROOT = Path(__file__).resolve().parents[2]


def _host03() -> dict[str, Any]:
    """focal, 4x RTX 4090; interfaces lo, eno1, docker0."""
    doc = json.loads((ROOT / "inventory" / "snapshots" / "focal-4x4090.json").read_text())
    facts: dict[str, Any] = doc["facts"]
    return facts


def _decided_by(name: str) -> dict[str, Any]:
    env = {"NCCL_SOCKET_IFNAME": name, "GLOO_SOCKET_IFNAME": name}
    exp = {"id": f"ifname-{name}", "env": env, "gpus": None, "stalled": None, "error": None,
           "verdict": "healthy", "elapsed_s": 1.0}  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": "nccl",
            "world_size": 4, "stalled": {"phase": "pg_init", "ranks": [0, 1, 2, 3]},
            "experiments": [exp], "decided_by": f"ifname-{name}", "causes": []}  # fmt: skip


@pytest.mark.parametrize("name", ["eno1", "eno"])
def test_an_interface_the_host_has_is_written(name: str) -> None:
    plan = decide(_host03(), _decided_by(name))
    assert plan.strategy == "nccl-profile" and plan.extra["complete"] is True
    assert plan.steps[0].vars["gpufix_nccl_profile_socket_ifname"] == name


def test_an_interface_the_host_does_not_have_leaves_the_plan_incomplete() -> None:
    plan = decide(_host03(), _decided_by("eth9"))
    assert plan.strategy == "nccl-profile" and plan.extra["complete"] is False
    assert "interfaces" in [n["id"] for n in plan.extra["needs"]]
    assert "gpufix_nccl_profile_socket_ifname" not in plan.steps[0].vars


@pytest.mark.parametrize("listed", [[], [{"name": "lo", "up": True}]])
def test_facts_that_list_no_interface_cannot_confirm_the_verdicts(listed: list[Any]) -> None:
    """Second review: an unknown or empty list let any name through."""
    facts = _host03()
    facts["network"]["interfaces"] = listed
    plan = decide(facts, _decided_by("eth9"))
    assert plan.extra["complete"] is False


def test_loopback_is_on_every_host_but_only_by_its_own_name() -> None:
    assert decide(_host03(), _decided_by("lo")).extra["complete"] is True
    assert decide(_host03(), _decided_by("l")).extra["complete"] is False


@pytest.mark.parametrize("layer", ["bootstrap", "interface"])
def test_an_interface_no_run_named_is_a_guess_the_plan_does_not_apply(layer: str) -> None:
    """An outside review (2026-12-07): a multi-node verdict that names the failing layer but no
    interface pinned the facts' first physical one (eno1), "complete" with no needs, though no
    run showed it working and NCCL may pick it already (src/misc/socket.cc). The plan names it
    and waits for the multi-node probe's ifname experiments."""
    v = {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": "nccl",
         "world_size": 8, "scope": "multi-node", "hosts": ["a", "b"], "failed_layer": layer,
         "failed_hosts": ["b"], "stalled": {"phase": "pg_init", "ranks": [0, 4]},
         "experiments": [], "decided_by": None, "causes": []}  # fmt: skip
    plan = decide(_host03(), v)
    assert plan.strategy == "nccl-profile"
    assert plan.steps[0].vars["gpufix_nccl_profile_socket_ifname"] == "eno1"
    assert plan.extra["complete"] is False
    assert "interface-choice" in [n["id"] for n in plan.extra["needs"]]
    named = decide(_host03(), _decided_by("eno1"))  # an experiment named it: nothing to wait for
    assert "interface-choice" not in [n["id"] for n in named.extra["needs"]]
