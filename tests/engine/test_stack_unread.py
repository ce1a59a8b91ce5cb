"""A stall nothing explains, with no experiment run and the job's torch and NCCL unread, changes
nothing on the host (issue 12, item 7): the plan names the probe and the training environment
as what decides. Once either is known, the version move comes back."""

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
PG_INIT = {"phase": "pg_init", "ranks": [0, 1]}


def facts() -> dict[str, Any]:
    f: dict[str, Any] = json.loads((HOSTS / "bionic-hwe-8xa100.json").read_text())["facts"]
    f["python_envs"] = {"unknown": "not read"}
    return f


def hung(**more: Any) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": "nccl",
            "world_size": 2, "stalled": PG_INIT, "failed_in": None, "error": None,
            "causes": [], "experiments": [], "decided_by": None, **more}  # fmt: skip


def experiment(exp_id: str, result: str) -> dict[str, Any]:
    return {"id": exp_id, "env": {}, "gpus": None, "verdict": result, "stalled": None,
            "error": None, "elapsed_s": 1.0}  # fmt: skip


def test_nothing_read_and_nothing_tried_changes_nothing() -> None:
    plan = decide(facts(), hung())
    assert plan.extra["decision"]["row"] == "collective-unread"
    assert plan.strategy == "none" and plan.steps == []
    needs = [n["id"] for n in plan.extra["needs"]]
    assert "experiments" in needs and "nccl-version" in needs
    assert not plan.reboot_required


def test_a_failure_with_an_error_nothing_reads_is_the_same() -> None:
    plan = decide(facts(), hung(verdict="failed", stalled=None, failed_in=PG_INIT,
                                error="RuntimeError: something nobody has a signature for"))  # fmt: skip
    assert plan.extra["decision"]["row"] == "collective-unread"


def test_a_read_torch_brings_the_move_back() -> None:
    f = json.loads((HOSTS / "bionic-hwe-8xa100.json").read_text())["facts"]
    plan = decide(f, hung())
    assert plan.extra["decision"]["row"] == "collective-unexplained"
    assert plan.strategy == "cuda-downgrade"


def test_the_probes_own_nccl_reading_brings_the_move_back() -> None:
    plan = decide(facts(), hung(facts={"nccl": "2.18.1"}))
    assert plan.extra["decision"]["row"] == "collective-unexplained"
    assert plan.strategy == "cuda-downgrade"


def test_an_experiment_that_ran_is_not_nothing_tried() -> None:
    plan = decide(facts(), hung(experiments=[experiment("p2p-off", "hung")]))
    assert plan.extra["decision"]["row"] == "experiments-none-decided"
    assert plan.strategy == "cuda-downgrade"


def test_gpu_pair_runs_are_not_a_mechanism_tried() -> None:
    """The change set's review: pairs change no NCCL mechanism (signals.evidence), so a verdict
    with only pair runs has still tried nothing."""
    pairs = [experiment("gpus-0-1", "hung"), experiment("gpus-2-3", "hung")]
    plan = decide(facts(), hung(experiments=pairs))
    assert plan.extra["decision"]["row"] == "collective-unread"
    assert "experiments" in [n["id"] for n in plan.extra["needs"]]


def test_the_legacy_no_p2p_rerun_is_an_experiment_that_ran() -> None:
    rerun = {"verdict": "hung", "stalled": None, "error": None}
    plan = decide(facts(), hung(no_p2p_rerun=rerun))
    assert plan.extra["decision"]["row"] != "collective-unread"
