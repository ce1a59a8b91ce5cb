"""container-fix: /dev/shm, host IPC and host networking for training containers."""

from __future__ import annotations

from typing import Any

from gpufix.engine.context import Candidate, Ctx, on_container_host
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import SHM_CAUSES

PLAYBOOK = "container_fix.yml"


def _outcome(ctx: Ctx, shm_gib: int, image: str | None) -> str:
    """What the operator gets, and what is left to them: dockerd reads default-shm-size only
    when it starts, and only the gpufix-run wrapper (installed with an image) adds --ipc=host."""
    parts = [
        f"daemon.json sets default-shm-size to {shm_gib}g, which dockerd reads only when it starts: "
        "restart Docker once its running containers are drained (systemctl restart docker) for "
        "new containers to get it"
    ]
    if image:
        parts.append(f"gpufix-run starts {image} with --ipc=host (no 64 MiB /dev/shm)")
    else:
        parts.append(
            "no gpufix-run wrapper is installed without --image REF@sha256:DIGEST: start training "
            f"containers with --ipc=host (or --shm-size={shm_gib}g) yourself"
        )
    if ctx.has("container-private-network"):
        parts.append(
            "multi-node runs need --network host"
            + (" (gpufix-run adds it)" if image else " on the docker run line")
        )
    return "; ".join(parts)


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    in_containers = bool(h.in_container or h.docker)
    shm = ctx.has("shm-too-small") or ctx.cause(*SHM_CAUSES)
    if not in_containers:
        return Candidate("container-fix", False, "training does not run in containers here")
    if not shm and not ctx.has("container-private-network"):
        return Candidate("container-fix", False, "container /dev/shm and network look fine")
    shm_gib = max(1, ctx.rules.thresholds["shm_min_bytes"] >> 30)
    image = ctx.c.container_image
    vars_: dict[str, Any] = {"gpufix_container_runtime_default_shm_size": f"{shm_gib}g"}
    what = [f"Docker's default /dev/shm raised to {shm_gib} GiB (daemon.json default-shm-size)"]
    if image:
        vars_["gpufix_container_runtime_image"] = image
        vars_["gpufix_container_runtime_ipc_host"] = True
        what.append(f"a gpufix-run wrapper for {image} with --ipc=host")
    if ctx.has("container-private-network") and image:
        vars_["gpufix_container_runtime_multi_node"] = True
        what.append("--network host in the wrapper for multi-node NCCL")
    step = Step(PLAYBOOK, "; ".join(what), vars_)
    cand = Candidate("container-fix", True, "; ".join(what), [step], _outcome(ctx, shm_gib, image))
    return on_container_host(ctx, cand)


STRATEGY = Strategy(
    name="container-fix",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/docker/daemon.json", "/usr/local/bin/gpufix-run"),
    disk_need_mib=(0, 64),
    reboot_after_restore=False,
)
