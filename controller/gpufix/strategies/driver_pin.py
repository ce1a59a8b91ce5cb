"""driver-pin: one NVIDIA driver version (and fabric manager) installed, loaded and held."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gpufix import versions
from gpufix.engine import branches, os_family
from gpufix.engine.context import Candidate, Ctx, on_container_host, reboot_gate
from gpufix.engine.diagnose import known_driver_issues
from gpufix.engine.kb import DriverIssue
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy

PLAYBOOK = "driver_pin.yml"


@dataclass(frozen=True)
class DriverTarget:
    """What the driver role is asked for, and why."""

    vars: dict[str, Any]
    why: str
    reboot: bool = True
    moves: bool = True  # the installed driver version changes
    risks: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # need ids the vars still lack
    what: str | None = None  # the driver the outcome names, where the vars name none


def _keep(ctx: Ctx, version: str, why: str, reboot: bool) -> DriverTarget:
    """Keep (and hold) a version already on the host: mismatch or fabric manager."""
    vars_: dict[str, Any] = {
        "gpufix_driver_branch": str(version.split(".")[0]),
        "gpufix_driver_version": version,
    }
    if ctx.host.driver_packages_flavour is not None:
        # Keep the installed package flavour: another one would replace every driver package.
        vars_["gpufix_driver_flavour"] = ctx.host.driver_packages_flavour
    risks = []
    origin = ctx.host.driver_origin
    if origin in ("ubuntu", "nvidia"):
        # Resolve where it came from: the role's default (the Ubuntu archive) may not have it.
        vars_["gpufix_driver_source"] = origin
    elif origin == "ppa":
        risks.append(
            f"{version} came from the graphics-drivers PPA, which the driver role does not use "
            "(it pins the PPA away): the role refuses the exact version before changing anything"
        )
    row = ctx.kb.driver_branch(version)
    if row is not None and not row.supported_on(ctx.day):
        risks.append(f"R{row.branch} is past NVIDIA's support ({row.eol or row.kind}): plan a move")
    elif row is not None and (soon := branches.ends_soon_risk(row, ctx.day)):
        risks.append(soon)
    return DriverTarget(vars_, why, reboot=reboot, moves=reboot, risks=risks)


def _desktop_fm_risk(ctx: Ctx, vars_: dict[str, Any]) -> list[str]:
    """Canonical builds fabric manager beside the -server driver (its uploads follow the -server
    versions): on the desktop flavour a pocket can offer no fabric manager at the driver's
    version, and the driver role then refuses before it pins anything."""
    flavour = str(vars_.get("gpufix_driver_flavour", ctx.host.driver_packages_flavour or ""))
    if vars_.get("gpufix_driver_source", "ubuntu") != "ubuntu" or "server" in flavour:
        return []
    return [
        "the driver stays on the desktop flavour, and the Ubuntu archive builds fabric manager "
        "beside the -server driver: when the pocket offers no fabric manager at the desktop "
        "driver's version, the driver role refuses before changing anything; the -server "
        "flavour (it replaces every driver package) is the way out"
    ]


def _fabricmanager(ctx: Ctx, version: str | None) -> DriverTarget:
    """Fabric manager missing or at another version than the driver (Fabric Manager guide: the
    same version as the driver, or it refuses to start). Only the fabric manager package moves,
    without a reboot, when apt can still install the driver's exact version; otherwise (the
    Ubuntu archive keeps one version per package per pocket, so an older upload is gone) the
    driver and fabric manager move together to the source's newest version of the branch, with
    a reboot to load the new module."""
    h = ctx.host
    stopped = h.fabricmanager_running is False and not h.fabricmanager_known
    if version is None:
        # a stopped service whose version nobody gave is started as below, with no reboot
        return DriverTarget(
            {"gpufix_driver_fabricmanager": True},
            "fabric manager at exactly the driver's version, started and held",
            reboot=not stopped and h.driver_reinstallable is not True,
            moves=False,
            missing=["driver"],
        )
    installed = h.fabricmanager is not None and versions.parse(h.fabricmanager) == (
        versions.parse(version)
    )
    if installed or stopped:
        # already at the driver's exact version (or, its version left out of the facts, most
        # often so), only stopped: nothing to download, no reboot (Fabric Manager user guide,
        # "Starting Fabric Manager": systemctl enable --now); the role makes it the driver's
        # version where it is not
        why = (
            f"fabric manager {h.fabricmanager} is installed at the driver's version but not "
            "running: enable and start it, and hold both"
            if installed
            else "fabric manager is not running and the facts do not give its version: make it "
            f"the driver's {version} (apt changes nothing where it already is), enable and "
            "start it, and hold both"
        )
        kept = _keep(ctx, version, why, False)
        if h.driver_reinstallable is True or h.debian_family is False:
            return kept
        # the role pins the exact version, which it resolves from the apt indexes
        look = "" if installed else "see `dpkg -l '*fabricmanager*'`, "
        risk = (
            f"if no apt index still offers {version} (a superseded upload), the driver role "
            f"refuses before changing anything: then {look}start it by hand (systemctl enable "
            "--now nvidia-fabricmanager) and re-plan"
        )
        return replace(kept, risks=[*kept.risks, risk])
    if h.driver_reinstallable is True:
        kept = _keep(
            ctx,
            version,
            f"install fabric manager at exactly the driver's {version}, start it and hold both",
            False,
        )
        return replace(kept, risks=[*kept.risks, *_desktop_fm_risk(ctx, kept.vars)])
    branch = str(version.split(".")[0])
    # the apt reading would allow fabric manager alone, at the driver's version: a driver move
    # and a reboot are not chosen on its absence (issue 12, item 7)
    unread = ["driver-apt"] if h.driver_reinstallable is None else []
    gone = (
        f"the installed driver {version} is no longer in any apt index, so fabric manager cannot "
        "be installed at its version"
        if h.driver_reinstallable is False
        else f"the facts do not say whether apt still offers the installed driver {version} (the "
        "Ubuntu archive keeps one version per package per pocket)"
    )
    row = ctx.kb.driver_branch(version)
    if row is not None and not row.supported_on(ctx.day):
        # The driver moves anyway: to a branch NVIDIA still supports, not the ended one.
        moved = _move(
            ctx,
            replace(_wanted(ctx), min_driver=ctx.stack.toolkit_driver),
            f"{gone}, and R{branch} is past NVIDIA's support on {ctx.day.isoformat()}: move the "
            "driver and fabric manager together, reboot to load it, hold both",
        )
        if isinstance(moved, DriverTarget):
            vars_ = {**moved.vars, "gpufix_driver_fabricmanager": True}
            risks = [*moved.risks, *_desktop_fm_risk(ctx, vars_)]
            return replace(moved, vars=vars_, risks=risks, missing=[*moved.missing, *unread])
    kept = _keep(ctx, version, "", True)
    vars_ = {k: v for k, v in kept.vars.items() if k != "gpufix_driver_version"}
    why = (
        f"{gone}: move the driver and fabric manager together to the newest R{branch} the source "
        "offers, reboot to load it, and hold both"
    )
    risks = [*kept.risks, *_desktop_fm_risk(ctx, vars_)]
    return DriverTarget(vars_, why, reboot=True, moves=True, risks=risks, missing=unread)


def _wanted(ctx: Ctx) -> branches.Wanted:
    """What any branch must meet: supported on the plan date, drives every GPU, in the host's
    sources (inside a container os-release is the image's: the host's release is unknown)."""
    h = ctx.host
    return branches.Wanted(
        ctx.day,
        os_family.release(h, ctx.kb),
        h.compute_caps,
        names=h.gpu_names,
        other_os=h.debian_family is False and not h.from_container,
    )


def _release_unread(ctx: Ctx) -> str:
    h = ctx.host
    if h.from_container:
        return "the host's release is not visible from the container the facts came from"
    if h.codename:
        return f"the knowledge base lists no driver packages for the release {h.codename!r}"
    return "the host's release is not in the facts"


def _move(ctx: Ctx, want: branches.Wanted, why: str) -> DriverTarget | str:
    got = branches.choose(ctx.kb, want)
    if isinstance(got, str):
        return got
    vars_: dict[str, Any] = {"gpufix_driver_branch": str(got.branch)}
    risks = []
    if got.origin:
        vars_["gpufix_driver_source"] = got.origin
        rel = ctx.kb.ubuntu(ctx.host.codename) if ctx.host.codename else None
        if got.origin == "ubuntu" and rel and rel.past_standard_support(ctx.day):
            risks.append(
                f"{rel.codename} left Ubuntu's standard support after {rel.standard_support_end}: "
                f"Canonical's R{got.branch} uploads since then may reach only hosts with Ubuntu "
                "Pro (ESM); the driver role resolves the package first and refuses, changing "
                "nothing, when apt cannot install it"
            )
    elif ctx.host.from_container or ctx.host.debian_family is not False:
        # (another OS's host: os_family.risk says what happens; a container's image is not it)
        risks.append(
            f"{_release_unread(ctx)}: whether its repositories carry R{got.branch} is known only "
            "when the driver role resolves the package, before it changes anything"
        )
    vars_["gpufix_driver_flavour"] = got.flavour
    soon = branches.ends_soon_risk(got.row, ctx.day)
    if soon:
        # choose() passed it over for any branch that fits as well and lasts longer.
        risks.append(soon)
    return DriverTarget(vars_, f"{why}: {got.describe()}, and hold it", risks=risks)


def _from_table(ctx: Ctx) -> DriverTarget | None:
    """A fabric-manager repair or a mismatch reload the decision table asks for from the probe's
    error text, when the facts alone do not show it (a driver nobody read is a missing var)."""
    d = ctx.decision
    h = ctx.host
    if d is None or d.fix != "driver-pin":
        return None
    if d.row.id in ("text-driver-mismatch", "text-compat-mismatch-host"):
        if h.driver_userspace:
            return _keep(
                ctx,
                h.driver_userspace,
                f"load the installed {h.driver_userspace} (reboot) and hold it",
                True,
            )
        return DriverTarget(
            {}, "load the installed driver (reboot) and hold it", missing=["driver"]
        )
    if "fabricmanager" in d.row.needs or "fabricmanager-not-ok" in d.row.when:
        return _fabricmanager(ctx, h.driver)
    if h.driver is None and "driver" in d.row.needs:
        # The evidence names the driver layer (CUDA itself did not start); which branch to move
        # to depends on the one installed: the class stands, its version is a missing var.
        return DriverTarget(
            {}, "a supported driver branch that drives these GPUs, once the driver is read",
            missing=["driver"], what="a supported branch chosen once the driver is read",
        )  # fmt: skip
    return None


def _issue(ctx: Ctx) -> DriverIssue | None:
    """The release-note problem the decision table matched (platform and probe evidence), or,
    when the user forces driver-pin, the first one the driver and platform are in."""
    if ctx.decision is not None and ctx.decision.driver_issue is not None:
        return ctx.decision.driver_issue
    if ctx.c.strategy == "driver-pin":
        return next(iter(known_driver_issues(ctx.host, ctx.kb)), None)
    return None


def _leave_issue(ctx: Ctx, want: branches.Wanted, issue: DriverIssue) -> DriverTarget | str:
    """Move up to the fix: the newest version of the host's own branch when NVIDIA still
    supports it and it drives these GPUs, else a supported branch outside the affected range."""
    h = ctx.host
    cite = f"{issue.id}, fixed in {issue.fixed_in}: {issue.source}"
    branch = versions.driver_branch(h.driver)
    same = branches.choose(
        ctx.kb,
        replace(want, min_driver=ctx.stack.toolkit_driver, prefer=(branch,) if branch else ()),
    )
    if issue.fix == "upgrade" and isinstance(same, branches.Choice) and same.branch == branch:
        got = _move(
            ctx,
            replace(want, min_driver=ctx.stack.toolkit_driver, prefer=(same.branch,)),
            f"move {h.driver} up to the newest R{branch} the source offers, {issue.fixed_in} or "
            f"later ({cite})",
        )
        if isinstance(got, str):
            return got
        # The role refuses, before it changes anything, a source whose newest R{branch} is older.
        vars_ = {**got.vars, "gpufix_driver_min_version": issue.fixed_in}
        risk = (
            f"the fix is in {issue.fixed_in}: the driver role refuses, before it changes anything, "
            f"when the source's newest R{branch} is older (gpufix_driver_min_version)"
        )
        return replace(got, vars=vars_, risks=[*got.risks, risk])
    moved = replace(
        want, min_driver=ctx.stack.toolkit_driver, avoid=issue, prefer=issue.good_branches
    )
    row = ctx.kb.driver_branch(h.driver) if h.driver else None
    if row is not None and not row.supported_on(ctx.day):
        reason = f"R{branch} is past NVIDIA's support on {ctx.day.isoformat()}"
    elif issue.fix == "downgrade":
        reason = "the notes fix it on another branch"
    else:
        reason = f"R{branch} does not fit these GPUs or the host's sources"
    return _move(ctx, moved, f"leave {h.driver} ({cite}; {reason}, so another branch)")


def _target(ctx: Ctx) -> DriverTarget | str:
    """The role's variables and the reason, or why no driver change fits."""
    h = ctx.host
    if ctx.has("driver-library-mismatch") and h.driver_userspace:
        return _keep(
            ctx,
            h.driver_userspace,
            f"load the installed userspace {h.driver_userspace} (reboot) and hold it",
            True,
        )
    if ctx.has("fabricmanager-missing") or ctx.has("fabricmanager-version-mismatch"):
        # with the driver unread: the step, incomplete until the facts give its version
        return _fabricmanager(ctx, h.driver)
    table = _from_table(ctx)
    if table is not None:
        return table
    want = _wanted(ctx)
    issue = _issue(ctx)
    if issue is not None:
        return _leave_issue(ctx, want, issue)
    if ctx.has("driver-cannot-drive-gpus"):
        return _move(
            ctx,
            replace(want, min_driver=ctx.stack.toolkit_driver),
            f"{h.driver} cannot drive these GPUs",
        )
    if ctx.stack.driver_ok is False and ctx.stack.toolkit_driver:
        cuda = ".".join(map(str, ctx.stack.cuda or ()))
        return _move(
            ctx,
            replace(want, min_driver=ctx.stack.toolkit_driver),
            f"raise the driver so torch's CUDA {cuda} runs natively",
        )
    if ctx.has("driver-branch-unsupported"):
        return _move(ctx, want, f"leave {h.driver}, past NVIDIA's support")
    return "no driver evidence"


