"""The probe reads the kernel log where the run failed (`facts.kernel_log`); its Xid and AER
counts were never read, so a pair that isolated GPU 2 came with no word of the AER errors the
probe had counted (expert review, 2026-12-06). A higher count than the facts' (the newer reading
since the same boot) or one the facts lack is taken and named."""

from __future__ import annotations

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


def _facts() -> dict[str, Any]:
    f: dict[str, Any] = json.loads((HOSTS / "focal-4x4090.json").read_text())["facts"]
    f["kernel_log"] = {"xid": 0, "nvrm": 0, "aer": 0}
    return f


def _verdict(backend: str, log: Any) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": backend,
            "world_size": 4, "stalled": {"phase": "allreduce", "ranks": [0, 1, 2, 3]},
            "facts": {"kernel_log": log}}  # fmt: skip


def test_the_probes_xid_and_aer_counts_become_findings() -> None:
    plan = decide(_facts(), _verdict("nccl", {"xid": 2, "nvrm": 3, "aer": 14}))
    found = {f.id: f for f in plan.findings}
    assert "xid-errors" in found and "pcie-aer-errors" in found
    assert "14 AER errors" in found["pcie-aer-errors"].message
    assert "kernel_log.aer" in str(found["stack-from-probe"].evidence)


@pytest.mark.parametrize(
    ("backend", "log"),
    [("gloo", {"xid": 2, "aer": 14}), ("nccl", {"xid": -1, "aer": "14"}), ("nccl", None)],
)
def test_a_cpu_run_or_a_count_that_is_not_one_is_not_read(backend: str, log: Any) -> None:
    found = {f.id for f in decide(_facts(), _verdict(backend, log)).findings}
    assert not found & {"xid-errors", "pcie-aer-errors"}
