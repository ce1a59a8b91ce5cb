"""nccl-profile: /etc/nccl.conf from named profiles that match the evidence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpufix import versions
from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.diagnose import no_p2p
from gpufix.engine.held import in_force, job_env, text
from gpufix.engine.nccl_installed import issues_of, nccl_version_of
from gpufix.engine.plan import Step
from gpufix.inputs import one_line
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import (
    TRANSPORT_CAUSES,
    not_multi_gpu,
    p2p_evidence,
    physical_interface,
    physical_interfaces,
    profile_cost,
)
from gpufix.strategies.nccl_knobs_out import knobs_out

PLAYBOOK = "nccl_profile.yml"


def _legacy_profiles(ctx: Ctx) -> tuple[list[str], list[str]]:
    """Profiles from the probe's causes and the facts when the decision table named none."""
    h = ctx.host
    profiles: list[str] = []
    why = []
    p2p = p2p_evidence(ctx)
    if no_p2p(h, ctx.kb) and (p2p or ctx.has("gpu-no-p2p")):
        profiles.append("no-p2p")
        why.append("these GPUs have no PCIe P2P: NCCL_P2P_DISABLE=1 is the fix")
    elif p2p:
        profiles.append("no-p2p")
        why.append(
            f"P2P evidence ({p2p}); NCCL_P2P_DISABLE=1 is a last resort that costs bandwidth"
        )
    sig = ctx.signals
    # Within one host NCCL's data go over P2P or SHM: its sockets (and the network plugin) only
    # set the communicator up. Once that finished (a stall past pg_init), neither the socket
    # interface nor IB is evidence (expert review, 2026-12-06).
    set_up = (
        sig is None or sig.scope == "multi-node" or sig.phase in (None, "rendezvous", "pg_init")
    )
    if ctx.cause(*TRANSPORT_CAUSES) and set_up:
        if h.infiniband:
            profiles.append("ib-off")
            why.append(
                f"NCCL stalled with P2P off too and InfiniBand ({', '.join(h.infiniband)}) is "
                "present: try without IB on a host without a working fabric"
            )
        if physical_interface(h):
            profiles.append("socket-ifname")
            why.append(f"NCCL stalled: pin its socket interface to {physical_interface(h)}")
    if ctx.has("nccl-debug-knobs"):
        profiles.append("default")
        why.append("remove debug knobs from /etc/nccl.conf")
    return profiles, why


# Evidence that names an interface: an ifname-NAME experiment that healed the run, or an
# NCCL_SOCKET_IFNAME exclusion list to complete with NCCL's own exclusions.
_NAMING = ("experiment:ifname", "override:ifname-filter")


def _named_by_evidence(ctx: Ctx) -> bool:
    """The interface came from evidence, not from the facts' first physical interface: a guess
    that may be the one NCCL already picks (src/misc/socket.cc: ib* first, then the rest but
    docker, lo and virbr), so writing it may change nothing."""
    d = ctx.decision
    if d is not None and d.evidence == "override:ifname-absent":
        # the facts' only candidate is no guess (lo on a host with no other interface up)
        return len(physical_interfaces(ctx.host)) <= 1
    return d is not None and d.evidence in _NAMING and bool(d.ifname)


def _ifname(ctx: Ctx) -> str | None:
    """The interface the profile names: the decision's, when the facts list it up (NCCL matches
    a prefix: `eth` names eth0; `lo`, exactly, is on every host), else the host's first physical
    one; None when neither is known. An interface read from a verdict that the facts do not
    list (or facts that list none) is not written: a name no interface matches leaves NCCL
    without a socket interface."""
    d = ctx.decision
    if d is not None and d.ifname:
        known = ctx.host.interfaces  # those up, loopback aside: every host has `lo`
        # an exclusion list ("^docker0,docker,lo,virbr") names what to skip, not one interface
        if (
            d.ifname == "lo"
            or d.ifname.startswith("^")
            or any(i.startswith(d.ifname) for i in known)
        ):
            return d.ifname
        return None
    return physical_interface(ctx.host)


