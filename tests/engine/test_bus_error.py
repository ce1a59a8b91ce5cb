"""A rank killed by SIGBUS on shared memory is a /dev/shm too small to back its pages: PyTorch's
DataLoader says so in its own error ("Unexpected bus error encountered in worker. This might be
caused by insufficient shared memory (shm)"), NVIDIA's JAX Toolbox FAQ gives --shm-size for a bus
error in Docker, and DeepSpeed's launcher reports it as "exits with return code = -7" (Python's
subprocess: -N is signal N). The outside review of 2026-12-07 (LLaVA#739 written by hand) found
the signal read as nothing."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
GIB = 1 << 30


def facts(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((HOSTS / f"{name}.json").read_text())
    return copy.deepcopy(loaded["facts"])


def failed(error: str) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "failed", "backend": "nccl",
            "world_size": 4, "failed_in": {"phase": "pg_init", "ranks": [0, 1, 2, 3]},
            "error": error, "causes": [], "experiments": [], "decided_by": None}  # fmt: skip


def row(plan: Any) -> str | None:
    return (plan.extra.get("decision") or {}).get("row")


TEXTS = [
    "[launch.py:321:sigkill_handler] ['python', '-u', 'train.py'] exits with return code = -7",
    "Signal 7 (SIGBUS) received by PID 2410",
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
    "shared memory (shm).",
    "Bus error (core dumped)",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_bus_error_in_a_container_is_its_shm(text: str) -> None:
    sig = next(s for s in KB.error_signatures if s.id == "shm-bus-error")
    assert sig.found_in(text)
    plan = decide(facts("container-shm64m"), failed(text))
    assert (plan.strategy, row(plan)) == ("container-fix", "text-bus-error-container")


def test_on_a_docker_host_with_room_in_its_own_shm_it_is_a_container_s() -> None:
    f = facts("bionic-ga-2x3090")
    f["containers"] = dict(f["containers"], docker="24.0.7", in_container=False)
    f["shm"] = dict(f["shm"], size_bytes=32 * GIB)
    plan = decide(f, failed(TEXTS[0]))
    assert (plan.strategy, row(plan)) == ("container-fix", "text-bus-error-docker-host")


def test_without_containers_no_container_is_blamed() -> None:
    plan = decide(facts("bionic-ga-2x3090"), failed(TEXTS[1]))
    assert plan.strategy != "container-fix"
    assert not (row(plan) or "").startswith("text-bus-error")


def test_a_pcie_aer_line_is_not_a_bus_error_of_a_process() -> None:
    sig = next(s for s in KB.error_signatures if s.id == "shm-bus-error")
    line = "pcieport 0000:00:01.1: PCIe Bus Error: severity=Corrected, type=Physical Layer"
    assert not sig.found_in(line)
