"""The fact conditions the decision table's rows name (`when`), one small function each.

A condition is True only when the facts show it: a fact nobody could read makes it False, and
the row's `needs` say what to gather.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpufix import versions
from gpufix.engine.context import Ctx
from gpufix.engine.diagnose import (
    acs_bridges_that_matter,
    known_driver_issues,
    no_p2p,
    p2p_refusal_honoured,
)
from gpufix.engine.held import in_force
from gpufix.engine.kb import DriverIssue
from gpufix.engine.kb_evidence import CONDITIONS, NcclIssue
from gpufix.engine.nccl_installed import issues_of, nccl_version_of
from gpufix.engine.signals import Signals


@dataclass(frozen=True)
class Subject:
    """What a condition may look at: the engine's context, the probe's signals, and the evidence
    key the row is being matched on."""

    ctx: Ctx
    signals: Signals
    evidence: str


def nccl_version(ctx: Ctx) -> str | None:
    return nccl_version_of(ctx.host, ctx.kb)


def nccl_issue(s: Subject) -> NcclIssue | None:
    """A documented NCCL problem in the host's NCCL that shows the way this evidence does (and
    hangs or fails as the run did, where the notes say which); of several, the one fixed last,
    so that the release it asks for fixes them all."""
    version = nccl_version(s.ctx)
    if version is None:
        return None
    found = [
        issue
        for issue in issues_of(s.ctx.host, s.ctx.kb, version, s.signals.scope == "multi-node")
        if s.evidence in issue.shows and issue.kind in (None, s.signals.kind)
    ]
    return max(found, key=lambda i: versions.key(i.fixed_in), default=None)


def driver_issue(s: Subject) -> DriverIssue | None:
    """A release-note problem of the installed driver, on this platform, that shows the way this
    evidence does (driver_issues.yaml)."""
    for issue in known_driver_issues(s.ctx.host, s.ctx.kb):
        if s.evidence in issue.shows:
            return issue
    return None


def _p2p_offered(s: Subject) -> bool:
    """NCCL may try P2P: the driver's refusal is not honoured, and the failing run did not have
    P2P turned off already (an administrator's NCCL config, the job's settings)."""
    h, kb = s.ctx.host, s.ctx.kb
    return not p2p_refusal_honoured(h, kb) and in_force(s.ctx, ["no-p2p"], s.evidence) is None


def _acs_or_iommu_on(s: Subject) -> bool:
    h = s.ctx.host
    return not no_p2p(h, s.ctx.kb) and (
        bool(acs_bridges_that_matter(h)) or h.iommu_mode == "translated"
    )


def _acs_iommu_off(s: Subject) -> bool:
    h = s.ctx.host
    return h.acs_known and not acs_bridges_that_matter(h) and h.iommu_mode in ("off", "pt")


def _fabricmanager_not_ok(s: Subject) -> bool:
    ctx = s.ctx
    missing = ctx.has("fabricmanager-missing") or ctx.has("fabricmanager-version-mismatch")
    return missing or (ctx.host.nvswitch and ctx.host.fabricmanager_running is False)


def _in_container(s: Subject) -> bool:
    h = s.ctx.host
    return bool(h.in_container or h.from_container)


def _host_shm_fine(s: Subject) -> bool:
    """Facts gathered on a host (not in a container) whose own /dev/shm is big enough."""
    h = s.ctx.host
    if h.gathered_in != "host" or _in_container(s) or h.shm_bytes is None:
        return False
    return h.shm_bytes >= s.ctx.rules.thresholds["shm_min_bytes"]


def _docker_host_shm_fine(s: Subject) -> bool:
    """A host that runs Docker and whose own /dev/shm is big enough: /dev/shm that ran out there
    was a container's (Docker gives each 64 MB unless told)."""
    return bool(s.ctx.host.docker) and _host_shm_fine(s)


def _kube_node_shm_fine(s: Subject) -> bool:
    """A Kubernetes node (the kubelet's directory or binary) whose own /dev/shm is big enough:
    /dev/shm that ran out was a pod's (the runtime gives each 64 MiB unless its spec mounts
    more), whatever runs its containers."""
    return s.ctx.host.kube_node is True and _host_shm_fine(s)


def _host_shm_fine_runtime_unread(s: Subject) -> bool:
    """A host whose own /dev/shm is big enough, with Docker's state not read (a hand-written
    snapshot) and not known to be a Kubernetes node: /dev/shm that ran out was most likely a
    container's or a pod's. Docker read as absent is not this: a bare host without containers
    looks the same, and facts module 1.6.0 reads the kubelet."""
    h = s.ctx.host
    return not h.docker_read and h.kube_node is not True and _host_shm_fine(s)


