"""Knowledge tables that map evidence to fixes: error signatures, the decision table, NCCL's fixed
issues, the NCCL settings read as evidence, and the NCCL each torch wheel bundles.

Row classes and their table specs; kb.py loads them with the other tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

from packaging.specifiers import SpecifierSet

from gpufix import versions
from gpufix.engine import kbcheck as c


def _plan_strategies() -> tuple[str, ...]:
    """The plan contract's strategy names, from schemas/plan.schema.json (one home: the schema;
    tests/test_apply_request.py checks it against the registry)."""
    text = resources.files("gpufix").joinpath("schemas", "plan.schema.json").read_text("utf-8")
    return tuple(json.loads(text)["$defs"]["strategy"]["enum"])


STRATEGIES = _plan_strategies()
EXPERIMENTS = (
    "p2p-off",
    "p2p-level-pxb",
    "shm-off",
    "cumem-off",
    "ib-off",
    "proto-simple",
    "algo-ring",
    "nvls-off",
    "gdr-off",
    "mnnvl-off",
    "job-env-off",
    "ifname",
    "gpus",
)
LAYERS = ("rendezvous", "bootstrap", "interface", "ib", "container-network", "collective")
EVIDENCE = re.compile(
    r"experiment:(?P<experiment>[a-z0-9-]+)|layer:(?P<layer>[a-z-]+)"
    r"|signature:(?P<signature>[a-z0-9-]+)|override:(?P<override>tuning|ifname-filter|ifname-absent)"
    r"|soak:stalled|experiments:none-decided|stall:(?:collective|init|import|gloo)"
)
# Fact conditions a row may ask for (engine/conditions.py defines each one).
CONDITIONS = (
    "gpus-without-p2p",
    "p2p-offered",
    "p2p-refused",
    "p2p-off-held",
    "rank-elsewhere",
    "acs-or-iommu-on",
    "acs-iommu-off",
    "driver-known-issue",
    "driver-branch-unsupported",
    "driver-new-feature-branch",
    "driver-before-cuda-11.3",
    "driver-mismatch-read",
    "nvswitch",
    "fabricmanager-not-ok",
    "in-container",
    "container-shm-default",
    "docker-host-shm-fine",
    "host-shm-fine-runtime-unread",
    "kube-node-shm-fine",
    "multi-node",
    "single-host",
    "past-bootstrap",
    "nvlink-peers",
    "nccl-version-affected",
    "stack-unread-untried",
)
# What a plan can ask the operator to gather or run (engine/needs.py words each one).
NEEDS = (
    "probe",
    "gpu-probe",
    "experiments",
    "multinode-probe",
    "soak",
    "acs",
    "iommu",
    "gpus",
    "driver",
    "driver-apt",
    "fabricmanager",
    "shm",
    "nccl-version",
    "python-env",
    "interfaces",
    "interface-choice",
    "ib-fabric",
    "image",
    "gpu-diagnostics",
    "workload",
    "container-runtime",
)
KNOB_KINDS = ("tuning", "transport", "interface")
# In a row's interim: the workaround of the NCCL issue behind the row (nccl-version-affected).
ISSUE_WORKAROUND = "issue-workaround"
# What an NCCL issue does, as its notes say (NcclIssue.kind): the job hangs, or it fails.
ISSUE_KINDS = ("hang", "error")
# Where an NCCL issue happens (NcclIssue.setup): a job across hosts, IB/RoCE devices in the facts.
SETUPS = ("multi-node", "infiniband")


@dataclass(frozen=True)
class ErrorSignature:
    id: str
    match: tuple[str, ...]  # case-insensitive substrings
    meaning: str
    source: str
    note: str | None = None

    def found_in(self, text: str) -> bool:
        low = text.lower()
        return any(m.lower() in low for m in self.match)


@dataclass(frozen=True)
class EvidenceFix:
    """One row of the decision table."""

    id: str
    evidence: str
    fix: str
    why: str
    source: str
    when: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    interim: tuple[str, ...] = ()
    direction: str | None = None
    needs: tuple[str, ...] = ()
    note: str | None = None


@dataclass(frozen=True)
class NcclIssue:
    id: str
    affected: str
    fixed_in: str
    symptom: str
    shows: tuple[str, ...]
    source: str
    archs: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()  # only on hosts with all of these (SETUPS); empty: everywhere
    workaround: str | None = None  # the nccl_profiles.yaml profile that avoids it
    note: str | None = None
    kind: str | None = None  # hang | error, as the notes describe it; None: either or unsaid

    def matches(self, nccl: object) -> bool | None:
        v = versions.parse(nccl)
        if v is None:
            return None
        return SpecifierSet(self.affected).contains(v, prereleases=True)


@dataclass(frozen=True)
class NcclKnob:
    name: str
    kind: str
    source: str
    note: str | None = None
    # the value that leaves the mechanism on, where NCCL documents one (transport knobs: "0");
    # the probe after a fix puts it in the environment over an "off" in nccl.conf
    default: str | None = None


@dataclass(frozen=True)
class TorchNccl:
    """The NCCL a torch wheel pins (nvidia-nccl-cuXX in its METADATA): PyPI's default wheel, or
    with `variant` a CUDA build on download.pytorch.org whose pin differs from the default's."""

    torch: str
    cuda: str
    nccl: str
    package: str
    source: str
    variant: bool = False
    note: str | None = None


