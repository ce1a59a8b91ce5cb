"""The plan: what the decision engine proposes for one host, and its JSON form (gpufix-plan v1)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpufix.errors import InvalidInput

FORMAT = "gpufix-plan"
VERSION = 1


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # error | warning | info
    message: str
    evidence: dict[str, Any]  # fact path -> value
    source: str


@dataclass(frozen=True)
class Option:
    strategy: str
    feasible: bool
    reason: str
    rank: int  # lower is preferred; only meaningful among feasible options


@dataclass(frozen=True)
class Step:
    playbook: str
    description: str
    vars: dict[str, Any]
    reboot: bool = False
    # Where the step runs: "host" (the planned host) or "container-host" (the facts came from a
    # container; the step belongs on the machine that runs it). Filled by the engine.
    target: str = "host"


@dataclass(frozen=True)
class Interim:
    """A no-reboot mitigation to run now (`gpufix apply PLANFILE --interim`), beside the plan's
    permanent fix for the next window."""

    strategy: str
    steps: list[Step]
    outcome: str
    reboot_required: bool = False


@dataclass(frozen=True)
class Plan:
    host: str
    strategy: str
    findings: list[Finding]
    options: list[Option]
    steps: list[Step]
    reboot_required: bool
    outcome: str
    risks: list[str]
    path: list[str]  # the decision path, one line per question answered
    facts_digest: str
    kb_digest: str
    probe_verdict: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    interim: Interim | None = None

    @property
    def changes(self) -> bool:
        return self.strategy != "none" and bool(self.steps)

    def alternatives(self) -> list[str]:
        return [
            o.strategy
            for o in sorted(self.options, key=lambda o: o.rank)
            if o.feasible and o.strategy != self.strategy
        ]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {"format": FORMAT, "version": VERSION, **d}


def digest(obj: Any) -> str:
    """Stable sha256 of a JSON-able object (sorted keys), used to detect stale plans."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def from_dict(d: dict[str, Any]) -> Plan:
    if d.get("format") != FORMAT:
        raise InvalidInput(f"not a gpufix plan (format {d.get('format')!r})")
    if d.get("version") != VERSION:
        raise InvalidInput(f"plan version {d.get('version')!r} is not supported (want {VERSION})")
    try:
        return Plan(
            host=d["host"],
            strategy=d["strategy"],
            findings=[Finding(**f) for f in d["findings"]],
            options=[Option(**o) for o in d["options"]],
            steps=[Step(**s) for s in d["steps"]],
            reboot_required=d["reboot_required"],
            outcome=d["outcome"],
            risks=list(d["risks"]),
            path=list(d["path"]),
            facts_digest=d["facts_digest"],
            kb_digest=d["kb_digest"],
            probe_verdict=d.get("probe_verdict"),
            extra=d.get("extra") or {},
            interim=_interim(d.get("interim")),
        )
    except (KeyError, TypeError) as exc:
        raise InvalidInput(f"malformed plan: {exc}") from None


def _interim(d: object) -> Interim | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise InvalidInput(f"malformed plan: interim must be an object, got {type(d).__name__}")
    if d.get("reboot_required") is not False:
        raise InvalidInput("malformed plan: an interim mitigation never reboots")
    return Interim(
        strategy=str(d["strategy"]),
        steps=[Step(**s) for s in d["steps"]],
        outcome=str(d["outcome"]),
        reboot_required=False,
    )


def save_plans(plans: list[Plan], path: Path) -> None:
    doc = {"format": FORMAT + "-file", "version": VERSION, "plans": [p.to_dict() for p in plans]}
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")


def load_plans(path: Path) -> list[Plan]:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise InvalidInput(f"cannot read plan file {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"plan file {path} is not JSON: {exc.msg} at line {exc.lineno}"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT + "-file":
        raise InvalidInput(f"{path} is not a gpufix plan file")
    if doc.get("version") != VERSION:
        raise InvalidInput(f"plan file {path} has version {doc.get('version')!r}, want {VERSION}")
    return [from_dict(p) for p in doc.get("plans", [])]
