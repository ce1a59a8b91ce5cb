"""NCCL ran out of /dev/shm ("No space left on device") on a host whose own /dev/shm is big
enough and that runs Docker: the segments were a container's (Docker gives each container 64 MB
of /dev/shm unless told), so the fix is the containers' /dev/shm, not NCCL's SHM transport off
(evidence_fixes.yaml `text-shm-docker-host`). Facts gathered on the host see its own /dev/shm,
not the container's."""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import pytest
from corpus.harness import cases
from corpus.snapshot import snapshot_for
from corpus.verdict import verdict_for
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
CASE = next(c for c in cases() if c["id"] == "nccl-342-docker-shm")  # dev split
GIB = 1 << 30


def on_the_host(shm: Any, docker: str | None = "24.0.7") -> Plan:
    snap = snapshot_for(CASE)
    facts = copy.deepcopy(snap["facts"])
    facts["containers"] = {
        **facts["containers"], "in_container": False, "docker": docker, "kubelet": False
    }  # fmt: skip
    facts["shm"] = {"path": "/dev/shm", "size_bytes": shm} if shm else {"unknown": "not read"}
    verdict, _ = verdict_for(CASE, 2)
    return decide(facts, verdict)


def test_a_docker_host_with_room_in_its_own_shm_fixes_the_containers() -> None:
    plan = on_the_host(32 * GIB)
    assert plan.extra["decision"]["row"] == "text-shm-docker-host"
    assert plan.strategy == "container-fix"
    assert plan.interim is not None and plan.interim.strategy == "nccl-profile"
    # The path does not say the chosen fix cannot be applied (outside review, 2026-12-07).
    assert not any("while container-fix cannot be applied" in line for line in plan.path)
    assert any("the interim beside container-fix" in line for line in plan.path)


@pytest.mark.parametrize(
    ("shm", "docker"),
    [
        (64 << 20, "24.0.7"),  # the host's own /dev/shm is the small one
        (None, "24.0.7"),  # nobody read it: the host's could be the small one
        (32 * GIB, None),  # no Docker and no kubelet here: no container to blame
    ],
)
def test_otherwise_the_host_row_still_decides(shm: int | None, docker: str | None) -> None:
    plan = on_the_host(shm, docker)
    assert plan.extra["decision"]["row"] == "text-shm-host"
    assert plan.strategy == "nccl-profile"


def test_inside_the_container_nothing_changes() -> None:
    snap = snapshot_for(CASE)
    verdict, _ = verdict_for(CASE, 2)
    plan = decide(snap["facts"], verdict)
    assert plan.extra["decision"]["row"] == "text-shm-container"


@pytest.mark.parametrize("containers", [{"unknown": "not read"}, {"in_container": False}])
def test_facts_gathered_in_a_container_are_a_container_whatever_containers_says(
    containers: dict[str, Any],
) -> None:
    """A hand-written snapshot (an outside review, 2026-12-07) said `gathered_in: container` and
    left `containers` unknown: the plan named the container's host for its other steps and
    still refused container-fix with "training does not run in containers here"."""
    snap = snapshot_for(CASE)
    facts = copy.deepcopy(snap["facts"])
    facts["gathered_in"] = {"where": "container", "evidence": "/.dockerenv"}
    facts["containers"] = containers
    verdict, _ = verdict_for(CASE, 2)
    plan = decide(facts, verdict)
    assert plan.extra["decision"]["row"] == "text-shm-container"
    assert plan.strategy == "container-fix"


def test_a_container_nobody_measured_is_not_said_to_look_fine() -> None:
    """The same review: with /dev/shm and host networking unread, container-fix was refused as
    "container /dev/shm and network look fine"; it says what was not read instead."""
    snap = snapshot_for(CASE)
    facts = copy.deepcopy(snap["facts"])
    facts["shm"] = {"unknown": "not read"}
    facts["containers"] = {**facts["containers"], "net_host": None, "ipc_host": None}
    plan = decide(facts, {"format": "gpufix-probe", "version": 1, "verdict": "healthy",
                          "backend": "nccl", "world_size": 2, "causes": []})  # fmt: skip
    option = next(o for o in plan.options if o.strategy == "container-fix")
    assert not option.feasible
    assert option.reason.endswith("(/dev/shm and its network not read)"), option.reason
