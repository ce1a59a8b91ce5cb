"""Unknown is not evidence (issue 12, item 7): when the facts could not list the GPUs, the
strategies the probe's evidence calls for cannot be judged, and the plan asks for the GPUs
instead of passing over them to a reboot nobody's evidence called for (a kernel upgrade)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
ROOT = Path(__file__).resolve().parents[2]


def _host01(gpus_known: bool = True) -> dict[str, Any]:
    """bionic, GA kernel 4.15 (below accelerate's 5.5: a newer HWE kernel exists), 2x RTX 3090."""
    facts: dict[str, Any] = json.loads(
        (ROOT / "inventory" / "snapshots" / "bionic-ga-2x3090.json").read_text()
    )["facts"]
    if not gpus_known:
        facts["gpus"] = {"unknown": "nvidia-smi: timeout after 10s"}
    return facts


def _verdict(decided: str | None, error: str | None = None) -> dict[str, Any]:
    exps = []
    if decided:
        exps = [{"id": decided, "env": {"NCCL_SHM_DISABLE": "1"}, "gpus": None, "stalled": None,
                 "error": None, "verdict": "healthy", "elapsed_s": 1.0}]  # fmt: skip
    kind = "failed" if error else "hung"
    return {"format": "gpufix-probe", "version": 1, "verdict": kind, "backend": "nccl",
            "world_size": 2, "causes": [], "error": error, "experiments": exps,
            "decided_by": decided,
            "stalled": None if error else {"phase": "allreduce", "ranks": [0, 1]},
            "failed_in": {"phase": "cuda_init", "ranks": [0, 1]} if error else None}  # fmt: skip


def _needs(plan: Any) -> list[str]:
    return [n["id"] for n in plan.extra["needs"]]


def test_shm_off_healthy_with_the_gpus_unlisted_asks_for_them() -> None:
    """Asked for while the verdict shows no count either; since 2026-12-07 a run whose two
    NCCL ranks stalled in a collective (past cuda_init) counts as two GPUs, as one whose
    cuda_init phase is recorded did before (engine/probe_facts.py)."""
    v = _verdict("shm-off")
    v["stalled"] = None  # where the main run stopped is not in the verdict
    plan = decide(_host01(gpus_known=False), v)
    assert (plan.strategy, plan.reboot_required) == ("none", False)
    assert "gpus" in _needs(plan)
    assert not any(s.playbook == "kernel_upgrade.yml" for s in plan.steps)
    counted = decide(_host01(gpus_known=False), _verdict("shm-off"))
    assert counted.strategy == decide(_host01(), _verdict("shm-off")).strategy == "nccl-profile"
    assert not any(s.playbook == "kernel_upgrade.yml" for s in counted.steps)


def test_with_the_gpus_listed_the_evidence_decides() -> None:
    plan = decide(_host01(), _verdict("shm-off"))
    assert plan.strategy == "nccl-profile" and "gpus" not in _needs(plan)


def test_a_stall_with_no_experiment_and_the_gpus_unlisted_reboots_nothing() -> None:
    """No kernel upgrade on a risk factor: the collective stall decides as it would with the
    GPUs listed (the run's ranks count them), by the ACS/IOMMU row the facts support."""
    plan = decide(_host01(gpus_known=False), _verdict(None))
    listed = decide(_host01(), _verdict(None))
    assert plan.strategy == listed.strategy == "pcie-acs"
    assert plan.extra["decision"]["row"] == "collective-acs-iommu"
    assert not any(s.playbook == "kernel_upgrade.yml" for s in plan.steps)


def test_a_driver_mismatch_still_pins_the_driver_when_nvidia_smi_cannot_list_the_gpus() -> None:
    """NVML's mismatch is why nvidia-smi lists nothing: the driver fix needs no GPU count."""
    error = "Failed to initialize NVML: Driver/library version mismatch"
    plan = decide(_host01(gpus_known=False), _verdict(None, error))
    assert plan.strategy == "driver-pin"


def test_multi_gpu_evidence_chooses_no_driver_move_with_the_gpus_unlisted() -> None:
    """Second review: P2P off healthy on a host whose GPUs nobody listed chose a driver move
    (a reboot) through the p2p-off-unsupported-driver row; one GPU would make it moot."""
    facts = json.loads((ROOT / "inventory" / "snapshots" / "bionic-single-gpu.json").read_text())[
        "facts"
    ]
    facts["gpus"] = {"unknown": "nvidia-smi: timeout after 10s"}
    v = _verdict("p2p-off")
    v["experiments"][0]["env"] = {"NCCL_P2P_DISABLE": "1"}
    # Since 2026-12-07 the two ranks that stalled in the all-reduce count as two GPUs: the
    # P2P evidence decides, but the branch must drive GPUs nobody named, so the plan stays
    # incomplete and apply refuses it until the facts list them.
    plan = decide(facts, v)
    assert plan.strategy == "driver-pin" and plan.extra["complete"] is False
    assert "gpus" in _needs(plan)
    v["stalled"] = None  # no count at all: nothing is chosen
    plan = decide(facts, v)
    assert (plan.strategy, plan.reboot_required) == ("none", False)
    assert "gpus" in _needs(plan)


def test_a_driver_branch_move_on_driver_evidence_waits_for_the_gpus() -> None:
    """CUDA's own start stalls (driver evidence, which decides without a GPU count), but the
    branch it moves to must drive every GPU: with none listed, the plan is incomplete."""
    v = _verdict(None)
    v.update(stalled={"phase": "cuda_init", "ranks": [0, 1]})
    plan = decide(_host01(gpus_known=False), v)
    assert plan.strategy == "driver-pin"
    assert plan.extra["complete"] is False and "gpus" in _needs(plan)
    known = decide(_host01(), v)
    assert known.strategy == "driver-pin" and "gpus" not in _needs(known)


def test_cuda_that_does_not_start_names_the_driver_layer_with_the_driver_unread() -> None:
    """An outside review (2026-12-07): CUDA's start stalled, the facts held no driver, and the
    plan chose `none` ("no driver evidence"), against decision.md's rule that the evidence's
    fix class stands and a missing parameter makes it incomplete. Apply refuses it until the
    driver is read, so nothing moves on an unknown."""
    facts = _host01()
    facts["driver"] = {"unknown": "nvidia-smi: not found"}
    v = _verdict(None)
    v.update(stalled={"phase": "cuda_init", "ranks": [0, 1]})
    plan = decide(facts, v)
    assert plan.extra["decision"]["row"] == "init-stall"
    assert plan.strategy == "driver-pin" and plan.extra["complete"] is False
    assert "driver" in _needs(plan)
    # nor does its text claim the installed version stays, or print an unread driver as None
    assert "installed version" not in plan.outcome
    assert not any("None" in r for r in plan.risks)