def _rollback_risk(ctx: Ctx) -> str | None:
    h = ctx.host
    if h.debian_family is False:
        return None  # no apt there: os_family.risk says the roles stop in preflight
    if h.driver is None:
        return (
            "the installed driver is not in the facts: whether a rollback can reinstall it is "
            "not known"
        )
    if h.driver_reinstallable is True:
        return None
    if h.driver_reinstallable is False:
        return (
            f"the installed driver {h.driver} is no longer in any apt index: a rollback cannot "
            "reinstall it (keep its packages: apt-get download) before applying"
        )
    return (
        f"not known whether the installed driver {h.driver} is still in an apt index (the facts "
        "hold no apt-cache reading of it): a rollback may not reinstall it"
    )


# A held driver does not move with the kernel: Canonical builds linux-modules-nvidia-* for a new
# kernel against the archive's current driver version, and DKMS needs that kernel's headers.
AUTO_REBOOT_RISK = (
    "unattended-upgrades reboots this host by itself (Unattended-Upgrade::Automatic-Reboot): "
    "after a kernel update it can boot a kernel with no module for the held driver, past "
    "gpufix's reboot check; set Automatic-Reboot to false, or reboot with playbooks/reboot.yml, "
    "which refuses such a kernel"
)


# Fourth-generation NVSwitch boards (finding fabric-needs-nvlsm): the role installs fabric
# manager and NSCQ, not what else the fabric needs, so the plan never says the fabric is fixed.
NVLSM_RISK = (
    "fourth-generation NVSwitch board (HGX/DGX B200, B300; finding fabric-needs-nvlsm): fabric "
    "manager brings the NVLink fabric up only with the NVLink Subnet Manager (NVLSM, package "
    "nvlsm) and the InfiniBand userspace (libibumad3, infiniband-diags) beside it, which "
    "driver-pin does not install: the fabric may stay down after this plan; install them "
    "outside gpufix"
)