def _evidence(v: object) -> str:
    s = c.text(v)
    m = EVIDENCE.fullmatch(s)
    if not m:
        raise c.RowError(f"unknown evidence {s!r}")
    if m.group("experiment") and m.group("experiment") not in EXPERIMENTS:
        raise c.RowError(f"unknown experiment in {s!r}")
    if m.group("layer") and m.group("layer") not in LAYERS:
        raise c.RowError(f"unknown layer in {s!r}")
    return s


def evidence_list(v: object) -> tuple[str, ...]:
    """A list of evidence keys in the decision table's vocabulary."""
    return tuple(_evidence(x) for x in c.listof(c.text)(v))


TABLES: Mapping[str, c.Table] = MappingProxyType(
    {
        "error_signatures": c.table(
            ErrorSignature, "id", (), id=c.text, match=c.listof(c.text), meaning=c.text
        ),
        "evidence_fixes": c.table(
            EvidenceFix,
            "id",
            ("when", "profiles", "interim", "direction", "needs"),
            id=c.text,
            evidence=_evidence,
            when=c.listof(c.choice(CONDITIONS)),
            fix=c.choice(STRATEGIES),
            profiles=c.listof(c.text),
            interim=c.listof(c.text),
            direction=c.optional(c.choice(("up", "down"))),
            needs=c.listof(c.choice(NEEDS)),
            why=c.text,
        ),
        "nccl_issues": c.table(
            NcclIssue,
            "id",
            ("archs", "setup", "workaround", "kind"),
            id=c.text,
            affected=c.spec,
            fixed_in=c.version,
            symptom=c.text,
            shows=evidence_list,
            archs=c.listof(c.text),
            setup=c.listof(c.choice(SETUPS)),
            workaround=c.optional(c.text),
            kind=c.optional(c.choice(ISSUE_KINDS)),
        ),
        "nccl_knobs": c.table(
            NcclKnob,
            "name",
            ("default",),
            name=c.text,
            kind=c.choice(KNOB_KINDS),
            default=c.optional(c.text),
        ),
        "torch_nccl": c.table(
            TorchNccl,
            "",
            ("variant",),
            torch=c.version,
            cuda=c.version,
            nccl=c.version,
            package=c.text,
            variant=c.boolean,
        ),
    }
)


def cross_check(rows: Mapping[str, tuple[Any, ...]]) -> str | None:
    """A reference between these tables (or to nccl_profiles / gpu_archs) that does not resolve."""
    signatures = {s.id for s in rows["error_signatures"]}
    profiles = {p.name for p in rows["nccl_profiles"]}
    archs = {a.name for a in rows["gpu_archs"]}
    for i, row in enumerate(rows["evidence_fixes"], start=1):
        where = f"knowledge/evidence_fixes.yaml row {i} ({row.id})"
        m = EVIDENCE.fullmatch(row.evidence)
        if m and m.group("signature") and m.group("signature") not in signatures:
            return f"{where}: unknown signature in {row.evidence!r}"
        interim = [p for p in row.interim if p != ISSUE_WORKAROUND]
        bad = [p for p in (*row.profiles, *interim) if p not in profiles]
        if bad:
            return f"{where}: profile {bad[0]!r} is not in nccl_profiles.yaml"
        if ISSUE_WORKAROUND in row.interim and "nccl-version-affected" not in row.when:
            return f"{where}: {ISSUE_WORKAROUND} needs an NCCL issue (when: nccl-version-affected)"
        if row.fix == "nccl-profile" and not row.profiles:
            return f"{where}: an nccl-profile fix names its profiles"
    for i, issue in enumerate(rows["nccl_issues"], start=1):
        where = f"knowledge/nccl_issues.yaml row {i} ({issue.id})"
        bad = [a for a in issue.archs if a not in archs]
        if bad:
            return f"{where}: unknown architecture {bad[0]!r}"
        if issue.workaround is not None and issue.workaround not in profiles:
            return f"{where}: workaround {issue.workaround!r} is not in nccl_profiles.yaml"
        if issue.matches(issue.fixed_in) is not False:
            return f"{where}: fixed_in {issue.fixed_in} lies inside affected {issue.affected!r}"
    return _torch_nccl_problem(rows["torch_nccl"])


def _torch_nccl_problem(rows: tuple[TorchNccl, ...]) -> str | None:
    """One default-wheel row per release, and a variant only beside it, for another CUDA: the
    lookup falls back to the default wheel and must not find two answers."""
    defaults = {versions.key(r.torch): r.cuda for r in rows if not r.variant}
    seen: set[tuple[Any, str, bool]] = set()
    for i, r in enumerate(rows, start=1):
        where = f"knowledge/torch_nccl.yaml row {i} ({r.torch}, CUDA {r.cuda})"
        k = (versions.key(r.torch), r.cuda if r.variant else "", r.variant)
        if k in seen:
            return f"{where}: a second row for the same wheel"
        seen.add(k)
        if r.variant and defaults.get(k[0]) in (None, r.cuda):
            return f"{where}: a variant needs the default wheel's row, for another CUDA"
    return None
