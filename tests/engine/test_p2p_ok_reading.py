"""An RTX 4090 host whose driver reads P2P OK: drivers before 550.40.07 report P2P between
GeForce RTX 40 GPUs though it does not work (accelerate's check_cuda_p2p_ib_support, gpu_p2p.yaml
`ok_reading_before_driver`), NCCL tries it and hangs, and turning P2P off heals it. The engine
believed the reading and planned ACS off and iommu=pt with a reboot on the recorded 4x4090 host
(expert review, 2026-12-06); NCCL_P2P_DISABLE=1 is the fix there. From 550.40.07 an OK reading
is believed again."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.diagnose import no_p2p
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.facts.host import from_facts

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"


def _facts(driver: str) -> dict[str, Any]:
    f: dict[str, Any] = copy.deepcopy(json.loads((HOSTS / "focal-4x4090.json").read_text()))
    f = f["facts"]
    f["driver"].update(kernel_module=driver, userspace=driver)
    f["driver"]["userspace_sources"] = dict.fromkeys(f["driver"]["userspace_sources"], driver)
    gpus = list(f["p2p"]["read"])
    f["p2p"]["read"] = {a: {b: "OK" for b in gpus if b != a} for a in gpus}
    return f


def _p2p_off_healthy() -> dict[str, Any]:
    exp = {"id": "p2p-off", "env": {"NCCL_P2P_DISABLE": "1"}, "gpus": None, "stalled": None,
           "error": None, "verdict": "healthy", "elapsed_s": 4.0}  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": "nccl",
            "world_size": 4, "stalled": {"phase": "allreduce", "ranks": [0, 1, 2, 3]},
            "experiments": [exp], "decided_by": "p2p-off"}  # fmt: skip


@pytest.mark.parametrize(("driver", "untrusted"), [("525.60.13", True), ("550.40.07", False)])
def test_an_ok_reading_of_an_early_driver_is_not_believed(driver: str, untrusted: bool) -> None:
    assert no_p2p(from_facts(_facts(driver)), KB) is untrusted


def test_p2p_off_healing_a_4090_on_an_early_driver_is_the_no_p2p_fix() -> None:
    plan = decide(_facts("525.60.13"), _p2p_off_healthy())
    assert plan.strategy == "nccl-profile", plan.path
    assert plan.extra["decision"]["row"] == "p2p-off-gpu-without-p2p"
    found = {f.id: f for f in plan.findings}
    assert "not believed below 550.40.07" in found["gpu-no-p2p"].message
    assert not plan.reboot_required


def test_from_550_40_07_the_reading_stands() -> None:
    plan = decide(_facts("550.40.07"), _p2p_off_healthy())
    assert plan.extra["decision"]["row"] != "p2p-off-gpu-without-p2p"
    assert "gpu-no-p2p" not in {f.id for f in plan.findings}
