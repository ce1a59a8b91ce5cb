"""A permanent fix's verification runs without the workaround the host still carries.

An interim nccl-profile (or a hand-made workaround) leaves NCCL_P2P_DISABLE=1 in /etc/nccl.conf;
the probe after a fix of another kind would read it too and pass whether the fix works or not.
The plan names the settings the probe takes at NCCL's default (plan.verify.nccl_defaults), from
nccl_knobs.yaml's `default` (the probe program's NCCL_DEFAULTS agree), and only for a fix that
leaves nccl.conf alone and where the "off" is not the fix itself.
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
from gpufix.planning import plan_host, verify_nccl_defaults
from gpufix.probe.local import load_program

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
FACTS = json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())


def _facts(
    files: dict[str, str], env: dict[str, str] | None = None, doc: dict[str, Any] = FACTS
) -> dict[str, Any]:
    facts = copy.deepcopy(doc["facts"])
    facts["nccl"] = {"env": env or {}, "files": {"/etc/nccl.conf": files} if files else {}}
    return facts


def _plan(facts: dict[str, Any], strategy: str) -> Any:
    c = Constraints(strategy=strategy)
    return plan_host(facts, None, c, host="h", python_envs=None, kb=load_kb(), rules=load_rules())


def test_a_fix_of_another_kind_verifies_with_p2p_at_its_default() -> None:
    plan = _plan(_facts({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}), "kernel-upgrade")
    assert plan.strategy == "kernel-upgrade"
    assert plan.verify["nccl_defaults"] == "NCCL_P2P_DISABLE,NCCL_SHM_DISABLE"


def test_the_environment_counts_and_a_setting_at_its_default_does_not() -> None:
    facts = _facts({"NCCL_P2P_DISABLE": "0"}, env={"NCCL_IB_DISABLE": "1"})
    assert verify_nccl_defaults(_plan(facts, "kernel-upgrade")) == ["NCCL_IB_DISABLE"]
    clean = _facts({})
    assert "nccl_defaults" not in _plan(clean, "kernel-upgrade").verify


@pytest.mark.parametrize("strategy", ["none", "single-gpu"])
def test_a_plan_that_writes_nccl_conf_itself_resets_nothing(strategy: str) -> None:
    facts = _facts({"NCCL_P2P_DISABLE": "1"})
    plan = _plan(facts, strategy)
    assert plan.strategy == strategy and "nccl_defaults" not in plan.verify


def test_the_knowledge_base_and_the_probe_agree_on_the_defaults() -> None:
    """The engine reads nccl_knobs.yaml; the probe, which never imports gpufix, has its own
    copy (NCCL_DEFAULTS): the two must name the same settings and values."""
    assert load_kb().nccl_defaults() == load_program().NCCL_DEFAULTS


def test_the_plan_and_the_probe_share_one_list() -> None:
    prog = load_program()
    facts = _facts({k: "1" for k in prog.NCCL_DEFAULTS} | {"NCCL_P2P_LEVEL": "PXB"})
    got = _plan(facts, "kernel-upgrade").verify["nccl_defaults"].split(",")
    assert got == sorted(prog.NCCL_DEFAULTS)  # P2P_LEVEL has no "off" to undo: left alone


def test_p2p_off_on_gpus_without_p2p_is_the_fix_not_a_workaround() -> None:
    """RTX 4090s have no PCIe P2P (gpu_p2p.yaml): NCCL_P2P_DISABLE=1 stays on through a fix of
    another kind, its probe keeps it, and no risk tells the operator to take it out."""
    doc = json.loads((HOSTS / "focal-4x4090.json").read_text())
    facts = _facts({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, doc=doc)
    plan = _plan(facts, "kernel-upgrade")
    assert plan.verify["nccl_defaults"] == "NCCL_SHM_DISABLE"
    assert not [r for r in plan.risks if "NCCL_P2P_DISABLE=1" in r]
    assert [r for r in plan.risks if "NCCL_SHM_DISABLE=1" in r]
