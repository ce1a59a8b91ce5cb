"""The decision engine: a pure function of (facts, probe verdict, constraints, knowledge) -> Plan.

Order of preference comes from evidence first (what the facts and the probe show is broken),
then the field notes' tree as the floor: multi-GPU not needed -> single GPU; else pin a
torch/CUDA stack that fits, then containers; single GPU as the last resort.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufix import versions
from gpufix.engine.diagnose import (
    Stack,
    arch_problem,
    driver_runs_cuda,
    findings,
    known_driver_issues,
    shares_switch,
    stack,
)
from gpufix.engine.plan import PLAYBOOKS, STRATEGIES, Finding, Option, Plan, Step, digest
from gpufix.engine.rules import Rules
from gpufix.errors import InvalidInput
from gpufix.facts.host import Host, from_facts

# Causes the probe names (see docs/probe.md) that point at the PCIe path rather than software.
# Cause ids the probe names (CAUSES in gpufix_probe.py, docs/probe.md).
_P2P_CAUSES = ("p2p-path", "p2p-slow-copy")
_SHM_CAUSES = ("shm",)
_TRANSPORT_CAUSES = ("nccl-transport",)
_DRIVER_CAUSES = ("driver-mismatch", "gpu-init")
_DRIVER_TOO_OLD = ("driver-too-old",)


@dataclass(frozen=True)
class Constraints:
    reboot_allowed: bool = True
    multi_gpu_required: bool = True
    strategy: str | None = None  # forced by the user
    containers_allowed: bool = True
    container_image: str | None = None  # REF@sha256:DIGEST chosen by the user
    venv_path: str = "/opt/gpufix/venv"


@dataclass
class Candidate:
    strategy: str
    feasible: bool
    reason: str
    steps: list[Step] = field(default_factory=list)
    outcome: str = ""
    risks: list[str] = field(default_factory=list)
    reboot: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Ctx:
    host: Host
    verdict: dict[str, Any] | None
    c: Constraints
    kb: Any
    rules: Rules
    stack: Stack
    found: tuple[Finding, ...]

    def has(self, fid: str) -> bool:
        return any(f.id == fid for f in self.found)

    def cause(self, *ids: str) -> bool:
        causes = (self.verdict or {}).get("causes") or []
        return any(c.get("id") in ids for c in causes if isinstance(c, dict))


# ---------------------------------------------------------------- strategies


def _reboot_gate(ctx: Ctx, cand: Candidate) -> Candidate:
    if cand.feasible and cand.reboot and not ctx.c.reboot_allowed:
        return Candidate(cand.strategy, False, "needs a reboot, and reboots are not allowed")
    return cand


def kernel_upgrade(ctx: Ctx) -> Candidate:
    h, kb = ctx.host, ctx.kb
    rel = kb.ubuntu(h.codename) if h.codename else None
    if rel is None or not rel.hwe_metapackage:
        return Candidate(
            "kernel-upgrade",
            False,
            f"no HWE kernel for {h.os_id or 'this OS'} {h.version_id or ''}".strip(),
        )
    running = versions.major_minor(h.kernel)
    target = versions.major_minor(rel.hwe_kernel)
    if target is None:
        return Candidate(
            "kernel-upgrade", False, f"no HWE kernel series recorded for {rel.codename}"
        )
    if running is None:
        return Candidate("kernel-upgrade", False, "running kernel unknown")
    if running >= target:
        return Candidate(
            "kernel-upgrade",
            False,
            f"already on {h.kernel}; {rel.codename}'s newest supported series is {rel.hwe_kernel}",
        )
    threshold = kb.accelerate_kernel_check.threshold
    gets = f"{rel.hwe_metapackage} gives {rel.hwe_kernel}"
    if versions.at_least(rel.hwe_kernel + ".0", threshold):
        outcome = (
            f"{gets}, at or above accelerate's {threshold}: the warning goes away; the kernel was a "
            "risk factor, so the post-reboot probe decides whether the hang is gone"
        )
    else:
        outcome = (
            f"{gets}: still below accelerate's {threshold} threshold (no supported kernel >= "
            f"{threshold} exists for {rel.codename}); the post-reboot probe decides"
        )
    risks = []
    if not h.dkms_nvidia and not h.kernel_nvidia_modules:
        risks.append(
            "no NVIDIA DKMS module or linux-modules-nvidia package seen: the kernel role refuses "
            "to reboot unless a module exists for the new kernel"
        )
    if h.secure_boot and h.dkms_nvidia:
        risks.append("Secure Boot is on: the DKMS module built for the new kernel must be signed")
    step = Step(
        PLAYBOOKS["kernel-upgrade"],
        f"install {rel.hwe_metapackage} and headers, keep {h.kernel} as fallback, boot the new "
        "kernel once, make it default after the probe passes",
        _kernel_vars(ctx),
        reboot=True,
    )
    return _reboot_gate(ctx, Candidate("kernel-upgrade", True, gets, [step], outcome, risks, True))


def _kernel_vars(ctx: Ctx) -> dict[str, Any]:
    """Role variables: the role installs the release's HWE packages; name the target kernel
    release when apt's candidate is known ('5.4.0.150.167~18.04.1' -> '5.4.0-150-generic')."""
    out: dict[str, Any] = {"gpufix_kernel_reboot_allowed": ctx.c.reboot_allowed}
    cand = ctx.host.hwe_candidate or ""
    m = re.match(r"(\d+\.\d+\.\d+)\.(\d+)\.", cand)
    if m:
        out["gpufix_kernel_target"] = f"{m.group(1)}-{m.group(2)}-generic"
    return out


