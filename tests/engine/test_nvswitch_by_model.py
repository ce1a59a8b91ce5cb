"""With `nvidia-smi topo -m` unread, eight SXM GPUs of a model NVIDIA ships on NVSwitch 8-GPU
baseboards (HGX A100, H100, H200, H800, B200, B300: gpu_models.yaml nvswitch_board) are an
NVSwitch board: fabric manager is checked there as on a host whose topology shows it. An outside
review (2026-12-07) wrote 8x "H100 80GB HBM3" with fabric manager 535 stopped beside driver 550
and no topology: no fabric-manager finding, and the plan moved the driver to another branch."""

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
HOST = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "a100-fm-mismatch.json"


def facts(name: str = "NVIDIA A100-SXM4-80GB", count: int = 8) -> dict[str, Any]:
    f: dict[str, Any] = copy.deepcopy(json.loads(HOST.read_text())["facts"])
    f["topology"] = {"unknown": "not stated"}
    f["gpus"] = [{**f["gpus"][0], "index": i, "name": name} for i in range(count)]
    return f


def findings(f: dict[str, Any]) -> set[str]:
    return {x.id for x in decide(f, None).findings}


@pytest.mark.parametrize(
    "name",
    ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200"],
)
def test_eight_sxm_parts_of_a_board_model_are_an_nvswitch_board(name: str) -> None:
    assert "fabricmanager-version-mismatch" in findings(facts(name))


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("NVIDIA A100 80GB PCIe", 8),  # PCIe cards: no NVSwitch
        ("NVIDIA H100 NVL", 8),  # pairs joined by NVLink bridges
        ("NVIDIA H200 NVL", 8),
        ("NVIDIA H800 PCIe", 8),
        ("NVIDIA H800", 8),  # how nvidia-smi names the H800 SXM was not found: not assumed
        ("H100", 8),  # a bare H100: nvidia-smi marks the SXM part ("80GB HBM3")
        ("Tesla V100-SXM2-32GB", 8),  # DGX-1: a hybrid cube mesh, no NVSwitch
        ("A100", 8),  # a bare model: SXM or PCIe, nobody said
        ("NVIDIA A100-SXM4-80GB", 4),  # HGX A100 4-GPU: NVLink between the GPUs, no NVSwitch
    ],
)
def test_anything_else_waits_for_the_topology(name: str, count: int) -> None:
    assert "fabricmanager-version-mismatch" not in findings(facts(name, count))


def test_a_topology_that_was_read_still_decides() -> None:
    f = facts()
    f["topology"] = json.loads(HOST.read_text())["facts"]["topology"]
    assert "fabricmanager-version-mismatch" in findings(f)
    for row in f["topology"]["matrix"].values():  # every pair over PCIe: no NVSwitch
        for k in row:
            row[k] = "SYS"
    f["topology"]["worst"] = "SYS"
    assert "fabricmanager-version-mismatch" not in findings(f)
