"""container-fix: /dev/shm, host IPC and host networking for training containers."""

from __future__ import annotations

from typing import Any

from gpufix.engine.context import Candidate, Ctx, on_container_host
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import SHM_CAUSES, across_hosts

PLAYBOOK = "container_fix.yml"


def _outcome(ctx: Ctx, shm_gib: int | None, image: str | None) -> str:
    """What the operator gets, and what is left to them. dockerd applies default-shm-size on a
    reload (SIGHUP; moby daemon/reload_unix.go, reloadPlatform) as well as at start; containers
    created before keep their /dev/shm. Only the gpufix-run wrapper (installed with an image)
    adds --ipc=host and --network host: Docker has no daemon-wide default for either."""
    parts = []
    if shm_gib:
        parts.append(
            f"daemon.json sets default-shm-size to {shm_gib}g and the role reloads dockerd "
            "(SIGHUP, no container stops), so containers created after it get it; running "
            "containers keep their /dev/shm until they are recreated. Only where dockerd cannot "
            "reload does the role restart it, with your consent "
            "(gpufix_container_runtime_restart_allowed) and after checking that no container is "
            "running"
        )
    if image:
        parts.append(f"gpufix-run starts {image} with --ipc=host (no 64 MiB /dev/shm)")
    elif shm_gib:
        parts.append(
            "no gpufix-run wrapper is installed without --image REF@sha256:DIGEST: start training "
            f"containers with --ipc=host (or --shm-size={shm_gib}g) yourself"
        )
    if _network(ctx):
        if image:
            parts.append("multi-node runs need --network host (gpufix-run adds it)")
        elif shm_gib:
            parts.append("multi-node runs need --network host on the docker run line")
        else:
            parts.append(
                "multi-node runs need --network host; Docker has no daemon setting for it, so "
                "the fix is the gpufix-run wrapper, which needs the training image: plan again "
                "with --image REF@sha256:DIGEST, or add --network host to your docker run line "
                "yourself. Nothing is applied until then"
            )
    return "; ".join(parts)


def _network(ctx: Ctx) -> bool:
    """Host networking is the fix: facts show a private network, or the multi-node probe failed
    in the container-network layer."""
    d = ctx.decision
    return ctx.has("container-private-network") or (
        d is not None and d.evidence == "layer:container-network"
    )


def _shm(ctx: Ctx) -> bool:
    d = ctx.decision
    by_table = d is not None and d.fix == "container-fix" and not d.evidence.startswith("layer:")
    return ctx.has("shm-too-small") or ctx.cause(*SHM_CAUSES) or by_table


def _pod(shm_gib: int | None, network: bool, node: bool = False) -> Candidate:
    """A Kubernetes pod's /dev/shm and network come from its spec, not from dockerd's defaults
    (the kubelet sets them; a containerd node has no daemon.json): the plan says what to change
    there, and no step touches the node. Kubernetes, Volumes, emptyDir ("medium: Memory" is a
    tmpfs; https://kubernetes.io/docs/concepts/storage/volumes/#emptydir); PodSpec hostIPC and
    hostNetwork (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/)."""
    what = []
    if shm_gib:
        what.append(
            "an emptyDir volume with medium: Memory (sizeLimit at least "
            f"{shm_gib}Gi) mounted at /dev/shm, or hostIPC: true"
        )
    if network:
        what.append("hostNetwork: true for NCCL across nodes")
    change = "; and ".join(what)
    return Candidate(
        "container-fix",
        True,
        f"in the pod's spec: {change}",
        [],
        (
            "this host is a Kubernetes node, whose pods' /dev/shm and network their spec sets: "
            if node
            else "the facts come from a Kubernetes pod, whose /dev/shm and network its spec sets: "
        )
        + f"{change}; gpufix changes nothing on the node for it (dockerd's default-shm-size does "
        "not reach pods), so apply has no step to run",
        ["the fix is the pod spec's: re-create the pod with it and probe again"],
    )


def _runtime_unread(shm_gib: int) -> Candidate:
    """The evidence says a container's /dev/shm ran out, and the facts (from the host) say
    neither that Docker runs there nor that they come from a pod: the fix is Docker's default or
    the pod's spec, and which one waits for the runtime (need `container-runtime`)."""
    return Candidate(
        "container-fix",
        True,
        "the training containers' /dev/shm, by what starts them",
        [],
        f"Docker: daemon.json's default-shm-size ({shm_gib}g), which a plan made after "
        "`gpufix facts` reads Docker here sets; a Kubernetes pod: an emptyDir volume with "
        f"medium: Memory (sizeLimit at least {shm_gib}Gi) at /dev/shm, or hostIPC: true, in its "
        "spec. Nothing is applied until the facts say which",
        missing=["container-runtime"],
    )


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    d = ctx.decision
    shm_min_gib = max(1, ctx.rules.thresholds["shm_min_bytes"] >> 30)
    if d is not None and "host-shm-fine-runtime-unread" in d.row.when:
        return _runtime_unread(shm_min_gib)
    if d is not None and "kube-node-shm-fine" in d.row.when:
        return _pod(shm_min_gib, False, node=True)
    in_containers = bool(h.in_container or h.docker)
    if not in_containers and h.in_container is None and h.docker is None:
        return Candidate(
            "container-fix", False, "whether training runs in containers is not in the facts"
        )
    if not in_containers:
        return Candidate("container-fix", False, "training does not run in containers here")
    if not _shm(ctx) and not _network(ctx):
        unread = [
            w for w, v in (("/dev/shm", h.shm_bytes), ("its network", h.net_host)) if v is None
        ]
        said = f" ({' and '.join(unread)} not read)" if unread else ""
        return Candidate(
            "container-fix",
            False,
            f"no evidence against the container's /dev/shm or network{said}",
        )
    shm = _shm(ctx)
    shm_gib = max(1, ctx.rules.thresholds["shm_min_bytes"] >> 30) if shm else None
    if h.pod:
        # a pod's own network is the rule, not evidence: host networking only across nodes
        return _pod(shm_gib, _network(ctx) and across_hosts(ctx))
    image = ctx.c.container_image
    vars_: dict[str, Any] = {}
    what: list[str] = []
    missing: list[str] = []
    if shm_gib:
        vars_["gpufix_container_runtime_default_shm_size"] = f"{shm_gib}g"
        what.append(
            f"Docker's default /dev/shm raised to {shm_gib} GiB (daemon.json default-shm-size)"
        )
    if image:
        vars_["gpufix_container_runtime_image"] = image
        vars_["gpufix_container_runtime_ipc_host"] = True
        what.append(f"a gpufix-run wrapper for {image} with --ipc=host")
    if _network(ctx) and image:
        vars_["gpufix_container_runtime_multi_node"] = True
        what.append("--network host in the wrapper for multi-node NCCL")
    elif _network(ctx) and not shm:
        # Host networking is the whole fix, and only the wrapper can give it: the plan names
        # it and waits for the image rather than changing something that does not matter.
        vars_["gpufix_container_runtime_multi_node"] = True
        what.append("a gpufix-run wrapper with --network host for multi-node NCCL (needs --image)")
        missing.append("image")
    step = Step(PLAYBOOK, "; ".join(what), vars_)
    outcome = _outcome(ctx, shm_gib, image)
    cand = Candidate("container-fix", True, "; ".join(what), [step], outcome, missing=missing)
    return on_container_host(ctx, cand)


STRATEGY = Strategy(
    name="container-fix",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/docker/daemon.json", "/usr/local/bin/gpufix-run"),
    disk_need_mib=(0, 64),
    reboot_after_restore=False,
)
