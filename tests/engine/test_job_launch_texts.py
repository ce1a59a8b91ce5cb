"""Error texts of a job's launch, not of the host (a review, 2026-12-07): "CUDA error: invalid
device ordinal" from 8 ranks on a 4-GPU host (modded-nanogpt#61, --nproc_per_node=4 fixed it)
was read as a run across hosts; a PyTorch rendezvous-store timeout (FlagScale#314, nccl#845)
matched nothing and became a /dev/shm fix or a torch upgrade. Both are `none`: the launch
changes, not the host."""

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


def failed(error: str, world: int = 2, **more: Any) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "failed", "backend": "nccl",
            "world_size": world, "stalled": None,
            "failed_in": {"phase": "pg_init", "ranks": list(range(world))}, "error": error,
            "causes": [], "experiments": [], "decided_by": None, **more}  # fmt: skip


def facts() -> dict[str, Any]:
    f: dict[str, Any] = json.loads((HOSTS / "focal-4x4090.json").read_text())["facts"]
    return f


def test_more_ranks_than_gpus_with_invalid_ordinal_is_the_launch() -> None:
    plan = decide(facts(), failed("RuntimeError: CUDA error: invalid device ordinal", world=8))
    assert plan.extra["decision"]["row"] == "text-invalid-device"
    assert plan.strategy == "none"
    assert not any("spanned hosts" in line for line in plan.path)


@pytest.mark.parametrize(
    "text",
    [
        "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms "
        "while trying to connect to (10.0.0.1, 29500).",
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, "
        "for key: store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00)",
        "DistStoreError: Timed out after 301 seconds waiting for clients. 1/2 clients joined.",
        "[c10d] store->get('1') got error: Socket Timeout",
    ],
)
def test_a_rendezvous_store_timeout_is_no_host_change(text: str) -> None:
    plan = decide(facts(), failed(text))
    assert plan.extra["decision"]["row"] == "text-store-timeout"
    assert plan.strategy == "none"


def test_across_hosts_too() -> None:
    v = failed("The client socket has timed out after 1800s while trying to connect to (n1, 29500)",
               scope="multi-node", hosts=["n1", "n2"], failed_layer=None, failed_hosts=[])  # fmt: skip
    plan = decide(facts(), v)
    assert (plan.strategy, plan.extra["decision"]["row"]) == ("none", "text-store-timeout")