def _branch_changes(installed: str | None, vars_: dict[str, Any]) -> bool:
    """The target is another branch than the installed driver's (or the installed one is not
    known): what drives the GPUs may change."""
    target = str(vars_.get("gpufix_driver_branch") or vars_.get("gpufix_driver_version") or "")
    return not installed or target.split(".")[0] != installed.split(".")[0]


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    if h.gpu_count == 0:
        return Candidate("driver-pin", False, "no GPU")
    target = _target(ctx)
    if isinstance(target, str):
        # with the driver unread, no driver evidence can show: the driver is what would decide
        unread = ["driver"] if h.driver is None else []
        return Candidate("driver-pin", False, target, missing=unread)
    vars_ = dict(target.vars)
    if h.nvswitch:
        vars_["gpufix_driver_fabricmanager"] = True
    step = Step(PLAYBOOK, target.why, vars_, reboot=target.reboot)
    risks = list(target.risks)
    if h.secure_boot:
        risks.append(
            "Secure Boot is on: only signed modules load (Canonical's linux-modules-nvidia-* "
            "packages are signed; a DKMS build needs an enrolled key)"
        )
    rollback = _rollback_risk(ctx) if target.moves else None
    if rollback:
        risks.append(rollback)
    risks.append("every nvidia-*/libnvidia-* package is held; upgrades need an explicit unpin")
    if ctx.has("fabric-needs-nvlsm"):
        risks.append(NVLSM_RISK)
    if h.unattended_auto_reboot:
        risks.append(AUTO_REBOOT_RISK)
    named = (
        vars_.get("gpufix_driver_version")
        or (vars_.get("gpufix_driver_branch") and f"R{vars_['gpufix_driver_branch']}")
        or target.what
    )
    what = named or "the installed version (not in the facts)"
    if "gpufix_driver_version" not in vars_ and "gpufix_driver_branch" in vars_:
        what += " (the newest version of the branch the source offers when the role runs)"
    outcome = (
        f"driver: {what}; loaded and held (apt pin + dpkg hold + unattended-upgrades blacklist)"
    )
    if vars_.get("gpufix_driver_fabricmanager") and target.reboot:
        outcome += (
            "; fabric manager and NSCQ at the same version, enabled, started after the reboot"
        )
    if not target.reboot:
        at = named or "the driver's version (the driver is not in the facts)"
        outcome = f"fabric manager at {at} running and held; the driver is unchanged, no reboot"
    if ctx.has("fabric-needs-nvlsm"):
        outcome += "; the NVLink fabric also needs NVLSM, which this plan does not install (risks)"
    missing = list(target.missing)
    gpus_unread = h.gpu_count is None or not (h.compute_caps or h.gpu_names)
    if target.moves and gpus_unread and _branch_changes(h.driver, vars_):
        # The branch must drive every GPU (Kepler <= R470, Blackwell >= R570): GPUs unread, or
        # counted by the probe's ranks with no model, cannot be checked against it, so the
        # move waits for them.
        missing.append("gpus")
    if "driver" in target.missing:
        outcome += "; the driver version is not in the facts: the role refuses until it is named"
    elif target.missing:
        outcome += f"; not yet known: {', '.join(target.missing)} (needs): the plan is incomplete"
    cand = Candidate(
        "driver-pin",
        True,
        target.why,
        [step],
        outcome,
        risks,
        target.reboot,
        missing=missing,
    )
    return on_container_host(ctx, reboot_gate(ctx, cand))


STRATEGY = Strategy(
    name="driver-pin",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=(
        "/etc/apt/preferences.d/gpufix-nvidia-driver.pref",
        "/etc/apt/apt.conf.d/51gpufix-nvidia-driver",
    ),
    disk_need_mib=(200, 1024),
    reboot_after_restore=False,
)
