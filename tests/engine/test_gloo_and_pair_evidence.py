"""What a verdict is not evidence of (docs/decision.md, "The decision table"): in a gloo run
(`gpufix probe HOST --cpu`) NCCL reads none of its settings, so neither the NCCL knob
experiments nor the legacy P2P-off rerun nor the causes read from them say anything about the
GPUs; and a healthy GPU pair decides nothing by itself, even when a verdict names it in
`decided_by` (review of issue 12, defects 2 and 11)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.engine.signals import as_evidence

decide = partial(engine.decide, kb=load(), rules=load_rules())
ROOT = Path(__file__).resolve().parents[2]


def _facts() -> dict[str, Any]:
    doc = json.loads((ROOT / "inventory" / "snapshots" / "bionic-ga-2x3090.json").read_text())
    facts: dict[str, Any] = doc["facts"]
    return facts


def _p2p_off_healthy(backend: str) -> dict[str, Any]:
    """As `gpufix probe --cpu` writes it when the fault clears under NCCL_P2P_DISABLE=1."""
    exp = {"id": "p2p-off", "env": {"NCCL_P2P_DISABLE": "1"}, "gpus": None, "stalled": None,
           "error": None, "verdict": "healthy", "elapsed_s": 1.0}  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": backend,
            "world_size": 2, "stalled": {"phase": "pg_init", "ranks": [0, 1]},
            "experiments": [exp], "decided_by": "p2p-off",
            "no_p2p_rerun": {"verdict": "healthy"},
            "causes": [{"id": "p2p-path", "strategy": "pcie-acs", "why": "x"},
                       {"id": "nccl-protocol", "strategy": "nccl-profile", "why": "x"}]}  # fmt: skip


def _row(plan: Any) -> str:
    return str(plan.extra["decision"]["row"])


def test_p2p_off_in_a_gloo_run_is_no_evidence() -> None:
    plan = decide(_facts(), _p2p_off_healthy("gloo"))
    assert not _row(plan).startswith("p2p-off")
    assert plan.extra["decision"]["evidence"] != "experiment:p2p-off"
    cleaned = as_evidence(_p2p_off_healthy("gloo"))
    assert cleaned is not None
    assert cleaned["no_p2p_rerun"] is None and cleaned["experiments"] == []
    assert cleaned["causes"] == [] and cleaned["decided_by"] is None


def test_p2p_off_in_an_nccl_run_decides() -> None:
    plan = decide(_facts(), _p2p_off_healthy("nccl"))
    assert _row(plan).startswith("p2p-off")


def test_a_gpu_pair_named_as_decided_by_decides_nothing() -> None:
    v = _p2p_off_healthy("nccl")
    v.update(experiments=[], causes=[], no_p2p_rerun=None, decided_by="gpus-0-1", suspects=None)
    plan = decide(_facts(), v)
    assert not _row(plan).startswith("gpu-pair")
    assert not str(plan.extra["decision"]["evidence"]).startswith("experiment:gpus")


def _stalled(backend: str, **more: Any) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": backend,
            "world_size": 2, "stalled": {"phase": "allreduce", "ranks": [0, 1]}} | more  # fmt: skip


def test_a_gloo_stall_on_an_acs_host_asks_for_a_gpu_probe_and_changes_nothing() -> None:
    """ACS redirects GPU peer traffic; a gloo all-reduce of CPU tensors never crossed it."""
    nccl = decide(_facts(), _stalled("nccl"))
    assert (nccl.strategy, _row(nccl)) == ("pcie-acs", "collective-acs-iommu")
    gloo = decide(_facts(), _stalled("gloo"))
    assert (gloo.strategy, _row(gloo)) == ("none", "gloo-stall")
    assert [n["id"] for n in gloo.extra["needs"]] == ["gpu-probe"]
    assert "without --cpu or --backend gloo" in gloo.extra["needs"][0]["how"]
    # A gloo run need not be a CPU run (`--backend gloo` moves CUDA tensors): the plan does not
    # say it was (outside review, 2026-12-07).
    assert not any("CPU tensors" in line for line in gloo.path)


def test_a_gloo_soak_or_failed_interface_experiments_point_at_no_nccl_fix() -> None:
    soak = {"sizes": [1024, 65536], "iters": 5, "verdict": "hung", "stalled_at_bytes": 65536}
    healthy_main = _stalled("gloo", verdict="healthy", stalled=None, soak=soak)
    plan = decide(_facts(), healthy_main)
    assert (plan.strategy, _row(plan)) == ("none", "gloo-stall")
    exp = {"id": "ifname-eth0", "env": {"NCCL_SOCKET_IFNAME": "eth0"}, "gpus": None,
           "stalled": {"phase": "allreduce", "ranks": [1]}, "error": None, "verdict": "hung",
           "elapsed_s": 1.0}  # fmt: skip
    plan = decide(_facts(), _stalled("gloo", experiments=[exp]))
    assert (plan.strategy, _row(plan)) == ("none", "gloo-stall")


def test_cpu_rank_pairs_point_at_no_pcie_path() -> None:
    """`gpufix probe --cpu` runs the GPU-pair experiments on CPU ranks: a rank whose inclusion
    hangs names no GPU and no PCIe path, so the plan asks for a probe on the GPUs instead of
    turning ACS off and setting iommu=pt (probe review, 2026-12-06). The same pairs from an NCCL
    run on the GPUs still decide."""
    pair = {"id": "gpus-0-2", "env": {}, "gpus": [0, 2], "stalled": {"phase": "barrier",
            "ranks": [0, 2]}, "error": None, "verdict": "hung", "elapsed_s": 3.0}  # fmt: skip
    single = {"verdict": "healthy", "device": "cpu"}
    gloo = _stalled(
        "gloo", world_size=3, experiments=[pair], suspects={"gpus": [2], "links": []},
        causes=[{"id": "gpu-path", "strategy": "pcie-acs", "why": "x"}], single_gpu=single,
    )  # fmt: skip
    plan = decide(_facts(), gloo)
    assert (plan.strategy, _row(plan)) == ("none", "gloo-stall")
    assert "single-gpu-fine" not in {f.id for f in plan.findings}
    nccl = dict(gloo, backend="nccl", single_gpu={"verdict": "healthy", "device": "cuda:0"})
    plan = decide(_facts(), nccl)
    assert plan.strategy == "pcie-acs" and _row(plan).startswith("gpu-pair")
    assert "single-gpu-fine" in {f.id for f in plan.findings}
