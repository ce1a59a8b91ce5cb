"""A locked-memory limit is not a fabric fault (a review, 2026-12-07: nccl-tests#206, where
`ibv_reg_mr_iova2 ... Cannot allocate memory` went away after memlock was raised in
limits.conf, got `ib-off`). NCCL's troubleshooting guide names pinned-memory limits; the plan
is `none` with the limit to raise, and other IB errors keep the IB row."""

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


def failed(error: str) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "failed", "backend": "nccl",
            "world_size": 2, "stalled": None, "failed_in": {"phase": "pg_init", "ranks": [0, 1]},
            "error": error, "causes": [], "experiments": [], "decided_by": None}  # fmt: skip


def facts() -> dict[str, Any]:
    f: dict[str, Any] = json.loads((HOSTS / "focal-4x4090.json").read_text())["facts"]
    return f


@pytest.mark.parametrize(
    "text",
    [
        "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
        "NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory errno 12",
        "NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory",
    ],
)
def test_a_memlock_failure_names_the_limit_not_ib_off(text: str) -> None:
    plan = decide(facts(), failed(text))
    assert (plan.strategy, plan.extra["decision"]["row"]) == ("none", "text-ib-memlock")
    assert any("ulimit -l" in line and "LimitMEMLOCK" in line for line in plan.path)


WARNING = ("libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes.\n    This will severely limit "
           "memory registrations.\n")  # fmt: skip


def test_the_low_limit_warning_alone_comes_after_experiments() -> None:
    """A second re-read (2026-12-07): libibverbs prints the warning whether or not anything
    failed, so it must not outrank what an experiment showed; beside an IB error it names the
    limit before IB off."""
    plan = decide(facts(), failed(WARNING + "NCCL WARN NET/IB : Got completion with error 12"))
    assert (plan.strategy, plan.extra["decision"]["row"]) == ("none", "text-ib-memlock-low")
    healed = {**failed(WARNING + "NCCL WARN unhandled system error"), "decided_by": "p2p-off",
              "experiments": [{"id": "p2p-off", "verdict": "healthy", "error": None}]}  # fmt: skip
    assert decide(facts(), healed).extra["decision"]["row"].startswith("p2p-off")


def test_another_ib_failure_keeps_the_ib_row() -> None:
    plan = decide(facts(), failed("NCCL WARN Call to ibv_reg_mr failed with error Bad address"))
    assert plan.extra["decision"]["row"] == "text-ib"


def test_the_limit_outranks_a_layer_and_an_experiment() -> None:
    """A re-read (2026-12-07): below the layer and experiment rows, the row reached hand-written
    verdicts only; the probe's own multi-node verdicts name a layer, and IB off heals a memlock
    failure too (no registration without IB)."""
    text = "NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"
    across = {**failed(text), "scope": "multi-node", "hosts": ["a", "b"], "failed_hosts": ["b"]}
    for layer in ("ib", "bootstrap"):
        plan = decide(facts(), {**across, "failed_layer": layer})
        assert plan.extra["decision"]["row"] == "text-ib-memlock", layer
    healed = {**failed(text), "decided_by": "ib-off",
              "experiments": [{"id": "ib-off", "verdict": "healthy", "error": None}]}  # fmt: skip
    assert decide(facts(), healed).extra["decision"]["row"] == "text-ib-memlock"


def test_queue_creation_out_of_locked_memory_is_the_limit_too() -> None:
    text = "NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory"
    assert decide(facts(), failed(text)).extra["decision"]["row"] == "text-ib-memlock"
