"""NCCL's multi-node InfiniBand hang from 2.29.7, fixed in 2.30.7, avoided with NCCL_PXN_DISABLE=1
(nccl_issues.yaml pxn-multinode-ib-hang; NVIDIA's cuBLASMp troubleshooting page, Known Issues).

torch -> the NCCL its default wheel pins (torch_nccl.yaml, PyPI METADATA): 2.11.0 -> 2.28.9,
2.12.0, 2.12.1 and 2.13.0 -> 2.29.7, 2.14.0, 2.14.1 and 2.15.0 -> 2.30.7 (the fix). A multi-node host with
IB/RoCE moves up to a release with the fixed NCCL. How the choice treats affected releases is
tested on the knowledge base as it stood before the fix shipped (`before_fix`: the rows up to
torch 2.13.0): a move passes over 2.12/2.13 while an older release that moves the same way fits;
when none does, the plan keeps the move, names the hang in its risks and writes the pxn-off
profile as its interim. A single-node host's plans do not change. The host is the recorded noble 4x RTX 5090 host with H100 GPUs (P2P
reads OK, ACS and the IOMMU off: the case is about NCCL only), driver 580.95.05 (runs CUDA 13.0)
and an mlx5 adapter where the case is about IB.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufix import versions
from gpufix.engine import decide as engine
from gpufix.engine import kb as kbmod
from gpufix.engine import setup, stack_choice
from gpufix.engine.kb import DEFAULT_DIR, KnowledgeBase, load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules
from gpufix.errors import GpufixError
from gpufix.facts.host import from_facts

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
ROLE_VARS = Path(__file__).parents[2] / "roles" / "nccl_profile" / "vars" / "main.yml"
KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
ISSUE = "pxn-multinode-ib-hang"
MULTI_IB = frozenset({"multi-node", "infiniband"})
FIXED = ("2.14.0", "2.14.1", "2.15.0")  # the releases whose wheel pins NCCL 2.30.7


@pytest.fixture(scope="module")
def before_fix(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    """The knowledge base without the torch releases after 2.13.0: no release bundles the fix."""
    d = tmp_path_factory.mktemp("kb") / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    for name, key in (("torch_releases.yaml", "version"), ("torch_nccl.yaml", "torch")):
        rows = yaml.safe_load((d / name).read_text())
        kept = [r for r in rows if versions.key(r[key]) <= versions.key("2.13.0")]
        assert {r[key] for r in rows} - {r[key] for r in kept} == set(FIXED), name
        (d / name).write_text(yaml.safe_dump(kept, sort_keys=False))
    return kbmod.load(d)


def host(torch: str, ib: bool = True) -> dict[str, Any]:
    f = copy.deepcopy(json.loads((HOSTS / "noble-4x5090.json").read_text())["facts"])
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["driver"]["userspace_sources"] = dict.fromkeys(f["driver"]["userspace_sources"], "580.95.05")
    for gpu in f["gpus"]:  # GPUs with P2P, so the case is about NCCL only
        gpu.update(name="NVIDIA H100 80GB HBM3", compute_capability="9.0")
    f["p2p"]["read"] = {a: dict.fromkeys(row, "OK") for a, row in f["p2p"]["read"].items()}
    for bridge in f["pcie"]["bridges"]:  # ACS off, IOMMU off: no PCIe suspect either
        bridge["acs_enabled"] = False
    f["python_envs"][0]["packages"]["torch"] = torch
    f["network"]["infiniband"] = ["mlx5_0"] if ib else []
    return f


def none_decided(multi_node: bool) -> dict[str, Any]:
    """A collective hang that no knob experiment turned healthy (the probe contract's form)."""
    exps = [
        {"id": i, "env": {}, "gpus": None, "verdict": "hung", "stalled": None, "error": None,
         "elapsed_s": 1.0}
        for i in ("ib-off", "proto-simple", "algo-ring", "p2p-off", "shm-off", "cumem-off")
    ]  # fmt: skip
    v: dict[str, Any] = {"format": "gpufix-probe", "version": 1, "verdict": "hung",
                         "causes": [], "stalled": {"phase": "allreduce", "ranks": [0, 1]},
                         "experiments": exps, "decided_by": None}  # fmt: skip
    if multi_node:
        v |= {"scope": "multi-node", "hosts": ["gpu01", "gpu02"], "failed_layer": "collective",
              "failed_hosts": []}  # fmt: skip
    return v


def ib_off_decided() -> dict[str, Any]:
    """A multi-node collective hang that turning InfiniBand off (NCCL_IB_DISABLE=1) made healthy."""
    exp = {"id": "ib-off", "env": {"NCCL_IB_DISABLE": "1"}, "gpus": None, "verdict": "healthy",
           "stalled": None, "error": None, "elapsed_s": 1.0}  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
            "stalled": {"phase": "allreduce", "ranks": [0, 1]}, "experiments": [exp],
            "decided_by": "ib-off", "scope": "multi-node", "hosts": ["gpu01", "gpu02"],
            "failed_layer": "collective", "failed_hosts": []}  # fmt: skip


