"""container-fallback: Docker + the NVIDIA container toolkit and an image pinned by digest."""

from __future__ import annotations

from gpufix import versions
from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.plan import Step
from gpufix.engine.stack import arch_problem
from gpufix.strategies.base import Strategy

PLAYBOOK = "container_fallback.yml"


def evaluate(ctx: Ctx) -> Candidate:
    h, kb = ctx.host, ctx.kb
    if not ctx.c.containers_allowed:
        return Candidate("container-fallback", False, "containers not allowed")
    if h.gpu_count == 0:
        return Candidate("container-fallback", False, "no GPU")
    if h.from_container:
        return Candidate(
            "container-fallback", False, "the facts come from inside a container already"
        )
    if h.driver is None:
        return Candidate(
            "container-fallback", False, "driver unknown: cannot pick an image it can run"
        )
    fits = [
        img
        for img in kb.container_images
        if versions.at_least(h.driver, img.min_driver)
        and not arch_problem(kb, h.compute_caps, versions.major_minor(img.cuda) or (0, 0))
    ]
    if not fits:
        return Candidate("container-fallback", False, f"no known image runs on driver {h.driver}")
    img = max(fits, key=lambda i: versions.key(i.cuda))
    ref = ctx.c.container_image
    if ref is None and img.digest:
        ref = f"{img.ref}@{img.digest}"
    if ref is None:
        return Candidate(
            "container-fallback",
            False,
            f"{img.ref} fits driver {h.driver} but its digest is not recorded: "
            "pass --image REF@sha256:DIGEST to pin one",
        )
    step = Step(
        PLAYBOOK,
        f"install Docker (or keep the host's docker.io) and the NVIDIA container toolkit, pin {ref}, "
        "install gpufix-run",
        {
            "gpufix_container_runtime_image": ref,
            "gpufix_container_runtime_ipc_host": True,
        },
    )
    outcome = (
        f"training runs in {img.ref} (torch {img.torch}, CUDA {img.cuda}) with --ipc=host; the host "
        "kernel and driver are unchanged, and accelerate still reads the host kernel"
    )
    return Candidate(
        "container-fallback", True, f"{img.ref} runs on driver {h.driver}", [step], outcome
    )


STRATEGY = Strategy(
    name="container-fallback",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/docker/daemon.json", "/usr/local/bin/gpufix-run"),
    disk_need_mib=(0, 12288),
    reboot_after_restore=False,
)