def _costs(ctx: Ctx, profiles: Sequence[str]) -> list[str]:
    """What each profile costs; turning off P2P costs nothing on GPUs that never had it."""
    free = {"default", "socket-ifname"} | ({"no-p2p"} if no_p2p(ctx.host, ctx.kb) else set())
    return [
        f"{p}: {profile_cost(ctx, p)}" for p in profiles if p not in free and profile_cost(ctx, p)
    ]


def for_profiles(ctx: Ctx, profiles: Sequence[str], why: str) -> Candidate:
    """A candidate that writes these profiles; an interface the facts do not name is missing."""
    blocked = not_multi_gpu(ctx, "nccl-profile")
    if blocked is not None:
        return blocked
    names = list(dict.fromkeys(profiles))
    vars_: dict[str, Any] = {"gpufix_nccl_profile_names": names}
    missing = []
    if "socket-ifname" in names:
        ifname = _ifname(ctx)
        if ifname:
            vars_["gpufix_nccl_profile_socket_ifname"] = ifname
            if not _named_by_evidence(ctx):
                missing.append("interface-choice")
        else:
            missing.append("interfaces")
    costs = _costs(ctx, names)
    notes: list[str] = []  # risks that are not a profile's cost
    if vars_.get("gpufix_nccl_profile_socket_ifname") == "lo":
        # loopback reaches no other host: every NCCL job on this host is then single-host
        notes.append(
            "socket-ifname lo: NCCL's sockets stay on this host, so a job across hosts started "
            "here cannot connect; apply it only where jobs run on one host"
        )
    if "socket-ifname" in names and vars_.get("gpufix_nccl_profile_socket_ifname"):
        # nccl.conf reaches NCCL only (the probe's interface experiment sets both variables)
        notes.append(
            "/etc/nccl.conf sets NCCL_SOCKET_IFNAME only: PyTorch's gloo groups (CPU "
            "collectives, a gloo barrier) read GLOO_SOCKET_IFNAME from the job's environment: "
            f"set GLOO_SOCKET_IFNAME={vars_['gpufix_nccl_profile_socket_ifname']} in the job too"
        )
    what = f"write /etc/nccl.conf from profiles {', '.join(names)}"
    if "interfaces" in missing:
        what += " (the interface is not in the facts: the role refuses until it is named)"
    elif "interface-choice" in missing:
        what += " (the interface is the facts' first, not one a run showed working)"
    outcome = "NCCL reads /etc/nccl.conf at the next job start, no reboot"
    if ctx.host.from_container:
        outcome += (
            "; the facts come from inside a container, so the file is written there and is lost "
            "when the container is recreated: bake it into the image or mount it from the host"
        )
    if ctx.host.docker and not ctx.host.from_container:
        # A container has its own /etc: the host's file reaches a job there only when mounted.
        outcome += (
            "; a job in a container reads it only when it is mounted "
            "(docker run -v /etc/nccl.conf:/etc/nccl.conf:ro, as gpufix-run does) "
            "or its settings are passed as -e NCCL_...=..."
        )
        if "socket-ifname" in names:
            # a host interface name means nothing in a container's own network namespace
            outcome += (
                "; NCCL_SOCKET_IFNAME names a host interface, so it holds only for a container "
                "on the host's network (--network host): gpufix-run leaves it out elsewhere"
            )
    # NCCL reads its config files only for variables not in the environment (param.cc,
    # setEnvFile: setenv(var, value, 0)).
    shadowed = _set_by_job(ctx, names)
    if shadowed:
        outcome += (
            f"; the job sets {', '.join(shadowed)} itself (gpufix probe --job-env), and NCCL "
            "reads /etc/nccl.conf only for variables not in the environment: take them out of "
            "the job, or the profile's value does not reach it"
        )
    in_env = _set_by_environment(ctx, names, shadowed, vars_)
    if in_env:
        notes.append(
            f"the environment gpufix read sets {', '.join(in_env)} "
            f"({'the container' if ctx.host.from_container else 'the login environment of the user Ansible connects as'}), "
            "and NCCL reads /etc/nccl.conf only for variables not in the environment: where "
            "jobs start with it, the profile does not reach them; take it out of that "
            "environment (/etc/environment, the job's launcher or image)"
        )
    if costs:
        outcome += "; cost: " + "; ".join(costs)
    fixed = _fixed_later(ctx, names)
    if fixed:
        notes.append(fixed)
    return Candidate(
        "nccl-profile",
        True,
        why,
        [Step(PLAYBOOK, what, vars_)],
        outcome,
        [*costs, *notes],
        missing=missing,
    )


