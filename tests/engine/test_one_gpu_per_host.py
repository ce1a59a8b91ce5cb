"""One GPU per host is a multi-GPU job when the job spans hosts (cloud VMs with one GPU each):
NCCL still joins the hosts over their interface, IB/RoCE and the PCIe path to the NIC. A run
across hosts is planned on such a host; a host's own run with one GPU still cannot hang between
GPUs (engine/decide.py, strategies/evidence.py)."""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

from corpus.harness import cases, score
from corpus.snapshot import snapshot_for
from corpus.verdict import verdict_for
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
CASE = next(c for c in cases() if c["id"] == "pytorch-81313-socket-ifname")  # dev split


def planned(gpus: Any, scope: str = "multi-node", world: int = 2) -> tuple[Plan, bool]:
    snap = snapshot_for(CASE)
    facts = copy.deepcopy(snap["facts"])
    facts["gpus"] = facts["gpus"][:gpus] if isinstance(gpus, int) else gpus
    verdict, _ = verdict_for(CASE, world)
    plan = decide(facts, {**verdict, "scope": scope})
    return plan, score(CASE, plan.to_dict())[0]


def test_one_gpu_in_a_run_across_hosts_gets_the_fix() -> None:
    plan, hit = planned(1)
    assert hit and plan.strategy == "nccl-profile"
    assert any("one GPU on this host in a run across hosts" in line for line in plan.path)
    options = {o.strategy: o for o in plan.options}
    assert not options["single-gpu"].feasible  # hiding GPUs needs two on this host


def test_a_count_nobody_could_read_does_not_hold_back_a_run_across_hosts() -> None:
    plan, hit = planned({"unknown": "nvidia-smi: command not found"})
    assert hit and "gpus" not in {n["id"] for n in plan.extra["needs"]}


def test_one_gpu_in_this_hosts_own_run_still_cannot_hang_between_gpus() -> None:
    # One rank: the host's own run on its one GPU. (Two NCCL ranks with one GPU here spanned
    # hosts, whatever the verdict's scope says: tests/engine/test_spanned_hosts.py.)
    plan, _ = planned(1, scope="host", world=1)
    assert plan.strategy == "none"
    assert plan.path[-1].startswith("one GPU: no hang between GPUs of this host can happen here")
    # only a job across hosts can hang here: the multi-node probe would show it
    assert "multinode-probe" in {n["id"] for n in plan.extra["needs"]}
    assert "multinode-probe" not in {n["id"] for n in planned(1)[0].extra["needs"]}


def test_no_gpu_is_still_not_applicable() -> None:
    plan, _ = planned(0)
    assert plan.strategy == "none" and plan.path == ["no NVIDIA GPU -> none (not applicable)"]


def test_a_healthy_run_across_hosts_still_points_at_what_comes_later() -> None:
    """A healthy start-up clears the start, not the hang: a soak or the training program is next,
    with one GPU per host as with several."""
    snap = snapshot_for(CASE)
    facts = {**snap["facts"], "gpus": snap["facts"]["gpus"][:1]}
    healthy = {"format": "gpufix-probe", "version": 1, "verdict": "healthy", "causes": [],
               "scope": "multi-node"}  # fmt: skip
    plan = decide(facts, healthy)
    assert plan.strategy == "none"
    assert {"soak", "workload"} <= {n["id"] for n in plan.extra["needs"]}
    alone = decide(facts, {**healthy, "scope": "host"})
    assert not {"soak", "workload"} & {n["id"] for n in alone.extra.get("needs") or []}
