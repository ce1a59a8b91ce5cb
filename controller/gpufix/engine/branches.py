"""Driver branch choice: a branch NVIDIA supports on the plan date, that drives every GPU in the
host, with the kernel modules those GPUs need, from a repository the host's release has.

Sources: NVIDIA "Supported Drivers and CUDA Toolkit Versions" (support windows), "CUDA Toolkit,
Driver, and Architecture Matrix" (first/last branch per architecture), the open kernel modules
(Turing and later; Blackwell only with them); which archive carries a branch is
ubuntu_driver_packages.yaml. A branch whose support ends within ENDS_SOON_DAYS of the plan date
gives way to one that fits as well and lasts longer, and the plan names its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from gpufix import versions
from gpufix.engine.kb import DriverBranch, DriverIssue, KnowledgeBase

# A branch whose support ends within this many days of the plan date is named in the plan's
# risks, and a branch that fits as well and is supported past that window is preferred to it:
# about six months, time to plan and roll out the next move (R595, NVIDIA's production branch,
# ends March 2027: a plan made in December 2026 says so).
ENDS_SOON_DAYS = 183


def ends_soon(row: DriverBranch, day: date) -> bool:
    """NVIDIA still supports the branch on `day`, and stops within ENDS_SOON_DAYS of it."""
    left = row.days_left(day)
    return row.supported_on(day) and left is not None and left <= ENDS_SOON_DAYS


def ends_soon_risk(row: DriverBranch, day: date) -> str | None:
    """The plan's line for a branch whose support ends soon; None when it does not (a branch
    already past its support has its own line)."""
    end = row.end_of_support()
    if end is None or not ends_soon(row, day):
        return None
    kind = {"lts": "long-term support", "production": "production"}.get(row.kind, row.kind)
    return (
        f"NVIDIA's support for R{row.branch} ({kind} branch) ends {end.isoformat()}, "
        f"{(end - day).days} days after the plan date {day.isoformat()}: plan the move to a "
        f"branch supported longer before then. Source: {row.source}"
    )


@dataclass(frozen=True)
class GpuNeeds:
    """What the host's GPUs ask of a driver branch."""

    first: int | None  # lowest branch that drives every GPU
    last: int | None  # highest branch that drives every GPU (None: no end yet)
    open: bool  # some GPU needs the open kernel modules (Blackwell)
    proprietary: bool  # some GPU needs the proprietary modules (before Turing)
    archs: tuple[str, ...]

    def conflict(self) -> str | None:
        if self.open and self.proprietary:
            return "the GPUs need both the open and the proprietary kernel modules"
        if self.first and self.last and self.first > self.last:
            return f"no branch drives every GPU (needs >= R{self.first} and <= R{self.last})"
        return None


# Grace Hopper (GH200) shares compute capability 9.0 with H100, so the architecture table cannot
# tell it apart: NVIDIA supports only the open kernel modules on it ("For cutting-edge platforms
# such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the open-source GPU kernel
# modules", https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/,
# the source gpu_archs.yaml cites for Blackwell). nvidia-smi names it "NVIDIA GH200 480GB".
_OPEN_ONLY_PLATFORMS = (("GH200", "Grace Hopper"),)


def _open_only_platform(names: tuple[str, ...]) -> str | None:
    for name in names:
        for marker, platform in _OPEN_ONLY_PLATFORMS:
            if marker.lower() in name.lower():
                return platform
    return None


def gpu_needs(kb: KnowledgeBase, caps: tuple[str, ...], names: tuple[str, ...] = ()) -> GpuNeeds:
    """What the GPUs ask of a branch; `names` (nvidia-smi's product names) tell platforms that
    share a compute capability apart (GH200 needs the open modules, H100 does not)."""
    firsts: list[int] = []
    lasts: list[int] = []
    open_, prop, archs = False, False, []
    for cc in caps:
        arch = kb.arch_for_cc(cc)
        if arch is None:
            continue
        archs.append(arch.name)
        first = kb.first_driver_branch(arch)
        if first:
            firsts.append(first)
        if arch.last_driver_branch:
            lasts.append(arch.last_driver_branch)
        open_ |= arch.kernel_modules == "open"
        prop |= arch.kernel_modules == "proprietary"
    platform = _open_only_platform(names)
    if platform:
        open_ = True
        archs.append(platform)
    return GpuNeeds(
        max(firsts, default=None),
        min(lasts, default=None),
        open_,
        prop,
        tuple(dict.fromkeys(archs)),
    )


def cannot_drive(
    kb: KnowledgeBase,
    driver: str | None,
    flavor: str | None,
    caps: tuple[str, ...],
    names: tuple[str, ...] = (),
) -> str | None:
    """Why the installed driver cannot drive these GPUs; None when it can or nothing is known."""
    branch = versions.driver_branch(driver)
    if branch is None:
        return None
    needs = gpu_needs(kb, caps, names)
    archs = "/".join(needs.archs) or "these GPUs"
    if needs.first and branch < needs.first:
        return f"R{branch} predates {archs} (needs >= R{needs.first})"
    if needs.last and branch > needs.last:
        return f"R{branch} no longer drives {archs} (the last branch for it is R{needs.last})"
    if needs.open and flavor == "proprietary":
        return f"{archs} needs NVIDIA's open kernel modules; the loaded module is proprietary"
    return None