def _fixed_later(ctx: Ctx, names: Sequence[str]) -> str | None:
    """A profile that turns a mechanism off where the installed NCCL has a documented problem of
    that mechanism, fixed in a later release (nccl_issues.yaml): say that a newer NCCL lets it
    come off (expert review, 2026-12-06: nvls-off kept for good on NCCL 2.19.3)."""
    d = ctx.decision
    if d is not None and d.fix != "nccl-profile":
        return None  # an interim: the permanent fix is the plan's own
    have = nccl_version_of(ctx.host, ctx.kb)
    if not have:
        return None
    multi = ctx.signals is not None and ctx.signals.scope == "multi-node"

    def covers(i: Any) -> list[str]:
        return [n for n in names if i.workaround == n or f"experiment:{n}" in i.shows]

    # this host's architectures and setup only (issues_of), as every NCCL-issue reading does
    hit = [i for i in issues_of(ctx.host, ctx.kb, have, multi) if covers(i)]
    if not hit:
        return None
    last = max((i.fixed_in for i in hit), key=versions.key)
    off = [n for n in names if any(n in covers(i) for i in hit)]
    return (
        f"NCCL {have} has {', '.join(i.id for i in hit)} (fixed by NCCL {last}): a torch whose "
        f"NCCL has the fix lets {', '.join(off)} come off and its cost go "
        "(`gpufix plan HOST --strategy cuda-downgrade` names one that fits)"
    )


def _settings(ctx: Ctx, names: Sequence[str]) -> dict[str, str]:
    """VAR -> value the named profiles write (socket-ifname's value is a placeholder)."""
    out: dict[str, str] = {}
    for n in names:
        out.update(getattr(ctx.kb.nccl_profile(n), "settings", {}) or {})
    return out


def _set_by_job(ctx: Ctx, names: Sequence[str]) -> list[str]:
    """The profiles' variables that the job's own settings (the verdict's job_env) also set."""
    job = {item.partition("=")[0] for item in (ctx.signals.job_env if ctx.signals else ())}
    return sorted(job.intersection(_settings(ctx, names)))


def _set_by_environment(
    ctx: Ctx, names: Sequence[str], named: Sequence[str], vars_: dict[str, Any]
) -> list[str]:
    """VAR=VALUE of the environment the facts were read in (nccl.env) for the profiles'
    variables it sets to another value (and the job's settings did not name already)."""
    want = _settings(ctx, names)
    if "NCCL_SOCKET_IFNAME" in want:  # the profile's placeholder: the interface chosen
        want["NCCL_SOCKET_IFNAME"] = str(vars_.get("gpufix_nccl_profile_socket_ifname") or "")
    env = dict(ctx.host.nccl_env)
    return [
        f"{k}={one_line(env[k], 80)}"
        for k in sorted(want)
        if k in env and k not in named and env[k] != str(want[k])
    ]


# Profiles whose "off" acts within one host; ib-off and pxn-off act between hosts only, and a
# run on one host says nothing of them.
_WITHIN_HOST = ("no-p2p", "shm-off")


