"""The catalogue of findings and thresholds (rules.yaml), each with its source.

Thresholds have one home here: `load().thresholds["shm_min_bytes"]` (or shm_floor_bytes()) is
the /dev/shm floor the engine and preflight both use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from gpufix.errors import GpufixError

_PATH = Path(__file__).with_name("rules.yaml")
_SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class FindingType:
    """One kind of finding the engine can raise: its severity, title and source."""

    id: str
    severity: str
    title: str
    source: str


@dataclass(frozen=True)
class Rules:
    findings: dict[str, FindingType]
    thresholds: dict[str, int]

    def rule(self, rule_id: str) -> FindingType:
        return self.findings[rule_id]


@lru_cache(maxsize=4)
def load(path: Path = _PATH) -> Rules:
    doc = yaml.safe_load(path.read_text())
    findings: dict[str, FindingType] = {}
    for row in doc.get("findings", []):
        if not row.get("source"):
            raise GpufixError(f"{path.name}: finding {row.get('id')!r} has no source")
        if row.get("severity") not in _SEVERITIES:
            raise GpufixError(f"{path.name}: finding {row.get('id')!r} has a bad severity")
        findings[row["id"]] = FindingType(row["id"], row["severity"], row["title"], row["source"])
    thresholds: dict[str, int] = {}
    for row in doc.get("thresholds", []):
        if not row.get("source"):
            raise GpufixError(f"{path.name}: threshold {row.get('id')!r} has no source")
        thresholds[row["id"]] = int(row["value"])
    return Rules(findings=findings, thresholds=thresholds)


def shm_floor_bytes() -> int:
    """The /dev/shm size below which multi-GPU NCCL jobs are refused (NGC: --shm-size=1g)."""
    return load().thresholds["shm_min_bytes"]