def best_stack(ctx: Ctx) -> dict[str, Any] | None:
    """The newest torch/CUDA/transformers/accelerate that fits glibc, Python, driver and GPUs.

    Within one torch release, a CUDA variant the driver supports outright beats one it runs
    only through minor-version compatibility (no PTX JIT for newer code).
    """
    h, kb = ctx.host, ctx.kb
    found = [versions.major_minor(p) for p in (*h.pythons, h.env.version if h.env else None)]
    pythons = sorted({p for p in found if p is not None}, reverse=True)
    if not pythons or h.glibc is None:
        return None
    torches = sorted(kb.torch_releases, key=lambda t: versions.key(t.version), reverse=True)
    for t in torches:
        for py in pythons:
            pys = f"{py[0]}.{py[1]}"
            if not _in_range(pys, t.python_min, t.python_max):
                continue
            fits: list[tuple[bool, Any, str]] = []
            for cu in t.cuda:
                cuda = versions.major_minor(cu)
                if cuda is None or versions.at_least(h.glibc, t.glibc_for(cu)) is False:
                    continue
                runs, compat = driver_runs_cuda(kb, h.driver, cuda)
                if runs is True and not arch_problem(kb, h.compute_caps, cuda):
                    fits.append((not compat, versions.key(cu), cu))
            if not fits:
                continue
            native, _, cu = max(fits)
            tr = _newest_lib(kb.transformers_releases, pys, t.version)
            ac = _newest_lib(kb.accelerate_releases, pys, t.version)
            return {
                "python": pys,
                "torch": t.version,
                "cuda": cu,
                "tag": versions.cuda_tag(versions.major_minor(cu) or (0, 0)),
                "minor_compat": not native,
                "transformers": tr.version if tr else None,
                "accelerate": ac.version if ac else None,
            }
    return None


def _in_range(py: str, lo: str | None, hi: str | None) -> bool:
    v = versions.major_minor(py)
    if lo and v < versions.major_minor(lo):  # type: ignore[operator]
        return False
    return not (hi and v > versions.major_minor(hi))  # type: ignore[operator]