def _back_to_defaults(ctx: Ctx, names: Sequence[str], held: dict[str, str]) -> Candidate:
    """The evidence named settings the failing run already had: they are not its cure. Where
    /etc/nccl.conf alone holds them and NCCL documents a default, the step writes those
    defaults over the administrator's lines (the role keeps an original's other NCCL_* lines);
    where the environment or ~/.nccl.conf sets them, /etc/nccl.conf cannot (NCCL reads the
    environment first, then ~/.nccl.conf, then /etc/nccl.conf: src/misc/param.cc)."""
    kv = text(held)
    if "no-p2p" in names and no_p2p(ctx.host, ctx.kb):
        return Candidate(
            "nccl-profile",
            False,
            f"the run that was not healthy already had {kv}, which these GPUs need (they have "
            "no PCIe P2P): keep it; the hang has another cause",
        )
    etc, defaults = dict(ctx.host.nccl_etc), ctx.kb.nccl_defaults()
    env = {**dict(ctx.host.nccl_env), **job_env(ctx)}
    home = {k: v for k, v in ctx.host.nccl_home if k not in env}
    elsewhere = sorted(k for k in held if k in env or k in home or etc.get(k) != held[k])
    if elsewhere or any(k not in defaults for k in held):
        where = "the environment or ~/.nccl.conf" if elsewhere else "/etc/nccl.conf"
        return Candidate(
            "nccl-profile",
            False,
            f"the run that was not healthy already had {kv} (from {where}): "
            f"{', '.join(names)} would change nothing; take them out of {where} and probe again",
        )
    # The row's settings and the other "off"s within a host that /etc/nccl.conf holds go back
    # (what the run had beyond NCCL's own choice), unless something read before the file sets
    # them, or they are the fix itself (P2P off on GPUs without P2P).
    keys = set(held) | {
        k for p in ctx.kb.nccl_profiles if p.name in _WITHIN_HOST for k in p.settings
    }
    if no_p2p(ctx.host, ctx.kb):
        keys -= {k for p in ctx.kb.nccl_profiles if p.name == "no-p2p" for k in p.settings}
    reset = {
        k: defaults[k]
        for k, v in sorted(etc.items())
        if k in keys and k in defaults and v != defaults[k] and k not in env and k not in home
    }
    why = (
        f"the run that was not healthy already had {kv} from /etc/nccl.conf: "
        f"{', '.join(names)} would change nothing, so these settings are not the cure; back to "
        f"NCCL's defaults ({', '.join(f'{k}={v}' for k, v in reset.items())}: its own topology "
        "detection picks the transports), the one NCCL change left untried; the probe after it "
        "decides"
    )
    cand = for_profiles(ctx, ["default"], why)
    for step in cand.steps:
        step.vars["gpufix_nccl_profile_extra"] = reset
    return cand


def evaluate(ctx: Ctx) -> Candidate:
    blocked = not_multi_gpu(ctx, "nccl-profile")
    if blocked is not None:
        return blocked
    d = ctx.decision
    if d is not None and d.fix == "nccl-profile":
        held = in_force(ctx, d.row.profiles)
        if held is not None:
            return _back_to_defaults(ctx, d.row.profiles, held)
        cand = for_profiles(ctx, d.row.profiles, d.row.why)
        return knobs_out(ctx, cand) if d.evidence == "override:tuning" else cand
    if d is not None and d.interim:
        had = in_force(ctx, d.interim)
        if had is not None:
            kv = text(had)
            return Candidate(
                "nccl-profile",
                False,
                f"the run that was not healthy already had {kv}: {', '.join(d.interim)} is no "
                f"stopgap while {d.fix} is not applied",
            )
        return for_profiles(ctx, d.interim, f"stopgap while {d.fix} is not applied: {d.row.why}")
    profiles, why = _legacy_profiles(ctx)
    if not profiles:
        return Candidate("nccl-profile", False, "no evidence that an NCCL setting would help")
    return for_profiles(ctx, profiles, "; ".join(why))


STRATEGY = Strategy(
    name="nccl-profile",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/nccl.conf", "/etc/profile.d/gpufix-single-gpu.sh"),
    disk_need_mib=(0, 16),
    reboot_after_restore=False,
)
