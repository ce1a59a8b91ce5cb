"""The plan: what the decision engine proposes for one host, and its JSON form (gpufix-plan v2).

A plan file is a request, not a program (docs/security.md): besides what the engine decided it
records what the engine was given (`inputs`: facts, probe verdict, constraints, interpreters),
so `apply` can run the engine again and refuse a file that says anything else.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpufix.errors import GpufixError, InvalidInput

FORMAT = "gpufix-plan"
FILE_FORMAT = FORMAT + "-file"
VERSION = 2


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
    # What the engine was given; set by gpufix.planning. {} only for plans made in tests.
    inputs: dict[str, Any] = field(default_factory=dict)
    # The interpreter the post-change probe runs with, and why that one.
    verify: dict[str, str] = field(default_factory=dict)

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


def _step(s: dict[str, Any]) -> Step:
    return Step(
        s["playbook"],
        s["description"],
        dict(s["vars"]),
        bool(s.get("reboot", False)),
        str(s.get("target", "host")),
    )


def _interim(d: dict[str, Any] | None) -> Interim | None:
    if not d:
        return None
    if d.get("reboot_required", False) is not False:
        raise InvalidInput("malformed plan: an interim mitigation never reboots")
    return Interim(
        d["strategy"],
        [_step(s) for s in d["steps"]],
        d["outcome"],
        bool(d.get("reboot_required", False)),
    )


def from_dict(d: dict[str, Any], where: str = "plan") -> Plan:
    """A plan from its JSON form, validated against schemas/plan.schema.json first."""
    from gpufix import inputs

    if not isinstance(d, dict) or d.get("format") != FORMAT:
        fmt = d.get("format") if isinstance(d, dict) else None
        raise InvalidInput(f"{where}: not a gpufix plan (format {inputs.one_line(repr(fmt))})")
    if d.get("version") != VERSION:
        raise InvalidInput(
            f"{where}: plan version {inputs.one_line(repr(d.get('version')))} is not supported "
            f"(want {VERSION}): re-plan with `gpufix plan`"
        )
    inputs.validate(d, "plan", where)
    return Plan(
        host=d["host"],
        strategy=d["strategy"],
        findings=[Finding(**f) for f in d["findings"]],
        options=[Option(**o) for o in d["options"]],
        steps=[_step(s) for s in d["steps"]],
        reboot_required=d["reboot_required"],
        outcome=d["outcome"],
        risks=list(d["risks"]),
        path=list(d["path"]),
        facts_digest=d["facts_digest"],
        kb_digest=d["kb_digest"],
        probe_verdict=d.get("probe_verdict"),
        extra=dict(d.get("extra") or {}),
        interim=_interim(d.get("interim")),
        inputs=dict(d.get("inputs") or {}),
        verify=dict(d.get("verify") or {}),
    )


def plan_file_doc(plans: list[Plan]) -> dict[str, Any]:
    return {"format": FILE_FORMAT, "version": VERSION, "plans": [p.to_dict() for p in plans]}


def save_plans(plans: list[Plan], path: Path) -> None:
    """Write atomically: a failed write leaves the previous plan file whole, and no temp file.
    Nothing is written that `load_plans` (and so apply) would refuse (a host name from the
    inventory that no plan host may have, say): the same checks run first."""
    from gpufix import inputs

    text = json.dumps(plan_file_doc(plans), indent=2, sort_keys=False) + "\n"
    where = f"plan file {inputs.one_line(str(path))} (not written)"
    doc = json.loads(text)
    inputs.validate(doc, "plan-file", where)
    for i, p in enumerate(doc["plans"]):
        from_dict(p, f"{where}: plans/{i}")
    write_atomic(path, text, what="plan file")


def write_atomic(path: Path, text: str, *, what: str, mode: int = 0o644) -> None:
    """Temp file in the same directory, fsync, rename; the temp file is removed on any error.
    Only a regular file is replaced: a device, FIFO, socket, directory or link at `path` is
    refused (run as root, `-o /dev/null` would otherwise replace the device node)."""
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        # the user named it (-o): input to fix, as a path that is a device is
        raise InvalidInput(f"cannot write {what} {path}: {directory} is not a directory")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise GpufixError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InvalidInput(
            f"refusing to write {what} {path}: it exists and is not a regular file "
            "(a device, FIFO, link or directory); name a new or regular file"
        )
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise GpufixError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def load_plans(path: Path) -> list[Plan]:
    """Read a plan file through the input layer; every failure is one line naming the field."""
    from gpufix import inputs

    where = f"plan file {inputs.one_line(str(path))}"
    doc = inputs.load_json(path, "plan")
    if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT:
        raise InvalidInput(f"{where} is not a gpufix plan file")
    if doc.get("version") != VERSION:
        raise InvalidInput(
            f"{where} has version {inputs.one_line(repr(doc.get('version')))}, this gpufix reads "
            f"version {VERSION}: re-plan with `gpufix plan`"
        )
    inputs.validate(doc, "plan-file", where)
    counts = Counter(str(p.get("host")) for p in doc["plans"])
    twice = sorted(h for h, n in counts.items() if n > 1)
    if twice:
        # before any plan is re-derived: thousands of copies of one plan cost minutes
        shown = inputs.one_line(", ".join(twice), 200)
        raise InvalidInput(f"{where} names host(s) more than once: {shown}")
    return [from_dict(p, f"{where}: plans/{i}") for i, p in enumerate(doc["plans"])]