def torch_of(plan: Plan) -> str:
    return str(plan.steps[0].vars["gpufix_ml_stack_torch_version"])


# --- the knowledge ------------------------------------------------------------------------------


def test_the_row_names_the_range_the_fix_the_setup_and_the_workaround() -> None:
    issue = next(i for i in KB.nccl_issues if i.id == ISSUE)
    assert issue.matches("2.29.7") and issue.matches("2.30.3") and issue.matches("2.30.4")
    assert issue.matches("2.29.3") is False and issue.matches("2.28.9") is False
    assert issue.fixed_in == "2.30.7" and issue.matches(issue.fixed_in) is False
    assert issue.setup == ("multi-node", "infiniband")
    assert issue.workaround == "pxn-off"
    assert "docs.nvidia.com/cuda/cuest/troubleshooting" in issue.source
    assert "env.html#nccl-pxn-disable" in issue.source
    # torch 2.12 and 2.13 pin nvidia-nccl-cu13==2.29.7: both inside the range, 2.11 below it;
    # 2.14.0, 2.14.1 and 2.15.0 pin the fixed 2.30.7.
    for torch, inside in (
        ("2.11.0", False), ("2.12.0", True), ("2.13.0", True), *((t, False) for t in FIXED)
    ):  # fmt: skip
        row = KB.torch_nccl_version(torch)
        assert row is not None and issue.matches(row.nccl) is inside, torch
    for torch in FIXED:
        row = KB.torch_nccl_version(torch)
        assert row is not None and row.torch == torch and row.nccl == issue.fixed_in


def test_pxn_off_is_one_profile_in_the_knowledge_base_and_the_role() -> None:
    profile = KB.nccl_profile("pxn-off")
    assert profile is not None and dict(profile.settings) == {"NCCL_PXN_DISABLE": "1"}
    assert "inter-node" in profile.cost and not profile.debug
    role = yaml.safe_load(ROLE_VARS.read_text())["_gpufix_nccl_profile_catalogue"]["pxn-off"]
    assert role["settings"] == {"NCCL_PXN_DISABLE": "1"}
    for label in ("when", "cost", "source"):
        assert "=" not in role[label], label  # comment lines of /etc/nccl.conf (NVIDIA/nccl#1540)


def test_a_workaround_that_is_not_a_profile_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    rows = yaml.safe_load((d / "nccl_issues.yaml").read_text())
    next(r for r in rows if r["id"] == ISSUE)["workaround"] = "pxn-of"
    (d / "nccl_issues.yaml").write_text(yaml.safe_dump(rows, sort_keys=False))
    with pytest.raises(
        GpufixError, match=re.escape("workaround 'pxn-of' is not in nccl_profiles.yaml")
    ):
        kbmod.load(d)