def _newest_lib(rows: Any, py: str, torch: str) -> Any:
    ok = [
        r
        for r in rows
        if _in_range(py, r.python_min, r.python_max)
        and (not r.torch_min or versions.at_least(torch, r.torch_min))
    ]
    return max(ok, key=lambda r: versions.key(r.version), default=None)


def cuda_downgrade(ctx: Ctx) -> Candidate:
    h = ctx.host
    if h.gpu_count == 0:
        return Candidate("cuda-downgrade", False, "no GPU")
    best = best_stack(ctx)
    if best is None:
        return Candidate(
            "cuda-downgrade",
            False,
            f"no torch release fits glibc {h.glibc}, Python {'/'.join(h.pythons) or 'unknown'} and driver {h.driver}",
        )
    want = f"{best['torch']}+{best['tag']}"
    current = h.env.torch if h.env else None
    same = (
        current is not None
        and versions.parse(current) == versions.parse(best["torch"])
        and (versions.local_tag(current) == best["tag"])
    )
    if same and ctx.stack.driver_ok is not False and not ctx.stack.arch_problem:
        return Candidate(
            "cuda-downgrade",
            False,
            f"the installed torch {current} is already the newest stack that fits",
        )
    py = best["python"]
    why = (
        f"torch {want} with transformers {best['transformers']} and accelerate {best['accelerate']} "
        f"on Python {py}: the newest stack that fits glibc {h.glibc}, driver {h.driver}"
        + (
            f" and compute capability {'/'.join(sorted(set(h.compute_caps)))}"
            if h.compute_caps
            else ""
        )
    )
    step = Step(
        PLAYBOOKS["cuda-downgrade"],
        f"build a venv at {ctx.c.venv_path} with {why.split(':')[0]}",
        {
            "gpufix_ml_stack_venv": ctx.c.venv_path,
            "gpufix_ml_stack_python": h.python_paths.get(py, f"/usr/bin/python{py}"),
            "gpufix_ml_stack_torch_version": best["torch"],
            "gpufix_ml_stack_torch_variant": best["tag"],
            "gpufix_ml_stack_torch_index_url": f"https://download.pytorch.org/whl/{best['tag']}",
            "gpufix_ml_stack_transformers_version": best["transformers"],
            "gpufix_ml_stack_accelerate_version": best["accelerate"],
        },
    )
    outcome = (
        f"training runs from {ctx.c.venv_path} with {want}; driver and kernel unchanged, no reboot"
    )
    if best["minor_compat"]:
        outcome += (
            f" (driver {h.driver} runs CUDA {best['cuda']} through minor-version compatibility)"
        )
    risks = []
    if current:
        risks.append(f"code written for torch {current} may need changes for {best['torch']}")
    if h.kernel and versions.at_least(h.kernel, ctx.kb.accelerate_kernel_check.threshold) is False:
        risks.append("accelerate will still print the kernel warning; it is a risk factor only")
    return Candidate("cuda-downgrade", True, why, [step], outcome, risks, extra={"stack": best})


def container_fallback(ctx: Ctx) -> Candidate:
    h, kb = ctx.host, ctx.kb
    if not ctx.c.containers_allowed:
        return Candidate("container-fallback", False, "containers not allowed")
    if h.gpu_count == 0:
        return Candidate("container-fallback", False, "no GPU")
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
        PLAYBOOKS["container-fallback"],
        f"install Docker and the NVIDIA container toolkit, pin {ref}, install gpufix-run",
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


