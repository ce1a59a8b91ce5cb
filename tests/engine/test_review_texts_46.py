"""What outside reviews (2026-12-07, the twenty-seventh to thirty-second) found unsaid in plans:
a container row that fired on an unread /dev/shm stated the cause as read."""

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
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def facts(name: str = "container-shm64m.json") -> dict[str, Any]:
    f: dict[str, Any] = json.loads((HOSTS / name).read_text())["facts"]
    f["pcie"] = f["iommu"] = {"unknown": "not read"}  # no ACS row before the container's
    return f


def hung(**more: Any) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": "nccl",
            "world_size": 2, "stalled": {"phase": "allreduce", "ranks": [0, 1]},
            "failed_in": None, "error": None, "causes": [], "experiments": [],
            "decided_by": None, **more}  # fmt: skip


def test_an_unread_container_shm_is_said_to_be_assumed() -> None:
    """ko-tistory (a review): a pod's hang got "a container whose /dev/shm nobody sized" with
    /dev/shm unread and among the plan's own needs."""
    f = facts()
    f["shm"] = {"unknown": "not read"}
    plan = decide(f, hung())
    assert plan.extra["decision"]["row"] == "collective-container-shm"
    line = next(p for p in plan.path if "[collective-container-shm]" in p)
    assert "assumed: /dev/shm not read, taken to be the 64 MB" in line


def test_a_read_64m_shm_is_not_called_assumed() -> None:
    plan = decide(facts(), hung())
    assert plan.extra["decision"]["row"] == "collective-container-shm"
    assert not any("assumed:" in p for p in plan.path)


BUS_ERROR = ("ERROR: Unexpected bus error encountered in worker. This might be caused by "
             "insufficient shared memory (shm).")  # fmt: skip
NO_SPACE = "NCCL WARN Call to posix_fallocate failed : No space left on device"


def _host_runtime_unread() -> dict[str, Any]:
    """A GPU node's own facts (64 GiB /dev/shm) with Docker's state not read, as kubeflow
    pipelines#6510's review wrote them: the pod that failed is not in them."""
    f = facts("focal-4x4090.json")
    f["containers"]["docker"] = {"unknown": "not read"}
    return f


def failed(error: str) -> dict[str, Any]:
    return hung(verdict="failed", stalled=None, error=error,
                failed_in={"phase": "allreduce", "ranks": [0, 1]})  # fmt: skip


@pytest.mark.parametrize(
    ("error", "row"),
    [(BUS_ERROR, "text-bus-error-host-runtime-unread"),
     (NO_SPACE, "text-shm-host-runtime-unread")],
)  # fmt: skip
def test_shm_that_ran_out_beside_a_big_host_shm_is_a_containers(error: str, row: str) -> None:
    """kubeflow/pipelines#6510 (a review): a pod's DataLoader died of SIGBUS; the node's facts
    (big /dev/shm, Docker unread) got a torch 2.15 venv. Now container-fix, waiting for which
    runtime starts the containers, with both fixes named and no step."""
    plan = decide(_host_runtime_unread(), failed(error))
    assert plan.extra["decision"]["row"] == row
    assert plan.strategy == "container-fix"
    assert plan.steps == [] and plan.extra["complete"] is False
    assert "container-runtime" in [n["id"] for n in plan.extra["needs"]]
    assert "emptyDir" in plan.outcome and "default-shm-size" in plan.outcome


def test_docker_read_keeps_the_docker_host_row() -> None:
    plan = decide(facts("focal-4x4090.json"), failed(BUS_ERROR))
    assert plan.extra["decision"]["row"] == "text-bus-error-docker-host"
    assert plan.steps


def test_no_docker_and_no_kubelet_read_is_not_guessed_a_container() -> None:
    f = facts("focal-4x4090.json")
    f["containers"].update(docker=None, kubelet=False)
    plan = decide(f, failed(BUS_ERROR))
    assert plan.extra["decision"]["row"] != "text-bus-error-host-runtime-unread"
    assert plan.strategy != "container-fix"


def test_no_docker_with_the_kubelet_unread_is_left_as_before() -> None:
    """Facts from a module before 1.6.0 on a host without Docker: a bare host looks the same as
    a containerd Kubernetes node, so no container is blamed (the change set's review)."""
    f = facts("focal-4x4090.json")
    f["containers"]["docker"] = None
    f["containers"].pop("kubelet", None)
    plan = decide(f, failed(BUS_ERROR))
    assert plan.strategy != "container-fix"


@pytest.mark.parametrize(("error", "row"), [(BUS_ERROR, "text-bus-error-kube-node"),
                                            (NO_SPACE, "text-shm-kube-node")])  # fmt: skip
