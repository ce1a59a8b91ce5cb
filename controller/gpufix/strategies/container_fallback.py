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
    ref = ctx.c.container_image
    name = ref.split("@", 1)[0] if ref else None
    known = next((i for i in kb.container_images if i.ref == name), None) if name else None
    if ref is not None and known is None:
        # The operator's own image: nothing in the knowledge base to check it against. Not named
        # in the texts: a plan file's image is checked where it is pinned (the step).
        return _pinned(
            ref,
            "the image pinned with --image (not in gpufix's knowledge base: its torch, CUDA and "
            "NCCL are not checked against this host)",
            f"the image pinned with --image, unchecked: not in gpufix's knowledge base (driver "
            f"{h.driver})",
        )
    fits = [
        img
        for img in kb.container_images
        if versions.at_least(h.driver, img.min_driver)
        and not arch_problem(kb, h.compute_caps, versions.major_minor(img.cuda) or (0, 0))
    ]
    if not fits:
        return Candidate("container-fallback", False, f"no known image runs on driver {h.driver}")
    way, torch = _direction(ctx)
    if way and torch:
        # The decision moves the stack one way (up to an NCCL with the fix): an image whose torch
        # goes the other way carries the problem along (expert review, 2026-12-06).
        fits = [i for i in fits if _goes(i.torch, torch, way)]
        if not fits:
            return Candidate(
                "container-fallback",
                False,
                f"no known image that runs on driver {h.driver} moves torch {way} from {torch}, "
                "as the evidence asks",
            )
    if known is not None and ref is not None:
        if known not in fits:
            return Candidate(
                "container-fallback",
                False,
                f"the image pinned with --image (torch {known.torch}, CUDA {known.cuda}, driver "
                f">= {known.min_driver}) does not run on driver {h.driver} or moves torch the "
                "other way: " + ", ".join(i.ref for i in fits) + " would",
            )
        return _pinned(
            ref,
            f"the image pinned with --image (torch {known.torch}, CUDA {known.cuda}, as recorded "
            "for its tag)",
            f"the image pinned with --image runs on driver {h.driver}",
        )
    img = max(fits, key=lambda i: versions.key(i.cuda))
    if not img.digest:
        return Candidate(
            "container-fallback",
            False,
            f"{img.ref} fits driver {h.driver} but its digest is not recorded: "
            "pass --image REF@sha256:DIGEST to pin one",
        )
    return _pinned(
        f"{img.ref}@{img.digest}",
        f"{img.ref} (torch {img.torch}, CUDA {img.cuda})",
        f"{img.ref} runs on driver {h.driver}",
    )


def _pinned(ref: str, what: str, why: str) -> Candidate:
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
        f"training runs in {what} with --ipc=host; the host "
        "kernel and driver are unchanged, and accelerate still reads the host kernel"
    )
    return Candidate("container-fallback", True, why, [step], outcome)


def _direction(ctx: Ctx) -> tuple[str | None, str | None]:
    """The way the decision moves the stack (cuda-downgrade's want), and the installed torch."""
    from gpufix.strategies.cuda_downgrade import want

    env = ctx.host.env
    return want(ctx).direction, (env.torch.split("+")[0] if env and env.torch else None)


def _goes(image_torch: str, torch: str, way: str) -> bool:
    there, here = versions.key(image_torch.split("+")[0]), versions.key(torch)
    return bool(there > here) if way == "up" else bool(there < here)


STRATEGY = Strategy(
    name="container-fallback",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/docker/daemon.json", "/usr/local/bin/gpufix-run"),
    disk_need_mib=(0, 12288),
    reboot_after_restore=False,
)
