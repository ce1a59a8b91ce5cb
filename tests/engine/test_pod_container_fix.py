"""Facts from a Kubernetes pod: /dev/shm and the network come from the pod's spec, not from
dockerd's default-shm-size, which the kubelet does not pass on (a review, 2026-12-07:
coreweave/kubernetes-cloud#219 and kserve#3791 got a daemon.json change on the node; the fixes
were an emptyDir with medium: Memory at /dev/shm, and hostIPC). The plan says what the spec
needs, and apply has nothing to run on the node."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
FAILED = {"format": "gpufix-probe", "version": 1, "verdict": "failed", "backend": "nccl",
          "world_size": 2, "stalled": None, "failed_in": {"phase": "allreduce", "ranks": [0, 1]},
          "error": "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x "
                   "(size 9637888)", "causes": [], "experiments": [], "decided_by": None}  # fmt: skip


def in_a(evidence: str) -> dict[str, Any]:
    f: dict[str, Any] = copy.deepcopy(
        json.loads((HOSTS / "container-shm64m.json").read_text())["facts"]
    )
    f["gathered_in"] = {"where": "container", "evidence": evidence}
    return f


def test_a_pod_gets_the_spec_change_and_no_node_step() -> None:
    plan: Plan = decide(in_a("/proc/1/cgroup: kubepods"), FAILED)
    assert plan.strategy == "container-fix"
    assert plan.steps == [] and not plan.changes
    assert "emptyDir volume with medium: Memory" in plan.outcome
    assert "hostIPC: true" in plan.outcome and "daemon.json" not in " ".join(plan.risks)


@pytest.mark.parametrize(
    "evidence", ["/proc/1/environ: KUBERNETES_SERVICE_HOST", "environment: KUBERNETES_SERVICE_HOST"]
)
def test_a_pod_named_by_its_environment_is_a_pod(evidence: str) -> None:
    """Under cgroup v2 /proc/1/cgroup names no kubepods; facts module 1.5.0 reads the variable
    the kubelet gives every container."""
    plan = decide(in_a(evidence), FAILED)
    assert plan.strategy == "container-fix" and plan.steps == []
    assert "emptyDir volume with medium: Memory" in plan.outcome


def test_a_docker_container_keeps_the_daemon_default() -> None:
    plan = decide(in_a("/.dockerenv"), FAILED)
    assert plan.strategy == "container-fix"
    (step,) = plan.steps
    assert "default-shm-size" in step.description


def test_a_pod_on_one_host_needs_no_host_network() -> None:
    """A re-read (2026-12-07): a pod's own network is the rule, not evidence; hostNetwork is
    named only for a run across nodes."""
    f = in_a("/proc/1/cgroup: kubepods")
    assert "hostNetwork" not in decide(f, FAILED).outcome
    across = {**FAILED, "scope": "multi-node", "hosts": ["a", "b"], "failed_layer": "container-network",
              "failed_hosts": ["b"], "error": "NCCL WARN Connection refused"}  # fmt: skip
    assert "hostNetwork: true" in decide(f, across).outcome
