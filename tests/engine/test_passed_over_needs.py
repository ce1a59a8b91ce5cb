"""Unknown is not evidence (issue 12, item 7): a decision-table row that the probe's evidence
matched but an unknown fact kept from firing adds that fact to the plan's needs, instead of a
later row's answer standing as if the facts had ruled it out."""

from __future__ import annotations

from functools import partial
from typing import Any

from a100_cumem import a100_host
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())


def _pair_hangs() -> dict[str, Any]:
    """GPU subsets: every pair with GPU 3 hangs, the others are healthy."""
    exps = [
        {"id": f"gpus-{a}-{b}", "env": {}, "gpus": [a, b], "stalled": None, "error": None,
         "verdict": "hung" if 3 in (a, b) else "healthy", "elapsed_s": 1.0}
        for a, b in ((0, 1), (0, 3), (1, 3))
    ]  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
            "stalled": {"phase": "allreduce", "ranks": [0, 1, 2, 3]}, "experiments": exps,
            "suspects": {"gpus": [3], "links": []}}  # fmt: skip


def _needs(plan: Any) -> list[str]:
    return [n["id"] for n in plan.extra["needs"]]


def test_an_unknown_driver_is_asked_for_before_the_gpu_is_blamed() -> None:
    known = decide(a100_host("2.8.0+cu128"), _pair_hangs())
    assert known.extra["decision"]["row"] == "gpu-pair-hardware"
    assert "driver" not in _needs(known)  # R580 is known, supported, no release-note issue

    facts = a100_host("2.8.0+cu128")
    facts["driver"] = {"unknown": "nvidia-smi not found"}
    plan = decide(facts, _pair_hangs())
    assert plan.extra["decision"]["row"] == "gpu-pair-hardware"
    assert "driver" in _needs(plan)  # three driver rows come first and could not be judged


def test_a_row_ruled_out_on_known_facts_asks_for_nothing() -> None:
    plan = decide(a100_host("2.8.0+cu128"), _pair_hangs())
    assert "shm" not in _needs(plan) and "acs" not in _needs(plan)


def test_a_fabric_manager_fix_without_the_driver_version_asks_for_it() -> None:
    """The fabric manager must match the driver exactly: with the driver unread, driver-pin is
    the fix class, incomplete until the driver version is read, as decision.md's "What
    `strategy` is" says (a review, 2026-12-07, dorado#1214: without a verdict the plan said
    driver-pin was not feasible and chose `none`, with a verdict it chose driver-pin)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = json.loads((root / "tests" / "fixtures" / "hosts" / "a100-fm-mismatch.json").read_text())
    facts = doc["facts"]
    assert decide(facts, None).strategy == "driver-pin"
    facts["driver"] = {"unknown": "nvidia-smi not found"}
    plan = decide(facts, None)
    assert plan.strategy == "driver-pin" and plan.extra["complete"] is False
    (step,) = plan.steps
    assert step.description == "fabric manager at exactly the driver's version, started and held"
    assert "driver" in _needs(plan)
