"""When the facts could not list the GPUs (nvidia-smi failed or is missing) but the probe ran NCCL
across them, the probe's run counts them: a verdict with multi-GPU evidence then decides instead
of waiting for facts that would only repeat what the run showed (engine/probe_facts.py)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from a100_cumem import a100_host, cumem_off_decided
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.probe_facts import probe_gpus, with_probe_facts
from gpufix.engine.rules import load as load_rules
from gpufix.facts.host import from_facts

decide = partial(engine.decide, kb=load(), rules=load_rules())
CUDA_STARTED = [{"phase": "cuda_init", "rank": 0, "start": 1.0, "end": 2.0, "ok": True}]


def run(**kw: Any) -> dict[str, Any]:
    return {**cumem_off_decided(), "backend": "nccl", "world_size": 4, "phases": CUDA_STARTED,
            **kw}  # fmt: skip


def no_gpu_list() -> dict[str, Any]:
    facts = a100_host("2.3.0+cu121")
    facts["gpus"] = {"unknown": "nvidia-smi: command not found"}
    return facts


def test_the_ranks_own_count_and_names_are_read() -> None:
    names = {str(i): "NVIDIA A100-SXM4-80GB" for i in range(8)}
    got = probe_gpus(run(facts={"gpu_count": 8, "gpu_names": names}))
    assert got == (8, ("NVIDIA A100-SXM4-80GB",) * 8)


def test_an_older_verdict_counts_one_gpu_per_rank_once_cuda_started() -> None:
    assert probe_gpus(run()) == (4, ())
    assert probe_gpus(run(phases=[{**CUDA_STARTED[0], "ok": False, "end": None}])) is None
    assert probe_gpus(run(phases=[], stalled=None)) is None
    assert probe_gpus(run(world_size=1)) is None  # one rank shows no second GPU


@pytest.mark.parametrize(
    "where",
    [
        {"stalled": {"phase": "allreduce", "ranks": [0, 1]}},
        {"stalled": None, "failed_in": {"phase": "pg_init", "ranks": [1]}},
        {"stalled": None, "phases": [{"phase": "barrier", "rank": 0, "start": 1.0, "ok": False}]},
    ],
)
def test_a_run_that_reached_a_later_phase_had_started_cuda(where: dict[str, Any]) -> None:
    """An outside review (2026-12-07) wrote verdicts by hand with no phases, only where the run
    failed (`failed_in: pg_init`): the ranks run cuda_init before any later phase, so the run
    counts its GPUs as one whose cuda_init phase is recorded does."""
    assert probe_gpus(run(phases=[], **where) if "phases" not in where else run(**where)) == (
        4,
        (),
    )
    early = {"stalled": None, "failed_in": {"phase": "cuda_init", "ranks": [1]}}
    assert probe_gpus(run(phases=[], **early)) is None


@pytest.mark.parametrize(
    "change",
    [
        {"backend": "gloo"},  # --cpu: no GPU was used
        {"backend": None},
        {"scope": "multi-node"},  # ranks on several hosts: not this host's GPUs
    ],
)
def test_runs_that_did_not_use_this_hosts_gpus_count_nothing(change: dict[str, Any]) -> None:
    assert probe_gpus(run(**change)) is None


@pytest.mark.parametrize("count", [0, -1, 65, True, "4", 4.0, None])
def test_a_count_that_is_not_a_reading_falls_back_to_the_ranks(count: object) -> None:
    assert probe_gpus(run(facts={"gpu_count": count})) == (4, ())


@pytest.mark.parametrize(
    "name", ["{{ lookup('pipe', 'id') }}", "A100\nB100", "$(id)", "x" * 200, 7, None, ["A100"]]
)
def test_names_that_do_not_read_as_names_are_dropped(name: object) -> None:
    v = run(facts={"gpu_count": 2, "gpu_names": {"0": "NVIDIA A100-SXM4-80GB", "1": name}})
    assert probe_gpus(v) == (2, ())  # a partial list would misname the host's GPUs


def test_gpus_the_facts_listed_are_kept() -> None:
    host = from_facts(a100_host("2.3.0+cu121"))
    got = with_probe_facts(host, run(facts={"gpu_count": 2}))
    assert (got.gpu_count, got.gpu_names) == (host.gpu_count, host.gpu_names)
    assert "gpus" not in got.probe_measured


def test_the_run_decides_where_the_facts_listed_no_gpu() -> None:
    """Before, the plan chose nothing and waited for `gpus`; the run's four ranks on NCCL are that
    fact. The finding says where the count came from."""
    waiting = decide(no_gpu_list(), run(phases=[], stalled=None))  # no sign CUDA started
    assert waiting.strategy == "none" and waiting.extra["complete"] is False
    plan = decide(no_gpu_list(), run())
    assert plan.strategy == "nccl-profile" and plan.extra.get("complete") is not False
    found = {f.id: f for f in plan.findings}
    assert "gpus-unknown" not in found
    assert found["stack-from-probe"].evidence["probe.facts.gpus"].startswith("4 ")
