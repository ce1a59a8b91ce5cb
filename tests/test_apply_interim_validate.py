"""`apply --interim` runs the interim's own steps: a permanent fix that still lacks a fact (an
incomplete plan, refused for the permanent run) does not block the interim mitigation beside it.

The plan is the engine's: an HGX A100 (tests/fixtures/hosts/bionic-hwe-8xa100.json) whose
driver nobody could read, and a probe that failed with NCCL's NVLS transport error; the table's
text-nvls-nvswitch row makes driver-pin the fix (incomplete: needs the driver) and NVLS off the
interim.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
from gpufix.apply import rollout
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules
from gpufix.errors import InvalidInput

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
decide = partial(engine.decide, kb=load(), rules=load_rules())


def _plan() -> Plan:
    f = copy.deepcopy(json.loads((HOSTS / "bionic-hwe-8xa100.json").read_text())["facts"])
    f["driver"] = {"unknown": "nvidia-smi: not found"}
    v = {"format": "gpufix-probe", "version": 1, "verdict": "failed", "causes": [],
         "failed_in": {"phase": "pg_init", "ranks": [0, 1]},
         "error": "NCCL WARN transport/nvls.cc:120 cuMulticastCreate failed"}  # fmt: skip
    return replace(decide(f, v), host="h1")


def test_an_incomplete_permanent_fix_does_not_block_its_interim(tmp_path: Path) -> None:
    plan = _plan()
    assert plan.extra["decision"]["row"] == "text-nvls-nvswitch"
    assert plan.strategy == "driver-pin" and plan.extra["complete"] is False
    assert plan.interim is not None and plan.interim.strategy == "nccl-profile"
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1: {}\n")
    with pytest.raises(InvalidInput, match=r"incomplete \(needs: driver\)"):
        rollout.validate([rollout.work_plan(plan, interim=False)], inv)
    work = rollout.work_plan(plan, interim=True)
    rollout.validate([work], inv)  # the interim's own steps are complete
    assert work.steps == plan.interim.steps and work.strategy == "nccl-profile"
