"""Compare two hosts' facts, the differences that matter for multi-GPU start-up first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufix.facts.snapshot import is_unknown

# Most decisive first: the field notes' environment comparison, ordered by the dependency chain.
PRIORITY = (
    "os",
    "kernel.running",
    "driver",
    "gpus",
    "python_envs",
    "topology",
    "p2p",
    "pcie",
    "iommu",
    "shm",
    "nccl",
    "fabricmanager",
    "containers",
    "cuda_toolkits",
    "glibc",
    "secure_boot",
    "dkms",
    "packages",
    "unattended_upgrades",
    "env",
)
IGNORED = ("module_version", "gpu_processes", "kernel_log", "python")


@dataclass(frozen=True)
class Difference:
    path: str
    a: Any
    b: Any
    rank: int


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if is_unknown(obj):
        return {prefix: f"unknown ({obj['unknown']})"}
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, list):
        if all(isinstance(x, dict) for x in obj) and obj:
            out = {}
            for i, x in enumerate(obj):
                key = str(x.get("index", x.get("python", x.get("path", i))))
                out.update(flatten(x, f"{prefix}[{key}]"))
            return out
        return {prefix: obj}
    return {prefix: obj}


def _rank(path: str) -> int:
    for i, p in enumerate(PRIORITY):
        if path == p or path.startswith((p + ".", p + "[")):
            return i
    return len(PRIORITY)


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Difference]:
    fa = {k: v for k, v in flatten(a).items() if not k.startswith(IGNORED)}
    fb = {k: v for k, v in flatten(b).items() if not k.startswith(IGNORED)}
    out = [
        Difference(p, fa.get(p), fb.get(p), _rank(p))
        for p in sorted(set(fa) | set(fb))
        if fa.get(p) != fb.get(p)
    ]
    return sorted(out, key=lambda d: (d.rank, d.path))