def _container_shm_default(s: Subject) -> bool:
    """A container whose /dev/shm nobody measured or sized: Docker's default is 64 MB."""
    h = s.ctx.host
    if not _in_container(s) or h.ipc_host is True:
        return False
    return h.shm_bytes is None or s.ctx.has("shm-too-small")


def _new_feature_branch(s: Subject) -> bool:
    """A branch NVIDIA ships for new features only, never supported for production use."""
    row = s.ctx.kb.driver_branch(s.ctx.host.driver) if s.ctx.host.driver else None
    return row is not None and row.kind == "new-feature"


def _driver_before_cuda_11_3(s: Subject) -> bool:
    """The driver supports only CUDA before 11.3 (below Table 3's minimum for 11.3): NCCL refuses
    graph capture under such a driver (src/misc/strongstream.cc, driver version < 11030)."""
    floor = s.ctx.kb.cuda_min_driver("11.3")
    return floor is not None and versions.at_least(s.ctx.host.driver, floor) is False


# Probe phases where the GPUs move data: a direct P2P copy (before the process group starts),
# and the collectives after it formed (gpufix_probe.py PHASES).
DATA_PHASES = ("p2p_copy", "barrier", "allreduce", "soak")


def _nvlink_peers(s: Subject) -> bool:
    """Every GPU pair is on NVLink or NVSwitch, as the topology facts read, or, unread, an
    NVSwitch board by its GPU models (engine/gpu_names.py); otherwise not true."""
    h = s.ctx.host
    return h.multi_gpu and (h.nvswitch or h.nvlink_min is not None)


def _stack_unread_untried(s: Subject) -> bool:
    """No one-knob experiment ran (GPU pairs change no mechanism) and neither the job's NCCL nor
    its torch is known: nothing says whether a newer NCCL would be a move at all. A torch whose
    NCCL the knowledge base does not map (1.x, a source build) still says which way a move goes."""
    env = s.ctx.host.env
    torch = env.torch if env is not None else None
    return not s.signals.knob_ran and nccl_version(s.ctx) is None and not torch


CHECKS: Mapping[str, Callable[[Subject], bool]] = MappingProxyType(
    {
        "gpus-without-p2p": lambda s: no_p2p(s.ctx.host, s.ctx.kb),
        # The driver refuses P2P (nvidia-smi topo -p2p r) and the job's NCCL goes by that in
        # every process (2.19.1 on: diagnose.p2p_refusal_honoured), or not.
        "p2p-offered": _p2p_offered,
        "p2p-refused": lambda s: p2p_refusal_honoured(s.ctx.host, s.ctx.kb),
        "p2p-off-held": lambda s: in_force(s.ctx, ["no-p2p"], s.evidence) is not None,
        # the watchdog's timeout is all the error says: no rank reported a failure of its own
        "rank-elsewhere": lambda s: (
            bool(s.signals.elsewhere) and set(s.signals.signatures) <= {"collective-timeout"}
        ),
        "acs-or-iommu-on": _acs_or_iommu_on,
        "acs-iommu-off": _acs_iommu_off,
        "driver-known-issue": lambda s: driver_issue(s) is not None,
        "driver-branch-unsupported": lambda s: s.ctx.has("driver-branch-unsupported"),
        "driver-new-feature-branch": _new_feature_branch,
        "driver-before-cuda-11.3": _driver_before_cuda_11_3,
        "nvswitch": lambda s: s.ctx.host.nvswitch,
        "fabricmanager-not-ok": _fabricmanager_not_ok,
        "driver-mismatch-read": lambda s: s.ctx.host.driver_mismatch is True,
        "in-container": _in_container,
        "container-shm-default": _container_shm_default,
        "docker-host-shm-fine": _docker_host_shm_fine,
        "host-shm-fine-runtime-unread": _host_shm_fine_runtime_unread,
        "kube-node-shm-fine": _kube_node_shm_fine,
        "multi-node": lambda s: s.signals.scope == "multi-node",
        "single-host": lambda s: s.signals.scope == "host",
        "nvlink-peers": _nvlink_peers,
        "past-bootstrap": lambda s: s.signals.phase in DATA_PHASES,
        "nccl-version-affected": lambda s: nccl_issue(s) is not None,
        "stack-unread-untried": _stack_unread_untried,
    }
)
assert set(CHECKS) == set(CONDITIONS), "every condition the table may name has a check"


def holds(name: str, s: Subject) -> bool:
    return bool(CHECKS[name](s))