def test_an_unknown_setup_word_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    rows = yaml.safe_load((d / "nccl_issues.yaml").read_text())
    next(r for r in rows if r["id"] == ISSUE)["setup"] = ["multinode"]
    (d / "nccl_issues.yaml").write_text(yaml.safe_dump(rows, sort_keys=False))
    with pytest.raises(GpufixError, match=re.escape("'multinode'")):
        kbmod.load(d)


# --- the stack choice ---------------------------------------------------------------------------


def test_the_host_setup_reads_the_probe_scope_and_the_ib_devices() -> None:
    assert setup.shown(from_facts(host("2.9.0+cu130")), True) == MULTI_IB
    assert setup.shown(from_facts(host("2.9.0+cu130")), False) == {"infiniband"}
    assert setup.shown(from_facts(host("2.9.0+cu130", ib=False)), True) == {"multi-node"}


def unread_network(torch: str) -> dict[str, Any]:
    f = host(torch)
    del f["network"]["infiniband"]
    return f


def test_unread_network_facts_cannot_rule_out_ib() -> None:
    """An empty list is "no IB/RoCE device"; a missing one is "not read" (a gather that failed,
    or a snapshot without it), which must not count as none."""
    assert setup.unread(from_facts(host("2.9.0+cu130", ib=False))) == frozenset()
    assert setup.unread(from_facts(host("2.9.0+cu130"))) == frozenset()
    h = from_facts(unread_network("2.9.0+cu130"))
    assert setup.shown(h, True) == {"multi-node"} and setup.unread(h) == {"infiniband"}


def test_with_ib_unread_the_move_passes_over_the_affected_releases_and_says_why(
    before_fix: KnowledgeBase,
) -> None:
    plan = decide(unread_network("2.9.0+cu130"), none_decided(multi_node=True), kb=before_fix)
    assert plan.strategy == "cuda-downgrade" and torch_of(plan) == "2.11.0"
    reason = next(o.reason for o in plan.options if o.strategy == "cuda-downgrade")
    assert "not torch 2.13.0" in reason and "if it has IB/RoCE devices" in reason
    assert plan.interim is None and "nccl_companion" not in plan.extra


def test_with_ib_unread_and_only_affected_releases_the_risk_is_named_not_worked_around(
    before_fix: KnowledgeBase,
) -> None:
    """Nothing shows the setup, so no pxn-off is written; the risk says what would matter."""
    plan = decide(unread_network("2.11.0+cu130"), none_decided(multi_node=True), kb=before_fix)
    assert plan.strategy == "cuda-downgrade" and torch_of(plan) == "2.13.0"
    risk = next(r for r in plan.risks if ISSUE in r)
    assert "do not say whether the host has IB/RoCE devices" in risk and "pxn-off" in risk
    assert plan.interim is None and "nccl_companion" not in plan.extra


def test_a_multi_node_ib_host_moving_up_gets_the_fixed_nccl() -> None:
    h = from_facts(host("2.9.0+cu130"))
    best = stack_choice.choose(h, KB, stack_choice.Want("up", setup=MULTI_IB))
    assert best is not None and best["torch"] == "2.15.0" and best["direction"] == "up"
    assert best["nccl"] == "2.30.7" and best["nccl_issues"] == [] and best["passed_over"] == {}
    # Its only variant is CUDA 13.2, which driver 580.95.05 runs through minor-version compat.
    assert best["cuda"] == "13.2" and best["minor_compat"] is True


def test_a_multi_node_ib_host_moving_up_passes_over_the_affected_releases(
    before_fix: KnowledgeBase,
) -> None:
    h = from_facts(host("2.9.0+cu130"))
    best = stack_choice.choose(h, before_fix, stack_choice.Want("up", setup=MULTI_IB))
    assert best is not None and best["torch"] == "2.11.0" and best["direction"] == "up"
    assert best["nccl"] == "2.28.9" and best["nccl_issues"] == []
    assert best["passed_over"] == {"2.13.0": [ISSUE], "2.12.1": [ISSUE], "2.12.0": [ISSUE]}


