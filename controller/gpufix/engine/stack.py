"""Whether a torch build runs on a driver and on the host's GPUs (CUDA Table 3, minor-version
compatibility, and each build's architecture list)."""

from __future__ import annotations

from dataclasses import dataclass

from gpufix import versions
from gpufix.engine.kb import KnowledgeBase
from gpufix.facts.host import Host


@dataclass(frozen=True)
class Stack:
    """Whether the installed torch wheel can run on this driver and these GPUs."""

    cuda: tuple[int, int] | None
    driver_ok: bool | None  # None: unknown driver or no CUDA wheel
    via_minor_compat: bool
    required_driver: str | None  # the floor that lets it run (minor compatibility first)
    toolkit_driver: str | None  # the toolkit's own minimum (Table 3): no compatibility caveats
    arch_problem: str | None  # "dropped" | "newer" | None


def required_driver(kb: KnowledgeBase, cuda: tuple[int, int]) -> tuple[str | None, str | None]:
    """(toolkit minimum, minor-version-compatibility floor) for a CUDA major.minor."""
    return kb.cuda_min_driver(f"{cuda[0]}.{cuda[1]}"), kb.cuda_minor_compat_floor(cuda[0])


def driver_runs_cuda(
    kb: KnowledgeBase, driver: str | None, cuda: tuple[int, int]
) -> tuple[bool | None, bool]:
    """(runs, only through minor-version compatibility); None when the driver is unreadable."""
    if driver is None or versions.driver(driver) is None:
        return None, False
    toolkit_min, floor = required_driver(kb, cuda)
    if toolkit_min and versions.at_least(driver, toolkit_min):
        return True, False
    if floor and versions.at_least(driver, floor):
        return True, True
    if toolkit_min is None and floor is None:
        return None, False
    return False, False


def arch_problem(
    kb: KnowledgeBase, caps: tuple[str, ...], cuda: tuple[int, int], torch: str | None = None
) -> str | None:
    """ "dropped" when a GPU is too old for the build, "newer" when too new, None when it fits.

    With a torch version whose build is recorded (torch_builds.yaml), its architecture list
    decides; otherwise the CUDA toolkit's own architecture range does.
    """
    build = kb.torch_build(torch, f"{cuda[0]}.{cuda[1]}") if torch else None
    if build is not None:
        return _build_problem(build.archs, [cc for cc in caps if build.runs_on(cc) is False])
    cu = versions.parse(f"{cuda[0]}.{cuda[1]}")
    for cc in caps:
        arch = kb.arch_for_cc(cc)
        if arch is None or cu is None:
            continue
        last = versions.parse(arch.last_cuda) if arch.last_cuda else None
        if last is not None and cu > last:
            return "dropped"
        first = versions.parse(kb.first_cuda_for_cc(cc))
        if first is not None and cu < first:
            return "newer"
    return None


def _build_problem(archs: tuple[str, ...], missing: list[str]) -> str | None:
    if not missing:
        return None
    oldest = min((versions.key(a) for a in archs), default=None)
    if oldest is not None and any(versions.key(cc) < oldest for cc in missing):
        return "dropped"
    return "newer"


def stack(host: Host, kb: KnowledgeBase) -> Stack:
    cuda = host.torch_cuda
    if cuda is None:
        return Stack(None, None, False, None, None, None)
    ok, compat = driver_runs_cuda(kb, host.driver, cuda)
    toolkit_min, floor = required_driver(kb, cuda)
    torch = host.env.torch if host.env else None
    return Stack(
        cuda,
        ok,
        compat,
        floor or toolkit_min,
        toolkit_min,
        arch_problem(kb, host.compute_caps, cuda, torch),
    )
