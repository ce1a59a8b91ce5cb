"""The decision table (knowledge/evidence_fixes.yaml) applied to one host: the first row whose
evidence the probe and the facts show, and whose conditions hold, decides the fix."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpufix.engine import overrides as nccl_overrides
from gpufix.engine.conditions import Subject, driver_issue, holds, nccl_issue, nccl_version
from gpufix.engine.context import Ctx
from gpufix.engine.held import in_force
from gpufix.engine.kb import DriverIssue
from gpufix.engine.kb_evidence import ISSUE_WORKAROUND, EvidenceFix, NcclIssue
from gpufix.engine.signals import JOB_ENV_WITHOUT, NCCL_ONLY, Signals
from gpufix.strategies.evidence import physical_interface


@dataclass(frozen=True)
class Decision:
    row: EvidenceFix
    evidence: str  # the key the row matched
    ifname: str | None  # for socket-ifname: the interface (or filter) the evidence names
    issue: NcclIssue | None  # the NCCL fixed issue behind an nccl-version-affected row
    needs: tuple[str, ...]  # what would still decide or complete the fix
    # the release-note driver problem behind a driver-known-issue row
    driver_issue: DriverIssue | None = None
    job_env: tuple[str, ...] = ()  # the job's settings (VAR=VALUE) a job-env-off row names
    culprit: str | None = None  # the one of them (VAR=VALUE) the failure needs
    decided: str = ""  # the experiment that decided (job-env-off, job-env-without-VAR, ...)
    assumed: str = ""  # what a condition took for a fact nobody read

    @property
    def fix(self) -> str:
        return self.row.fix

    @property
    def interim(self) -> tuple[str, ...]:
        """The row's interim profiles, with ISSUE_WORKAROUND read as the workaround of the NCCL
        issue behind the row (none when that issue names no workaround)."""
        out: list[str] = []
        for name in self.row.interim:
            if name != ISSUE_WORKAROUND:
                out.append(name)
            elif self.issue is not None and self.issue.workaround:
                out.append(self.issue.workaround)
        return tuple(dict.fromkeys(out))

    def line(self) -> str:
        why = f"{self.row.why} (assumed: {self.assumed})" if self.assumed else self.row.why
        if self.evidence == "experiment:job-env-off":
            return f"{self._job_phrase()}: {why} [{self.row.id}]"
        return f"{_phrase(self.evidence, self.ifname)}: {why} [{self.row.id}]"

    def _job_phrase(self) -> str:
        what = " ".join(self.job_env) or "the job's settings"
        if self.culprit is None:
            return f"probe healthy without {what} (experiment job-env-off)"
        var = self.culprit.partition("=")[0]
        if self.decided.startswith(JOB_ENV_WITHOUT):  # a --experiments list ran it alone
            runs = f"experiment {self.decided}"
        elif len(self.job_env) > 1:
            runs = f"experiments job-env-off, {JOB_ENV_WITHOUT}{var}"
        else:
            return f"probe healthy without {self.culprit} (experiment job-env-off)"
        return f"probe healthy without {self.culprit} alone, of the job's {what} ({runs})"


# What each contract experiment changes (the probe's vocabulary; docs/probe.md).
EXPERIMENT_ENV = MappingProxyType(
    {
        "p2p-off": "NCCL_P2P_DISABLE=1",
        "p2p-level-pxb": "NCCL_P2P_LEVEL=PXB",
        "shm-off": "NCCL_SHM_DISABLE=1",
        "cumem-off": "NCCL_CUMEM_ENABLE=0",
        "ib-off": "NCCL_IB_DISABLE=1",
        "proto-simple": "NCCL_PROTO=Simple",
        "algo-ring": "NCCL_ALGO=Ring",
        "nvls-off": "NCCL_NVLS_ENABLE=0",
        "gdr-off": "NCCL_NET_GDR_LEVEL=LOC",
        "mnnvl-off": "NCCL_MNNVL_ENABLE=0",
        "gpus": "a subset of the GPUs",
    }
)


def _phrase(evidence: str, ifname: str | None) -> str:
    if evidence == "stall:gloo":
        return "a gloo probe (no NCCL) not healthy"
    kind, _, what = evidence.partition(":")
    if kind == "experiment":
        env = f"NCCL_SOCKET_IFNAME={ifname}" if what == "ifname" else EXPERIMENT_ENV.get(what)
        return f"probe healthy with {env} (experiment {what})"
    return {
        "layer": f"the run failed in the {what} layer",
        "signature": f"error text: {what}",
        "override": f"NCCL setting left in place ({what})",
        "soak": "the soak (the all-reduce size sweep) hung or failed after the start-up collectives",
        "experiments": "knob experiments ran and none turned the run healthy",
        "stall": f"probe not healthy {_STALL_WHERE.get(what, what)} and nothing more specific",
    }.get(kind, evidence)


# Where a stall:* signal puts the failure (signals.Signals.stall): pg_init counts as collective,
# since NCCL builds its communicator at the first all-reduce.
_STALL_WHERE = {
    "collective": "where the GPUs talk to each other (a P2P copy, process-group set-up or a "
    "collective)",
    "init": "while CUDA started (cuda_init, alloc)",
    "import": "while the ranks imported torch",
}


def _known(ctx: Ctx, signals: Signals) -> Mapping[str, Callable[[], bool]]:
    h = ctx.host
    return MappingProxyType(
        {
            "gpu-probe": lambda: not signals.cpu_run,
            # GPU-pair runs change no NCCL mechanism: they are not the experiments that decide
            "experiments": lambda: (
                any(not e.startswith("gpus-") for e in signals.ran) and not signals.skipped
            ),
            "multinode-probe": lambda: signals.scope == "multi-node",
            "acs": lambda: h.acs_known,
            "iommu": lambda: h.iommu_mode not in (None, "unknown"),
            "gpus": lambda: bool(h.gpu_names) and all(h.gpu_names) and bool(h.compute_caps),
            "driver": lambda: h.driver is not None,
            "fabricmanager": lambda: (
                h.fabricmanager is not None and h.fabricmanager_running is not None
            ),
            "shm": lambda: h.shm_bytes is not None or h.ipc_host is True,
            "container-runtime": lambda: (
                h.docker_read or h.kube_node is True or bool(h.in_container or h.pod)
            ),
            "nccl-version": lambda: nccl_version(ctx) is not None,
            "python-env": lambda: bool(h.env and h.env.torch) and h.glibc is not None,
            "interfaces": lambda: physical_interface(h) is not None,
            "soak": lambda: False,
            "ib-fabric": lambda: False,
            "gpu-diagnostics": lambda: False,
            "image": lambda: bool(ctx.c.container_image),
            "workload": lambda: False,
        }
    )


def _needs(ctx: Ctx, signals: Signals, row: EvidenceFix) -> tuple[str, ...]:
    known = _known(ctx, signals)
    out = [n for n in row.needs if not known[n]()]
    if signals.skipped and not signals.decided_by:
        out.insert(0, "experiments")
    return tuple(dict.fromkeys(out))


def _ifname(ctx: Ctx, signals: Signals, evidence: str) -> str | None:
    if evidence == "experiment:ifname":
        return signals.ifname
    if evidence == "override:ifname-filter":
        return nccl_overrides.read(ctx.host, ctx.kb).ifname_filter
    if evidence == "override:ifname-absent":
        return nccl_overrides.read(ctx.host, ctx.kb).ifname_absent
    return physical_interface(ctx.host)


def evidence_keys(ctx: Ctx, signals: Signals) -> frozenset[str]:
    keys = set(signals.evidence())
    if signals.unhealthy:
        keys |= set(nccl_overrides.read(ctx.host, ctx.kb).evidence())
        if signals.phase not in (None, *BOOTSTRAP_PHASES):
            # NCCL with no socket interface stops in its bootstrap: a run past it had one
            keys.discard("override:ifname-absent")
    return frozenset(keys)


# Phases in which NCCL's bootstrap (its socket interface) is set up.
BOOTSTRAP_PHASES = ("rendezvous", "pg_init")


# The probe experiment that tries what an NCCL profile sets (docs/probe.md, "Experiments").
PROFILE_EXPERIMENT = MappingProxyType(
    {
        "no-p2p": "p2p-off",
        "p2p-level-pxb": "p2p-level-pxb",
        "shm-off": "shm-off",
        "cumem-off": "cumem-off",
        "ib-off": "ib-off",
        "proto-simple": "proto-simple",
        "algo-ring": "algo-ring",
        "nvls-off": "nvls-off",
        "gdr-off": "gdr-off",
        "mnnvl-off": "mnnvl-off",
    }
)
assert set(PROFILE_EXPERIMENT.values()) == NCCL_ONLY == set(EXPERIMENT_ENV) - {"gpus"}


def tried_in_vain(row: EvidenceFix, signals: Signals, ifname: str | None) -> str | None:
    """The experiment that already tried what this row would set (its profiles or its interim,
    such as P2P off beside an ACS fix, which rests on P2P) and still hung or failed; None when
    there is none. Such a row does not fire: the probe showed that change does not help here."""
    tried = set(signals.tried)
    for profile in (*row.profiles, *row.interim):
        exp = PROFILE_EXPERIMENT.get(profile)
        if exp in tried:
            return exp
        if profile == "socket-ifname" and ifname and f"ifname-{ifname}" in tried:
            return f"ifname-{ifname}"
    return None


def _held_in_vain(ctx: Ctx, row: EvidenceFix) -> bool:
    """A fix of another kind that rests on a mechanism (its interim turns it off: P2P off
    beside an ACS fix) when the failing run already had that mechanism off and still hung, as
    an experiment that tried it would show (held.in_force)."""
    return row.fix != "nccl-profile" and any(
        in_force(ctx, [p], row.evidence) is not None for p in row.interim
    )


# The facts that decide a condition, as needs (needs.py). A row passed over because one of them
# is unknown asks for it, rather than a later row's answer standing as if the facts had ruled
# the row out (issue 12, item 7: unknown is not evidence).
CONDITION_NEEDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "gpus-without-p2p": ("gpus",),
        "acs-or-iommu-on": ("acs", "iommu"),
        "acs-iommu-off": ("acs", "iommu"),
        "driver-known-issue": ("driver",),
        "driver-branch-unsupported": ("driver",),
        "driver-new-feature-branch": ("driver",),
        "driver-before-cuda-11.3": ("driver",),
        "nvswitch": ("gpus",),
        "nvlink-peers": ("gpus",),
        "fabricmanager-not-ok": ("fabricmanager",),
        "container-shm-default": ("shm",),
        "nccl-version-affected": ("nccl-version",),
    }
)


def _unknown_for(
    row: EvidenceFix, subject: Subject, known: Mapping[str, Callable[[], bool]]
) -> list[str]:
    """The unknown facts that kept this row from firing; none when a condition is false on
    known facts (the row is ruled out) or holds."""
    out: list[str] = []
    for name in row.when:
        if holds(name, subject):
            continue
        if name == "container-shm-default" and not holds("in-container", subject):
            return []  # not a container: no /dev/shm size would make the row fire
        unknown = [n for n in CONDITION_NEEDS.get(name, ()) if not known[n]()]
        if not unknown:
            return []
        out += unknown
    return out


def passed_over(ctx: Ctx, signals: Signals, chosen: Decision | None) -> tuple[str, ...]:
    """Needs of the rows before the chosen one (all rows, when none was) that the evidence
    matched and an unknown fact kept from firing."""
    keys, known, out = evidence_keys(ctx, signals), _known(ctx, signals), []
    for row in ctx.kb.evidence_fixes:
        if chosen is not None and row is chosen.row:
            break
        if row.evidence in keys:
            out += _unknown_for(row, Subject(ctx, signals, row.evidence), known)
    return tuple(dict.fromkeys(out))


def choose(ctx: Ctx, signals: Signals) -> Decision | None:
    """The first matching row, or None when the probe shows nothing the table maps."""
    keys = evidence_keys(ctx, signals)
    for row in ctx.kb.evidence_fixes:
        if row.evidence not in keys:
            continue
        subject = Subject(ctx, signals, row.evidence)
        if not all(holds(name, subject) for name in row.when):
            continue
        issue = nccl_issue(subject) if "nccl-version-affected" in row.when else None
        ifname = _ifname(ctx, signals, row.evidence) if "socket-ifname" in row.profiles else None
        if tried_in_vain(row, signals, ifname) or _held_in_vain(ctx, row):
            continue
        drv = driver_issue(subject) if "driver-known-issue" in row.when else None
        return Decision(
            row,
            row.evidence,
            ifname,
            issue,
            _needs(ctx, signals, row),
            drv,
            signals.job_env,
            signals.job_env_culprit,
            signals.decided_by or "",
            _assumed(ctx, row),
        )
    return None


def _assumed(ctx: Ctx, row: EvidenceFix) -> str:
    """A row that fired on a default standing in for an unread fact says so."""
    unread_shm = ctx.host.shm_bytes is None and not ctx.has("shm-too-small")
    if "container-shm-default" in row.when and unread_shm:
        return (
            "/dev/shm not read, taken to be the 64 MB a container gets unless --shm-size, "
            "--ipc=host or a memory volume raises it"
        )
    return ""