def test_a_kubernetes_node_names_the_pod_spec(error: str, row: str) -> None:
    """kubeflow/pipelines#6510: on a Kubernetes node (facts module 1.6.0 reads the kubelet)
    the fix is the pod's spec, with no step on the node and nothing written to its nccl.conf,
    which pods do not read; Docker on the node changes nothing (its default does not reach
    pods)."""
    for docker in (None, "24.0.7"):
        f = facts("focal-4x4090.json")
        f["containers"].update(docker=docker, kubelet=True)
        plan = decide(f, failed(error))
        assert plan.extra["decision"]["row"] == row
        assert plan.strategy == "container-fix" and plan.steps == []
        assert plan.outcome.startswith("this host is a Kubernetes node")
        assert "emptyDir" in plan.outcome and plan.interim is None
        assert plan.extra["complete"] is True


def test_facts_not_known_to_be_a_hosts_are_not_read_as_one() -> None:
    f = facts("focal-4x4090.json")
    f["containers"] = {"unknown": "not read"}
    f["gathered_in"] = {"unknown": "not read"}
    plan = decide(f, failed(BUS_ERROR))
    assert "runtime-unread" not in plan.extra["decision"]["row"]


def test_the_runtime_unread_row_writes_no_nccl_conf_pods_would_not_read() -> None:
    plan = decide(_host_runtime_unread(), failed(NO_SPACE))
    assert plan.interim is None


def test_a_stopped_fabric_manager_beside_an_unread_driver_needs_no_reboot() -> None:
    """vllm#16127 (a review): fabric manager stopped, its version and the driver's not given;
    the plan said "started after the reboot", where docs/facts.md says a stopped service is
    started without one."""
    f = facts("a100-fm-mismatch.json")
    f["driver"] = {"unknown": "not stated"}
    f["fabricmanager"] = {"installed": {"unknown": "not stated"}, "running": False}
    plan = decide(f, failed("CUDA error: system not yet initialized"))
    assert plan.strategy == "driver-pin"
    assert plan.reboot_required is False
    assert plan.outcome.startswith("fabric manager at the driver's version (the driver is not")
    assert "driver" in [n["id"] for n in plan.extra["needs"]]


def test_a_move_to_a_newer_nccl_with_torch_unread_says_up_from_the_evidence() -> None:
    """Three reviews: `stack_direction` was null where the plan moved to the newest torch
    because the installed one was not in the facts."""
    f = facts("bionic-hwe-8xa100.json")
    f["python_envs"] = {"unknown": "not read"}
    # one experiment ran; none decided
    tried = [{"id": "p2p-off", "env": {}, "gpus": None, "verdict": "hung", "stalled": None,
              "error": None, "elapsed_s": 1.0}]  # fmt: skip
    plan = decide(f, hung(stalled={"phase": "pg_init", "ranks": [0, 1]}, experiments=tried))
    assert plan.extra["decision"]["row"] == "experiments-none-decided"
    assert plan.extra["stack_direction"] == "up"
    assert plan.extra["stack_direction_from"] == "evidence"


def test_an_installed_torch_decides_the_direction() -> None:
    plan = decide(facts("bionic-hwe-8xa100.json"), hung(stalled={"phase": "pg_init",
                                                                  "ranks": [0, 1]}))  # fmt: skip
    assert plan.strategy == "cuda-downgrade"
    assert plan.extra["stack_direction"] == "up"
    assert plan.extra["stack_direction_from"] == "installed"


@pytest.mark.parametrize(("nccl", "moves"), [("2.27.3", False), ("2.21.5", False),
                                            ("2.18.1", True)])  # fmt: skip
def test_a_move_up_with_torch_unread_goes_past_the_jobs_nccl(nccl: str, moves: bool) -> None:
    """The change set's review: torch unread beside the job's NCCL 2.27.3, the row that asks
    for a newer NCCL chose a stack bundling 2.21.5 (bionic's glibc 2.27 holds torch at 2.6)."""
    f = facts("bionic-hwe-8xa100.json")
    f["python_envs"][0]["packages"].update(torch=None, **{"nvidia-nccl-cu12": nccl})
    plan = decide(f, hung(stalled={"phase": "pg_init", "ranks": [0, 1]}))
    assert plan.extra["decision"]["row"] == "collective-unexplained"
    if moves:
        assert plan.strategy == "cuda-downgrade"
        assert plan.extra["stack"]["nccl"] == "2.21.5"
        assert plan.extra["stack_direction"] == "up"
    else:
        assert plan.strategy != "cuda-downgrade"
        why = next(o.reason for o in plan.options if o.strategy == "cuda-downgrade")
        assert "moves the way the evidence asks" in why