def nccl_profile(ctx: Ctx) -> Candidate:
    h = ctx.host
    if not h.multi_gpu:
        return Candidate("nccl-profile", False, "fewer than two GPUs")
    profiles: list[str] = []
    why = []
    p2p = _p2p_evidence(ctx)
    if p2p:
        profiles.append("no-p2p")
        why.append(
            f"P2P evidence ({p2p}); NCCL_P2P_DISABLE=1 is a last resort that costs bandwidth"
        )
    if ctx.cause(*_TRANSPORT_CAUSES):
        if h.infiniband:
            profiles.append("ib-off")
            why.append(
                f"NCCL stalled with P2P off too and InfiniBand ({', '.join(h.infiniband)}) is present: "
                "try without IB on a host without a working fabric"
            )
        iface = _physical_interface(h)
        if iface:
            profiles.append("socket-ifname")
            why.append(f"NCCL stalled with P2P off too: pin its socket interface to {iface}")
    if ctx.has("nccl-debug-knobs"):
        profiles.append("default")
        why.append("remove debug knobs from /etc/nccl.conf")
    if not profiles:
        return Candidate("nccl-profile", False, "no evidence that an NCCL setting would help")
    vars_: dict[str, Any] = {"gpufix_nccl_profile_names": profiles}
    if "socket-ifname" in profiles:
        vars_["gpufix_nccl_profile_socket_ifname"] = _physical_interface(h)
    cost = _profile_cost(ctx, "no-p2p") if "no-p2p" in profiles else ""
    step = Step(
        PLAYBOOKS["nccl-profile"],
        f"write /etc/nccl.conf from profiles {', '.join(profiles)}",
        vars_,
    )
    return Candidate(
        "nccl-profile",
        True,
        "; ".join(why),
        [step],
        f"NCCL reads /etc/nccl.conf at the next job start{(' ; ' + cost) if cost else ''}",
        [cost] if cost else [],
    )


_VIRTUAL_IFACES = (
    "docker",
    "veth",
    "virbr",
    "br-",
    "cni",
    "flannel",
    "cali",
    "tun",
    "tap",
    "podman",
)


def _physical_interface(h: Host) -> str | None:
    real = [i for i in h.interfaces if not i.startswith(_VIRTUAL_IFACES)]
    return real[0] if real else None


def _profile_cost(ctx: Ctx, name: str) -> str:
    for p in ctx.kb.nccl_profiles:
        if p.name == name:
            return str(p.cost)
    return ""


def _p2p_evidence(ctx: Ctx) -> str:
    """What in the probe points at the PCIe peer path; empty when nothing does."""
    v = ctx.verdict or {}
    stalled = (v.get("stalled") or {}).get("phase")
    rerun = (v.get("no_p2p_rerun") or {}).get("verdict")
    detail = f"{v.get('verdict')} in {stalled or 'a collective'}"
    if rerun == "healthy":
        detail += ", healthy with NCCL_P2P_DISABLE=1"
    if ctx.cause(*_P2P_CAUSES):
        ids = [c.get("id") for c in v.get("causes") or [] if isinstance(c, dict)]
        return f"probe {detail} ({', '.join(i for i in ids if i in _P2P_CAUSES)})"
    if v.get("verdict") in ("hung", "degraded") and rerun == "healthy":
        return f"probe {detail}"
    return ""


def pcie_acs(ctx: Ctx) -> Candidate:
    h = ctx.host
    if not h.multi_gpu:
        return Candidate("pcie-acs", False, "fewer than two GPUs")
    vars_: dict[str, Any] = {}
    what = []
    reboot = False
    if h.acs_bridges:
        vars_["gpufix_pcie_acs_bridges"] = list(h.acs_bridges)
        what.append(f"disable ACS at boot on {', '.join(h.acs_bridges)} (setpci unit)")
    if h.iommu_mode == "translated":
        vars_["gpufix_pcie_acs_iommu_passthrough"] = True
        vars_["gpufix_pcie_acs_reboot_allowed"] = ctx.c.reboot_allowed
        what.append("set iommu=pt on the kernel command line")
        reboot = True
    if not what and _p2p_evidence(ctx) and (not h.acs_known or h.iommu_mode in (None, "unknown")):
        # The probe says the peer path is broken but lspci could not be read here: the unit
        # finds the bridges above NVIDIA GPUs itself at boot.
        vars_["gpufix_pcie_acs_bridges"] = ["auto"]
        what.append("disable ACS at boot on every bridge above an NVIDIA GPU (found at boot)")
    if not what:
        return Candidate(
            "pcie-acs", False, "no ACS redirect above the GPUs and IOMMU not translating"
        )
    cost = _profile_cost(ctx, "no-p2p")
    step = Step(PLAYBOOKS["pcie-acs"], "; ".join(what), vars_, reboot=reboot)
    outcome = "P2P traffic stays below the switch at full rate; the probe re-checks P2P copy and NCCL init"
    risks = [
        "disabling ACS weakens isolation between devices (matters for VFIO pass-through hosts)"
    ]
    if cost:
        outcome += f". The fallback, nccl-profile no-p2p, would cost: {cost}"
    return _reboot_gate(
        ctx, Candidate("pcie-acs", True, "; ".join(what), [step], outcome, risks, reboot)
    )