@pytest.mark.parametrize(
    "where", [frozenset(), frozenset({"infiniband"}), frozenset({"multi-node"})]
)
def test_without_the_whole_setup_the_newest_release_is_chosen(
    where: frozenset[str], before_fix: KnowledgeBase
) -> None:
    h = from_facts(host("2.9.0+cu130"))
    best = stack_choice.choose(h, before_fix, stack_choice.Want("up", setup=where))
    assert best is not None and best["torch"] == "2.13.0"
    assert best["passed_over"] == {} and best["nccl_issues"] == []


def test_when_only_affected_releases_move_the_way_asked_the_choice_names_the_issue(
    before_fix: KnowledgeBase,
) -> None:
    h = from_facts(host("2.11.0+cu130"))
    best = stack_choice.choose(h, before_fix, stack_choice.Want("up", setup=MULTI_IB))
    assert best is not None and best["torch"] == "2.13.0" and best["passed_over"] == {}
    [issue] = best["nccl_issues"]
    assert issue["id"] == ISSUE and issue["fixed_in"] == "2.30.7"
    assert issue["workaround"] == "pxn-off" and issue["workaround_cost"]


def test_the_setup_issue_is_judged_on_the_build_chosen_not_the_pypi_wheel(
    before_fix: KnowledgeBase,
) -> None:
    """Volta GPUs get torch's CUDA 12.6 build, which pins NCCL 2.29.3 (below the hang's range),
    not the default wheel's 2.29.7: nothing to pass over."""
    f = host("2.9.0+cu126")
    for gpu in f["gpus"]:
        gpu.update(name="Tesla V100-SXM2-32GB", compute_capability="7.0")
    best = stack_choice.choose(from_facts(f), before_fix, stack_choice.Want("up", setup=MULTI_IB))
    assert best is not None and best["torch"] == "2.13.0" and best["cuda"] == "12.6"
    assert best["nccl"] == "2.29.3" and best["passed_over"] == {} and best["nccl_issues"] == []


def test_a_fixed_nccl_asked_for_is_judged_on_the_build_chosen() -> None:
    """The fix is in NCCL 2.30.7: torch 2.14's default wheel has it, its CUDA 12.6 build (2.29.3)
    does not, so a Volta host finds no release that carries it."""
    f = host("2.9.0+cu126")
    for gpu in f["gpus"]:
        gpu.update(name="Tesla V100-SXM2-32GB", compute_capability="7.0")
    want = stack_choice.Want("up", nccl_min="2.30.7", setup=MULTI_IB)
    assert stack_choice.choose(from_facts(f), KB, want) is None


# --- the plan, through decide() -----------------------------------------------------------------


def test_multi_node_ib_plan_moves_up_to_the_fixed_nccl() -> None:
    plan = decide(host("2.9.0+cu130"), none_decided(multi_node=True))
    assert plan.extra["decision"]["row"] == "experiments-none-decided"
    assert plan.strategy == "cuda-downgrade" and plan.extra["stack_direction"] == "up"
    assert torch_of(plan) == "2.15.0" and plan.extra["stack"]["nccl"] == "2.30.7"
    assert not any(ISSUE in r for r in plan.risks) and plan.interim is None


def test_multi_node_ib_plan_moves_up_to_a_release_outside_the_range(
    before_fix: KnowledgeBase,
) -> None:
    plan = decide(host("2.9.0+cu130"), none_decided(multi_node=True), kb=before_fix)
    assert plan.extra["decision"]["row"] == "experiments-none-decided"
    assert plan.strategy == "cuda-downgrade" and plan.extra["stack_direction"] == "up"
    assert torch_of(plan) == "2.11.0"
    assert "not torch 2.13.0" in next(
        o.reason for o in plan.options if o.strategy == "cuda-downgrade"
    )
    assert not any(ISSUE in r for r in plan.risks) and plan.interim is None


