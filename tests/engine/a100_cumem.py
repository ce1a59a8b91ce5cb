"""The recorded jammy 4x P100 host with A100 GPUs, and a verdict that cuMem off made healthy:
shared by the cuMem NCCL-issue tests."""

from __future__ import annotations

from typing import Any

from recorded import recorded


def a100_host(torch: str) -> dict[str, Any]:
    return recorded("jammy-4xp100-torch28", torch, "NVIDIA A100-SXM4-80GB", "8.0")


def cumem_off_decided() -> dict[str, Any]:
    exps = [
        {"id": i, "env": {}, "gpus": None, "verdict": r, "stalled": None, "error": None,
         "elapsed_s": 1.0}
        for i, r in (("p2p-off", "hung"), ("shm-off", "hung"), ("cumem-off", "healthy"))
    ]  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
            "stalled": {"phase": "allreduce", "ranks": [0, 1]}, "experiments": exps,
            "decided_by": "cumem-off"}  # fmt: skip