@dataclass(frozen=True)
class Choice:
    branch: int
    origin: str | None  # ubuntu | nvidia: the repository; None when the release is unknown
    flavour: str  # the driver role's gpufix_driver_flavour: "", server, open, server-open
    row: DriverBranch
    other_os: bool = False  # not Debian-family: no apt package name applies

    @property
    def open(self) -> bool:
        return self.flavour.endswith("open")

    def describe(self) -> str:
        repo = {
            "ubuntu": "the Ubuntu archive",
            "nvidia": "NVIDIA's CUDA repository",
        }.get(self.origin or "", "the host's configured repositories (release unknown)")
        kind = {"lts": "long-term support", "production": "production"}.get(self.row.kind, "")
        if self.other_os:
            modules = " with the open kernel modules" if self.open else ""
            return (
                f"R{self.branch} ({kind} branch, supported to {self.row.eol}){modules}, from the "
                "NVIDIA packages for this OS"
            )
        pkg = f"nvidia-driver-{self.branch}" + (f"-{self.flavour}" if self.flavour else "")
        if self.origin == "nvidia":
            pkg = f"cuda-drivers-{self.branch}" + (" (open modules)" if self.open else "")
        return f"R{self.branch} ({kind} branch, supported to {self.row.eol}), {pkg} from {repo}"


@dataclass(frozen=True)
class Wanted:
    day: date
    codename: str | None
    caps: tuple[str, ...]
    min_driver: str | None = None  # the branch must reach this version
    avoid: DriverIssue | None = None  # a known bad range to leave
    prefer: tuple[int, ...] = ()  # branches a sourced report names as good
    names: tuple[str, ...] = ()  # the GPUs' product names (GH200 vs H100)
    other_os: bool = False  # the host is not Debian-family (engine/os_family.py)


def choose(kb: KnowledgeBase, want: Wanted) -> Choice | str:
    """The branch to move to, or one line saying why none fits."""
    needs = gpu_needs(kb, want.caps, want.names)
    if needs.conflict():
        return str(needs.conflict())
    need_min = versions.driver_branch(want.min_driver) or 0
    supported = [b for b in kb.driver_branches if b.supported_on(want.day)]
    if not supported:
        return f"no driver branch in the knowledge base is supported on {want.day.isoformat()}"
    fits = [b for b in supported if _fits(b, want, needs, need_min)]
    if not fits:
        names = ", ".join(f"R{b.branch}" for b in supported)
        return (
            f"no supported branch ({names} on {want.day.isoformat()}) drives "
            f"{'/'.join(needs.archs) or 'these GPUs'}"
            + (f" at >= {want.min_driver}" if want.min_driver else "")
            + _last_that_fits(kb, want, needs, need_min)
        )
    if not want.codename:
        # No release in the facts: NVIDIA's support and the GPUs decide; the role resolves the
        # package from the host's own sources before it changes anything.
        flavour = "open" if needs.open else ""
        best = min(fits, key=lambda b: _rank(Choice(b.branch, None, flavour, b), want))
        return Choice(best.branch, None, flavour, best, want.other_os)
    choices = [c for b in fits for c in _sources(kb, want.codename, b, needs.open)]
    if not choices:
        return (
            f"{', '.join(f'R{b.branch}' for b in fits)} fit, but neither the Ubuntu archive nor "
            f"NVIDIA's repository lists them for {want.codename or 'this release'}"
        )
    return min(choices, key=lambda c: _rank(c, want))


def _fits(b: DriverBranch, want: Wanted, needs: GpuNeeds, need_min: int) -> bool:
    return (
        b.branch >= max(need_min, needs.first or 0)
        and (needs.last is None or b.branch <= needs.last)
        and (b.open_modules or not needs.open)
        and not _affected(want.avoid, b.branch)
    )


def _last_that_fits(kb: KnowledgeBase, want: Wanted, needs: GpuNeeds, need_min: int) -> str:
    """The newest ended branch that drives these GPUs: what staying would mean."""
    ended = [
        b
        for b in kb.driver_branches
        if (end := b.end_of_support()) and end < want.day and _fits(b, want, needs, 0)
    ]
    if not ended:
        return ""
    last = max(ended, key=lambda b: b.branch)
    if last.branch >= need_min:
        return f"; R{last.branch}, the newest that would, left support in {last.eol}"
    return f"; R{last.branch}, the newest that drives them, left support in {last.eol} and is below {want.min_driver}"


def _affected(issue: DriverIssue | None, branch: int) -> bool:
    return bool(issue and issue.matches(f"{branch}.0"))


def _sources(
    kb: KnowledgeBase, codename: str | None, row: DriverBranch, open_: bool
) -> list[Choice]:
    out = []
    for pk in kb.ubuntu_driver_packages(codename) if codename else ():
        if row.branch not in pk.branches:
            continue
        if pk.origin == "ubuntu":
            base = "server" if row.branch in pk.server_branches else ""
            flavour = "-".join(x for x in (base, "open" if open_ else "") if x)
        else:
            flavour = "open" if open_ else ""
        out.append(Choice(row.branch, pk.origin, flavour, row))
    return out


def _rank(c: Choice, want: Wanted) -> tuple[int, int, int, int, int]:
    """A branch a report names first, then the release's own archive (the role's default and
    Canonical's signed modules), then one supported past ENDS_SOON_DAYS before one whose support
    ends sooner, then LTS before production, then the smallest move."""
    return (
        0 if c.branch in want.prefer else 1,
        0 if c.origin == "ubuntu" else 1,
        1 if ends_soon(c.row, want.day) else 0,
        0 if c.row.kind == "lts" else 1,
        c.branch,
    )
