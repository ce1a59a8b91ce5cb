"""A driver older than any torch build in the table gets no wheel. Noticed 2026-12-07 on the
corpus case nccl-tests#5 (test split; driver 384.66 on 16.04) while checking why the 16.04 row
moved it: its plan had been torch 1.8.1+cu101 "through minor-version compatibility", which CUDA
10 does not have (cu101 needs 418.39, Table 3); the table had no 10.1 row, and an unknown was
read as minor-version compatibility."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.engine.stack import driver_runs_cuda

KB = load()
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def test_cuda_10_1_needs_its_own_minimum() -> None:
    assert driver_runs_cuda(KB, "384.66", (10, 1)) == (False, False)
    assert driver_runs_cuda(KB, "418.39", (10, 1)) == (True, False)


def test_xenial_names_its_hwe_series_and_why_gpufix_does_not_move_it() -> None:
    """A review (2026-12-07) read "no HWE kernel for ubuntu 16.04", which is false: 16.04.5's
    HWE kernel is 4.15 (linux-generic-hwe-16.04); gpufix's kernel role does not support 16.04."""
    f = json.loads((HOSTS / "jammy-4xp100-torch28.json").read_text())["facts"]
    f["os"] = {"id": "ubuntu", "version_id": "16.04", "codename": "xenial",
               "pretty_name": "Ubuntu 16.04.7 LTS"}  # fmt: skip
    f["kernel"]["release"] = "4.4.0-210-generic"
    plan = partial(engine.decide, kb=KB, rules=load_rules())(f)
    why = next(o.reason for o in plan.options if o.strategy == "kernel-upgrade")
    assert "xenial's newest HWE series is 4.15" in why and "does not support xenial" in why
    assert "no HWE kernel" not in why