def _driver_target(ctx: Ctx) -> tuple[str | None, str]:
    """(target driver version or branch, why)."""
    h, kb = ctx.host, ctx.kb
    if ctx.has("driver-library-mismatch") and h.driver_userspace:
        return (
            h.driver_userspace,
            f"load the installed userspace {h.driver_userspace} (reboot) and hold it",
        )
    if ctx.has("fabricmanager-missing") or ctx.has("fabricmanager-version-mismatch"):
        return h.driver, f"install fabric manager at exactly the driver's {h.driver} and hold both"
    issues = known_driver_issues(h, kb)
    available = _available_branches(ctx)
    if issues:
        for b in issues[0].good_branches:
            if not available or b in available:
                return str(b), f"move from {h.driver} to branch {b} ({issues[0].id}) and hold it"
    if ctx.stack.driver_ok is False and ctx.stack.required_driver:
        need = versions.driver_branch(ctx.stack.required_driver) or 0
        bad = {versions.driver_branch(h.driver)}
        for b in sorted(available):
            if b >= need and b not in bad:
                return str(
                    b
                ), f"upgrade to branch {b} so torch's CUDA {ctx.stack.cuda} runs, and hold it"
    return None, "no driver evidence"


def _available_branches(ctx: Ctx) -> list[int]:
    try:
        rows = ctx.kb.ubuntu_driver_packages(ctx.host.codename) if ctx.host.codename else []
    except (KeyError, AttributeError):
        rows = []
    return sorted({b for r in rows for b in r.branches})


def driver_pin(ctx: Ctx) -> Candidate:
    h = ctx.host
    if h.gpu_count == 0:
        return Candidate("driver-pin", False, "no GPU")
    target, why = _driver_target(ctx)
    if target is None:
        return Candidate("driver-pin", False, why)
    branch = versions.driver_branch(target)
    vars_: dict[str, Any] = {
        "gpufix_driver_branch": branch,
    }
    if "." in target:
        vars_["gpufix_driver_version"] = target
    if h.nvswitch:
        vars_["gpufix_driver_fabricmanager"] = True
    step = Step(PLAYBOOKS["driver-pin"], why, vars_, reboot=True)
    risks = []
    if h.secure_boot and h.dkms_nvidia:
        risks.append("Secure Boot is on: an unsigned DKMS module will not load")
    risks.append("every nvidia-*/libnvidia-* package is held; upgrades need an explicit unpin")
    outcome = (
        f"driver {target} loaded and held (apt pin + dpkg hold + unattended-upgrades blacklist)"
    )
    return _reboot_gate(ctx, Candidate("driver-pin", True, why, [step], outcome, risks, True))


def container_fix(ctx: Ctx) -> Candidate:
    h = ctx.host
    in_containers = bool(h.in_container or h.docker)
    shm = ctx.has("shm-too-small") or ctx.cause(*_SHM_CAUSES)
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
    step = Step(PLAYBOOKS["container-fix"], "; ".join(what), vars_)
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


