"""A review (2026-12-05): host10's plan (inventory/example.yml, 4x RTX 5090 on torch 2.9.0+cu130)
said "not torch 2.11.0: its NCCL has  on this setup" for releases passed over only to stay on
the installed one, which have no NCCL problem there."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
SNAP = Path(__file__).parents[2] / "inventory" / "snapshots" / "noble-4x5090.json"


def test_releases_passed_over_to_stay_on_the_installed_one_give_no_empty_reason() -> None:
    plan = decide(json.loads(SNAP.read_text())["facts"], None)
    [option] = [o for o in plan.options if o.strategy == "cuda-downgrade"]
    assert option.feasible and "2.9.0" in option.reason
    texts = [o.reason for o in plan.options] + list(plan.risks)
    assert not [t for t in texts if "has  on" in t or "not torch 2.1" in t]
