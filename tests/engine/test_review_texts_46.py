"""What outside reviews (2026-12-07, the twenty-seventh to thirty-second) found unsaid in plans:
a container row that fired on an unread /dev/shm stated the cause as read."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

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