def single_gpu(ctx: Ctx) -> Candidate:
    if ctx.host.gpu_count == 0:
        return Candidate("single-gpu", False, "no GPU")
    step = Step(
        PLAYBOOKS["single-gpu"],
        "export CUDA_VISIBLE_DEVICES=0 for login shells (/etc/profile.d), set before torch is imported",
        {
            "gpufix_nccl_profile_single_gpu_index": 0,
            "gpufix_nccl_profile_single_gpu_state": "present",
        },
    )
    return Candidate(
        "single-gpu",
        True,
        "a workaround: training uses one GPU",
        [step],
        "jobs see one GPU: no NCCL, no hang, and one GPU's throughput",
        ["a workaround, not a fix: remove it once a real fix lands"],
    )


def none_(ctx: Ctx) -> Candidate:
    return Candidate("none", True, "nothing to change", [], "no change")


EVALUATORS = {
    "none": none_,
    "kernel-upgrade": kernel_upgrade,
    "cuda-downgrade": cuda_downgrade,
    "container-fallback": container_fallback,
    "nccl-profile": nccl_profile,
    "single-gpu": single_gpu,
    "pcie-acs": pcie_acs,
    "driver-pin": driver_pin,
    "container-fix": container_fix,
}
assert set(EVALUATORS) == set(STRATEGIES)


# ---------------------------------------------------------------- ordering


def preference(ctx: Ctx) -> tuple[list[str], list[str]]:
    """Strategies in the order the evidence calls for them, and the decision path that led there."""
    h, v = ctx.host, ctx.verdict or {}
    path: list[str] = []
    order: list[str] = []

    def want(s: str, why: str) -> None:
        if s not in order:
            order.append(s)
            path.append(f"{why} -> {s}")

    if h.gpu_count == 0:
        path.append("no NVIDIA GPU -> none (not applicable)")
        return ["none"], path
    if h.gpu_count == 1:
        path.append("one GPU: a multi-GPU hang cannot happen here -> none")
        return ["none"], path
    if not ctx.c.multi_gpu_required:
        want("single-gpu", "multi-GPU not required (field notes' first branch)")
    probe = v.get("verdict")
    if probe == "healthy" and not any(f.severity == "error" for f in ctx.found):
        path.append("probe healthy and no error findings -> none")
        return ["none", *order], path
    if ctx.has("driver-library-mismatch"):
        want("driver-pin", "driver/library mismatch")
    if ctx.has("fabricmanager-missing") or ctx.has("fabricmanager-version-mismatch"):
        want("driver-pin", "NVSwitch fabric manager missing or at another version")
    if ctx.has("torch-cuda-needs-newer-driver") or ctx.has("gpu-arch-dropped"):
        want("cuda-downgrade", "torch wheel cannot run on this driver/GPU (no reboot needed)")
        want("driver-pin", "or raise the driver to what the wheel needs")
    # A known-bad driver range is specific (a sourced report), so it explains P2P symptoms
    # before the generic ACS/IOMMU reading does.
    if ctx.has("driver-known-issue"):
        want("driver-pin", "driver in a range with reported multi-GPU problems")
    if _p2p_evidence(ctx):
        want("pcie-acs", f"{_p2p_evidence(ctx)}; ACS/IOMMU is the cause NCCL documents")
        want("nccl-profile", "no-P2P as the fallback")
    if ctx.has("shm-too-small") or ctx.cause(*_SHM_CAUSES):
        want("container-fix", "/dev/shm too small for NCCL")
    if ctx.has("container-private-network"):
        want("container-fix", "container without host networking")
    if ctx.cause(*_DRIVER_TOO_OLD):
        want("cuda-downgrade", "probe: CUDA says the driver is too old for torch's CUDA")
    if ctx.cause(*_DRIVER_CAUSES):
        want("driver-pin", "probe points at the driver (mismatch or CUDA init trouble)")
    if ctx.cause(*_TRANSPORT_CAUSES):
        want("nccl-profile", "probe: NCCL stalled with P2P off too (transport or interface)")
    static_acs = ctx.has("acs-enabled-above-gpus") or ctx.has("iommu-translated")
    if static_acs and shares_switch(h):
        want("pcie-acs", "ACS redirect or translating IOMMU above GPUs that share a PCIe switch")
    if ctx.has("kernel-below-accelerate-threshold") and not ctx.has("kernel-at-release-ceiling"):
        want("kernel-upgrade", "kernel below accelerate's threshold and a newer HWE kernel exists")
    if static_acs:
        want(
            "pcie-acs",
            "ACS redirect or translating IOMMU on the GPUs' root ports (no probe evidence)",
        )
    if probe in ("hung", "failed", "degraded"):
        want("nccl-profile", "probe not healthy; NCCL settings that match the evidence")
        want(
            "cuda-downgrade",
            "probe not healthy, no specific cause: pin a stack that fits (field notes: pin torch)",
        )
        want("container-fallback", "then containers (field notes)")
        want("single-gpu", "last resort")
    elif not order:
        path.append("no error findings and no probe evidence: run `gpufix plan HOST --probe`")
        order.append("none")
    for s in ("cuda-downgrade", "container-fallback", "nccl-profile", "single-gpu", "none"):
        if s not in order:
            order.append(s)
    return order, path


