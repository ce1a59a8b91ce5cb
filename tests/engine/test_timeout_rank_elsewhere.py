"""PyTorch's watchdog timed out a collective that some ranks never reached while the others
waited for the job's whole timeout: the job's own work on those ranks (tokenizing on rank 0
while the rest wait in a barrier) outran the timeout, and nothing on the host changes (a
review, 2026-12-07: five of seven watchdog-timeout threads were this, and each got P2P off or a
torch upgrade). A stall of every rank, or one without the watchdog's text, keeps its rows."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine import signals
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
WATCHDOG = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800598 "
            "milliseconds before timing out.")  # fmt: skip


def verdict(stalled: dict[str, Any], error: str = WATCHDOG) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "failed", "backend": "nccl",
            "world_size": 4, "stalled": stalled, "error": error, "causes": [],
            "experiments": [], "decided_by": None}  # fmt: skip


def facts() -> dict[str, Any]:
    f: dict[str, Any] = json.loads((HOSTS / "focal-4x4090.json").read_text())["facts"]
    return f


def test_rank_0_elsewhere_while_the_others_waited_is_the_jobs() -> None:
    v = verdict({"phase": "barrier", "ranks": [0], "waiting": [1, 2, 3]})
    assert signals.read(v, KB).elsewhere == (0,)
    plan = decide(facts(), v)
    assert plan.strategy == "none" and plan.steps == []
    assert plan.extra["decision"]["row"] == "timeout-rank-elsewhere"
    assert "ddp_timeout" in plan.path[0]


def test_called_counts_as_having_reached_it() -> None:
    v = verdict({"phase": "allreduce", "ranks": [2], "called": [0, 1, 3]})
    assert decide(facts(), v).extra["decision"]["row"] == "timeout-rank-elsewhere"


def test_every_rank_in_it_is_a_hang_of_the_collective() -> None:
    for stalled in ({"phase": "barrier", "ranks": [0, 1, 2, 3]},
                    {"phase": "barrier", "ranks": [0, 1], "waiting": [0, 1]}):  # fmt: skip
        assert signals.read(verdict(stalled), KB).elsewhere == ()
        assert decide(facts(), verdict(stalled)).extra["decision"]["row"] != (
            "timeout-rank-elsewhere"
        )


def test_a_probe_stall_of_one_rank_without_the_watchdog_is_not_the_jobs() -> None:
    """The probe's own verdict names a rank that made no progress: its code is the same on
    every rank, so that is not the job's work elsewhere."""
    v = verdict(
        {"phase": "allreduce", "ranks": [1], "waiting": [0]},
        "ranks [1] made no progress in allreduce for 30.0 s (phase deadline); ranks [0] were "
        "waiting for them",
    )
    assert decide(facts(), v).extra["decision"]["row"] != "timeout-rank-elsewhere"


def test_gpu_pair_runs_alone_are_no_knob_that_failed_to_help() -> None:
    """A review (2026-12-07): a verdict whose only experiments were GPU pairs read as
    "knob experiments ran and none helped" (experiments:none-decided) and moved the stack."""
    pair = {"id": "gpus-0-1", "env": {}, "gpus": [0, 1], "verdict": "hung", "stalled": None,
            "error": None, "elapsed_s": 5.0}  # fmt: skip
    v = {**verdict({"phase": "allreduce", "ranks": [0, 1, 2, 3]}, "hang"), "experiments": [pair]}
    assert "experiments:none-decided" not in signals.read(v, KB).evidence()
    knob = {**pair, "id": "p2p-off", "gpus": None, "env": {"NCCL_P2P_DISABLE": "1"}}
    v["experiments"] = [pair, knob]
    assert "experiments:none-decided" in signals.read(v, KB).evidence()


def test_a_rank_that_died_is_not_busy_elsewhere() -> None:
    """A re-read (2026-12-07): failed_in's ranks died, and a stall beside a rank's own CUDA
    error or a signal is no slow job step."""
    v = verdict({"phase": "allreduce", "ranks": [1], "called": [0]})
    v["failed_in"], v["stalled"] = v["stalled"], None
    assert signals.read(v, KB).elsewhere == ()
    for died in ("CUDA error: an illegal memory access was encountered; " + WATCHDOG,
                 "rank 1 killed by signal 9; " + WATCHDOG):  # fmt: skip
        v = verdict({"phase": "allreduce", "ranks": [1], "waiting": [0, 2, 3]}, died)
        assert decide(facts(), v).extra["decision"]["row"] != "timeout-rank-elsewhere", died


def test_an_experiment_that_decided_comes_first() -> None:
    exp = {"id": "p2p-off", "env": {"NCCL_P2P_DISABLE": "1"}, "gpus": None,
           "verdict": "healthy", "stalled": None, "error": None, "elapsed_s": 9.0}  # fmt: skip
    v = {**verdict({"phase": "barrier", "ranks": [0], "waiting": [1, 2, 3]}),
         "experiments": [exp], "decided_by": "p2p-off"}  # fmt: skip
    assert decide(facts(), v).extra["decision"]["row"] == "p2p-off-gpu-without-p2p"