@pytest.mark.parametrize(
    ("installed", "multi_node"),
    [
        ("2.9.0+cu130", False),  # one node: the setup's issue does not count
        ("2.11.0+cu130", True),  # a fixed release exists: the newest has the fix, no pxn-off
    ],
)
def test_the_move_goes_to_the_newest_without_pxn_off(installed: str, multi_node: bool) -> None:
    plan = decide(host(installed), none_decided(multi_node=multi_node))
    assert plan.strategy == "cuda-downgrade" and torch_of(plan) == "2.15.0"
    assert not any(ISSUE in r for r in plan.risks) and plan.interim is None
    assert "nccl_companion" not in plan.extra


def test_no_release_outside_the_range_keeps_the_move_with_pxn_off_and_the_risk(
    before_fix: KnowledgeBase,
) -> None:
    plan = decide(host("2.11.0+cu130"), none_decided(multi_node=True), kb=before_fix)
    assert plan.strategy == "cuda-downgrade" and torch_of(plan) == "2.13.0"
    risk = next(r for r in plan.risks if ISSUE in r)
    assert "2.30.7" in risk and "pxn-off" in risk and "cost:" in risk
    assert plan.extra["nccl_companion"] == {"profiles": ["pxn-off"], "issues": [ISSUE]}
    assert plan.interim is not None and plan.interim.strategy == "nccl-profile"
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["pxn-off"]
    assert not plan.interim.reboot_required


def test_one_node_with_ib_on_the_same_stack_gets_no_pxn_profile(
    before_fix: KnowledgeBase,
) -> None:
    plan = decide(host("2.11.0+cu130"), none_decided(multi_node=False), kb=before_fix)
    assert plan.strategy == "cuda-downgrade" and torch_of(plan) == "2.13.0"
    assert not any(ISSUE in r for r in plan.risks) and plan.interim is None


def test_ib_off_on_an_affected_nccl_moves_up_to_the_fixed_nccl() -> None:
    """torch 2.13 (NCCL 2.29.7) across two IB hosts, healthy with IB off: the stack moves up to
    a wheel that pins NCCL 2.30.7, and the hang is no longer a risk of the chosen stack."""
    plan = decide(host("2.13.0+cu130"), ib_off_decided())
    assert plan.extra["decision"]["row"] == "ib-off-known-nccl-issue"
    assert plan.strategy == "cuda-downgrade" and plan.extra["stack_direction"] == "up"
    assert torch_of(plan) in FIXED and plan.extra["stack"]["nccl"] == "2.30.7"
    assert plan.extra["stack"]["nccl_issues"] == []
    assert not any(ISSUE in r for r in plan.risks)
    assert "nccl_companion" not in plan.extra
    # The row's interim keeps RDMA until the new stack runs; it is no longer a risk of the stack.
    assert plan.interim is not None
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["pxn-off"]


def test_ib_off_on_an_affected_nccl_before_the_fix_shipped_is_the_pxn_off_profile(
    before_fix: KnowledgeBase,
) -> None:
    plan = decide(host("2.13.0+cu130"), ib_off_decided(), kb=before_fix)
    assert plan.extra["decision"]["row"] == "ib-off-known-nccl-issue"
    assert plan.strategy == "nccl-profile"
    assert plan.steps[0].vars["gpufix_nccl_profile_names"] == ["pxn-off"]


def test_the_ib_layer_failing_on_an_affected_nccl_moves_up_to_the_fixed_nccl() -> None:
    v: dict[str, Any] = {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
                         "stalled": {"phase": "allreduce", "ranks": [0, 1]},
                         "scope": "multi-node", "hosts": ["gpu01", "gpu02"],
                         "failed_layer": "ib", "failed_hosts": ["gpu02"]}  # fmt: skip
    plan = decide(host("2.13.0+cu130"), v)
    assert plan.extra["decision"]["row"] == "layer-ib-known-nccl-issue"
    assert plan.strategy == "cuda-downgrade" and torch_of(plan) in FIXED
    assert plan.extra["stack"]["nccl"] == "2.30.7" and not any(ISSUE in r for r in plan.risks)
    assert plan.interim is not None
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["pxn-off"]
