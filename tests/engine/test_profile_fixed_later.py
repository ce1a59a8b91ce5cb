"""An NCCL profile chosen as the fix (no stack move asked) that turns off a mechanism the
installed NCCL has documented problems with says that a later NCCL lets it come off: an expert
review (2026-12-06) found nvls-off written for good on an NVSwitch host with NCCL 2.19.3, whose
NVLS problems NCCL fixed later (nccl_issues.yaml nvls-dual-nic, fixed in 2.22.3)."""

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
HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"


def _nvswitch_host() -> dict[str, Any]:
    """The recorded HGX A100, fabric manager at the driver's version and running."""
    f: dict[str, Any] = copy.deepcopy(json.loads((HOSTS / "a100-fm-mismatch.json").read_text()))
    f = f["facts"]
    f["fabricmanager"] = {"installed": f["driver"]["kernel_module"], "running": True}
    return f


def _nvls_off_decided(nccl: str) -> dict[str, Any]:
    exp = {"id": "nvls-off", "env": {"NCCL_NVLS_ENABLE": "0"}, "gpus": None, "stalled": None,
           "error": None, "verdict": "healthy", "elapsed_s": 5.0}  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": "nccl",
            "world_size": 8, "stalled": {"phase": "pg_init", "ranks": list(range(8))},
            "experiments": [exp], "decided_by": "nvls-off", "facts": {"nccl": nccl}}  # fmt: skip


@pytest.mark.parametrize(("nccl", "named"), [("2.19.3", True), ("2.28.9", False)])
def test_nvls_off_on_an_nccl_with_nvls_fixes_says_a_newer_one_lets_it_off(
    nccl: str, named: bool
) -> None:
    plan = decide(_nvswitch_host(), _nvls_off_decided(nccl), host_name="hgx1")
    assert plan.strategy == "nccl-profile", plan.path
    line = [r for r in plan.risks if r.startswith(f"NCCL {nccl} has")]
    assert bool(line) is named, plan.risks
    if named:
        assert "nvls-dual-nic" in line[0] and "lets nvls-off come off" in line[0]
        # nvls-init-error is a Hopper/Blackwell problem: not on this A100 board
        assert "nvls-init-error" not in line[0]
        assert "`gpufix plan hgx1 --strategy cuda-downgrade`" in line[0]
