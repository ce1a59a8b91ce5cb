"""container-fix: /dev/shm, host IPC and host networking for training containers."""

from __future__ import annotations

from typing import Any

from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import (
    SHM_CAUSES,
)

PLAYBOOK = "container_fix.yml"


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    in_containers = bool(h.in_container or h.docker)
    shm = ctx.has("shm-too-small") or ctx.cause(*SHM_CAUSES)
    if not in_containers:
        return Candidate("container-fix", False, "training does not run in containers here")
    if not shm and not ctx.has("container-private-network"):
        return Candidate("container-fix", False, "container /dev/shm and network look fine")
    shm_gib = max(1, ctx.rules.thresholds["shm_min_bytes"] >> 30)
    vars_: dict[str, Any] = {
        "gpufix_container_runtime_ipc_host": True,
        "gpufix_container_runtime_default_shm_size": f"{shm_gib}g",
    }
    if ctx.c.container_image:
        vars_["gpufix_container_runtime_image"] = ctx.c.container_image
    what = [
        f"Docker's default /dev/shm raised to {shm_gib} GiB (daemon.json default-shm-size)",
        "--ipc=host in the gpufix-run wrapper"
        + ("" if ctx.c.container_image else " (with --image)"),
    ]
    if ctx.has("container-private-network"):
        vars_["gpufix_container_runtime_multi_node"] = True
        what.append("--network host for multi-node NCCL")
    step = Step(PLAYBOOK, "; ".join(what), vars_)
    note = ""
    if h.in_container:
        note = " (gpufix ran inside the container: apply the wrapper on its host)"
    return Candidate(
        "container-fix",
        True,
        "; ".join(what) + note,
        [step],
        "the next container start gets host IPC (no 64 MiB /dev/shm) and the network NCCL needs",
    )


STRATEGY = Strategy(
    name="container-fix",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/docker/daemon.json", "/usr/local/bin/gpufix-run"),
    disk_need_mib=(0, 64),
    reboot_after_restore=False,
)
