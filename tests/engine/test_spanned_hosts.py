"""An NCCL run with more ranks than the host has GPUs spanned hosts: NCCL refuses two ranks on
one GPU ("Duplicate GPU detected", src/init.cc). An outside review (2026-12-07) wrote a two-node
hang as one host's verdict (2 ranks, a host with one GPU) and got "one GPU: no hang between GPUs
of this host can happen here" -> none, with a known NCCL hang in the facts."""

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

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
SPANNED = "so the run spanned hosts"


def one_gpu() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((HOSTS / "bionic-single-gpu.json").read_text())
    return copy.deepcopy(loaded["facts"])


def stalled(backend: str, world: int) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": backend,
            "world_size": world, "stalled": {"phase": "allreduce", "ranks": list(range(world))},
            "causes": [], "experiments": [], "decided_by": None}  # fmt: skip


def test_two_nccl_ranks_on_a_one_gpu_host_ran_across_hosts() -> None:
    plan = decide(one_gpu(), stalled("nccl", 2))
    assert any(SPANNED in line for line in plan.path)
    assert not any(line.startswith("one GPU: no hang") for line in plan.path)
    assert plan.strategy != "none"


@pytest.mark.parametrize(("backend", "world"), [("gloo", 2), ("nccl", 1)])
def test_gloo_ranks_or_as_many_ranks_as_gpus_say_nothing_of_hosts(backend: str, world: int) -> None:
    plan = decide(one_gpu(), stalled(backend, world))
    assert not any(SPANNED in line for line in plan.path)
    assert plan.strategy == "none"


def test_ranks_sharing_a_gpu_or_a_gpu_off_the_bus_are_not_other_hosts() -> None:
    """The probe's --world-size may exceed the GPUs (ranks share them, and NCCL says
    "Duplicate GPU detected"); a GPU nvidia-smi could not reach is not in the list but is in
    the host."""
    dup = {**stalled("nccl", 2), "error": "ncclInvalidUsage: Duplicate GPU detected : rank 1"}
    assert not any(SPANNED in line for line in decide(one_gpu(), dup).path)
    f = one_gpu()
    f["driver"]["gpu_errors"] = [
        {"pci_bus_id": "0000:41:00.0", "message": "Unable to determine the device handle for "
         "GPU0000:41:00.0: GPU is lost", "rc": 15}
    ]  # fmt: skip
    assert not any(SPANNED in line for line in decide(f, stalled("nccl", 2)).path)
