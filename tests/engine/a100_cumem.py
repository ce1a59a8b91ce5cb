"""The recorded jammy 4x P100 host with A100 GPUs, and a verdict that cuMem off made healthy:
shared by the cuMem NCCL-issue tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"


def a100_host(torch: str) -> dict[str, Any]:
    f = copy.deepcopy(json.loads((HOSTS / "jammy-4xp100-torch28.json").read_text())["facts"])
    for gpu in f["gpus"]:
        gpu.update(name="NVIDIA A100-SXM4-80GB", compute_capability="8.0")
    f["python_envs"][0]["packages"]["torch"] = torch
    return f


def cumem_off_decided() -> dict[str, Any]:
    exps = [
        {"id": i, "env": {}, "gpus": None, "verdict": r, "stalled": None, "error": None,
         "elapsed_s": 1.0}
        for i, r in (("p2p-off", "hung"), ("shm-off", "hung"), ("cumem-off", "healthy"))
    ]  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
            "stalled": {"phase": "allreduce", "ranks": [0, 1]}, "experiments": exps,
            "decided_by": "cumem-off"}  # fmt: skip