def decide(
    facts: Mapping[str, Any],
    verdict: dict[str, Any] | None = None,
    constraints: Constraints | None = None,
    *,
    kb: Any,
    rules: Rules,
    host_name: str = "",
) -> Plan:
    """No I/O here: the caller loads the knowledge base (gpufix.engine.kb.load) and rules (gpufix.engine.rules.load)."""
    c = constraints or Constraints()
    if c.strategy is not None and c.strategy not in STRATEGIES:
        raise InvalidInput(
            f"unknown strategy {c.strategy!r}; choose one of: {', '.join(STRATEGIES)}"
        )
    host = from_facts(facts)
    st = stack(host, kb)
    order_sev = {"error": 0, "warning": 1, "info": 2}
    found = sorted(findings(host, verdict, kb, rules), key=lambda f: order_sev.get(f.severity, 3))
    ctx = Ctx(host, verdict, c, kb, rules, st, tuple(found))
    order, path = preference(ctx)
    cands = {s: EVALUATORS[s](ctx) for s in STRATEGIES}
    ranked = order + [s for s in STRATEGIES if s not in order]
    options = [
        Option(s, cands[s].feasible, cands[s].reason, ranked.index(s) if s in order else 99)
        for s in ranked
    ]
    if c.strategy:
        chosen = cands[c.strategy]
        if not chosen.feasible:
            raise InvalidInput(
                f"strategy {c.strategy} is not feasible for {host_name or 'this host'}: {chosen.reason}"
            )
        path.append(f"forced by the user -> {c.strategy}")
    else:
        chosen = next(
            (cands[s] for s in order if cands[s].feasible),
            cands["none"],
        )
        for s in order:
            if s == chosen.strategy:
                break
            path.append(f"{s} not feasible: {cands[s].reason}")
    risks = list(chosen.risks)
    if (
        chosen.strategy != "none"
        and ctx.has("kernel-below-accelerate-threshold")
        and chosen.strategy != "kernel-upgrade"
    ):
        risks.append(
            "the kernel stays below accelerate's threshold: its warning remains (a risk factor)"
        )
    return Plan(
        host=host_name,
        strategy=chosen.strategy,
        findings=found,
        options=options,
        steps=chosen.steps,
        reboot_required=chosen.reboot,
        outcome=chosen.outcome,
        risks=risks,
        path=path,
        facts_digest=digest(stable_facts(facts)),
        kb_digest=str(kb.digest),
        probe_verdict=(verdict or {}).get("verdict"),
        # The facts the plan was made from, so a stale-plan refusal can name what changed.
        extra={**chosen.extra, "facts": stable_facts(facts)},
    )


# Facts that change between two gatherings without anything being changed on the host.
VOLATILE = ("gpu_processes", "kernel_log", "module_version", "python")


def stable_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in facts.items() if k not in VOLATILE}
