"""Findings: what the facts and the probe verdict say is wrong or risky, each with its evidence.

One small check per idea (the pattern workload/preflight.py uses); CHECKS runs them in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

from gpufix import versions
from gpufix.engine import branches
from gpufix.engine.kb import DriverIssue, KnowledgeBase
from gpufix.engine.nccl_installed import issues_of, nccl_version_of
from gpufix.engine.plan import Finding
from gpufix.engine.rules import Rules
from gpufix.engine.signals import cut_short, printed_none
from gpufix.engine.stack import Stack, stack
from gpufix.facts.host import Host
from gpufix.inputs import one_line


@dataclass(frozen=True)
class Inputs:
    host: Host
    verdict: dict[str, Any] | None
    kb: KnowledgeBase
    rules: Rules
    stack: Stack
    day: date  # the plan date: support windows are judged on it

    def finding(
        self, rid: str, message: str, evidence: dict[str, Any], source: str = ""
    ) -> Finding:
        r = self.rules.rule(rid)
        return Finding(rid, r.severity, message or r.title, evidence, source or r.source)


FactCheck = Callable[[Inputs], Iterator[Finding]]


def check_gpus(i: Inputs) -> Iterator[Finding]:
    h = i.host
    if h.gpu_count is None:
        yield i.finding("gpus-unknown", "", {"gpus": "unknown"})
    elif h.gpu_count == 1:
        yield i.finding("single-gpu-host", "", {"gpus": list(h.gpu_names)})
    if h.compute_caps_named:
        yield i.finding(
            "compute-capability-from-name",
            f"compute capability {'/'.join(sorted(set(h.compute_caps)))} taken from the GPU "
            f"name ({', '.join(sorted(set(h.gpu_names)))}): the facts do not carry it"
            + (
                " (R470's nvidia-smi has no compute_cap field)"
                if (h.driver or "").split(".")[0] == "470"
                else ""
            ),
            {"gpus.name": list(dict.fromkeys(h.gpu_names)), "gpus.compute_capability": "unknown"},
        )


def check_probe_measured(i: Inputs) -> Iterator[Finding]:
    h = i.host
    if not h.probe_measured:
        return
    names = sorted(set(h.gpu_names))
    gpus = f"{h.gpu_count}x {names[0]}" if len(names) == 1 else f"{h.gpu_count}"
    gpus += f" ({', '.join(names)})" if len(names) > 1 else ""
    now = {
        "torch": h.env.torch if h.env else None,
        "nccl": h.env.nccl if h.env else None,
        "driver": h.driver,
        "kernel": h.kernel,
        "gpus": f"{gpus} (the facts could not list them)",
        "kernel_log.xid": f"{h.xid} Xid lines since boot",
        "kernel_log.aer": f"{h.aer} AER lines since boot",
    }
    taken = {k: now[k] for k in h.probe_measured}
    yield i.finding(
        "stack-from-probe",
        "from the probe's run in the training interpreter: "
        + ", ".join(f"{k} {v}" for k, v in taken.items()),
        {f"probe.facts.{k}": v for k, v in taken.items()},
    )


def check_gathered_in(i: Inputs) -> Iterator[Finding]:
    if i.host.from_container:
        yield i.finding("facts-from-container", "", {"gathered_in.where": "container"})


def check_driver_mismatch(i: Inputs) -> Iterator[Finding]:
    h = i.host
    if h.driver_mismatch or (h.nvml_error and "mismatch" in h.nvml_error.lower()):
        yield i.finding(
            "driver-library-mismatch",
            f"kernel module {h.driver} but userspace {h.driver_userspace}: "
            "a reboot (or module reload) is needed, and a hold keeps it from recurring",
            {
                "driver.kernel_module": h.driver,
                "driver.userspace": h.driver_userspace,
                "driver.nvml_error": h.nvml_error,
            },
        )


def check_gpus_unreachable(i: Inputs) -> Iterator[Finding]:
    """A GPU nvidia-smi could not reach while it read the others (exit 15 is NVML's
    GPU_IS_LOST: fallen off the bus): the job's ranks cannot all start, whatever else changes."""
    errs = i.host.gpu_errors
    if not errs:
        return
    named = [f"{bdf or 'a GPU'} ({msg or 'no message'}, exit {rc})" for bdf, msg, rc in errs]
    yield i.finding(
        "gpu-unreachable",
        f"nvidia-smi could not reach {'; '.join(named)}: the facts list only the GPUs it read. "
        "Reboot the host; if it comes back, check the GPU's power, seating and slot "
        "(Xid 79 in the kernel log)",
        {"driver.gpu_errors": [{"pci_bus_id": b, "message": m, "rc": r} for b, m, r in errs]},
    )


def check_driver_support(i: Inputs) -> Iterator[Finding]:
    """The running branch: does NVIDIA still support it, and does it drive these GPUs?"""
    h = i.host
    why = branches.cannot_drive(i.kb, h.driver, h.driver_flavor, h.compute_caps, h.gpu_names)
    if why:
        yield i.finding(
            "driver-cannot-drive-gpus",
            f"driver {h.driver}: {why}",
            {"driver": h.driver, "gpus.compute_capability": list(h.compute_caps)},
        )
    row = i.kb.driver_branch(h.driver) if h.driver else None
    unlisted = unlisted_branch(i.kb, h.driver)
    if unlisted is not None:
        yield i.finding(
            "driver-branch-unsupported",
            f"driver {h.driver}: R{unlisted} is older than the newest branch in NVIDIA's table and "
            "not in it: NVIDIA lists every branch it still supports, so R"
            f"{unlisted} is not supported (plan date {i.day.isoformat()})",
            {"driver": h.driver, "branch.eol": None, "branch.kind": "unlisted"},
        )
    elif row is not None and not row.supported_on(i.day):
        status = (
            f"R{row.branch}'s support ended {row.eol}"
            if row.eol and row.kind != "new-feature"
            else f"R{row.branch} is a {row.kind} branch NVIDIA no longer lists as supported"
        )
        yield i.finding(
            "driver-branch-unsupported",
            f"driver {h.driver}: {status} (plan date {i.day.isoformat()})",
            {"driver": h.driver, "branch.eol": row.eol, "branch.kind": row.kind},
            row.source,
        )
    elif row is not None and (end := row.end_of_support()) and branches.ends_soon(row, i.day):
        # Whatever the plan chooses: before, only a driver-pin plan said so.
        yield i.finding(
            "driver-branch-ends-soon",
            f"driver {h.driver}: NVIDIA's support for R{row.branch} ends {end.isoformat()}, "
            f"{(end - i.day).days} days after the plan date {i.day.isoformat()}",
            {"driver": h.driver, "branch.eol": row.eol, "branch.kind": row.kind},
            row.source,
        )


def unlisted_branch(kb: KnowledgeBase, driver: str | None) -> int | None:
    """A driver branch the table has no row for, older than its newest row (R390, R530): not
    among the branches NVIDIA's support table lists, so not supported. A branch newer than the
    table (released after it) is not judged."""
    branch = versions.driver_branch(driver) if driver else None
    rows = [d.branch for d in kb.driver_branches]
    if branch is None or not rows or branch in rows or branch > max(rows):
        return None
    return branch


def check_kernel(i: Inputs) -> Iterator[Finding]:
    h, check = i.host, i.kb.accelerate_kernel_check
    if not h.kernel or versions.at_least(h.kernel, check.threshold) is not False:
        return
    acc = h.env.accelerate if h.env else None
    older = versions.at_least(acc, check.since_accelerate) is False if acc else False
    here = f" (accelerate {acc} here predates the check and prints no warning)" if older else ""
    yield i.finding(
        "kernel-below-accelerate-threshold",
        f"kernel {h.kernel} is below {check.threshold}, the minimum accelerate "
        f">= {check.since_accelerate} recommends{here}; its cause was never found, so this is a "
        "risk factor, not the diagnosis",
        {"kernel.running": h.kernel, **({"python_envs.accelerate": acc} if acc else {})},
        check.source,
    )
    rel = i.kb.ubuntu(h.codename) if h.codename and not h.from_container else None
    running, newest = versions.major_minor(h.kernel), versions.major_minor(rel and rel.hwe_kernel)
    if rel and running is not None and newest is not None and running >= newest:
        yield i.finding(
            "kernel-at-release-ceiling",
            f"{h.kernel} is already {rel.codename}'s newest supported series "
            f"({rel.hwe_kernel}); no supported kernel >= {check.threshold} exists for it",
            {"kernel.running": h.kernel, "os.codename": h.codename},
            rel.source,
        )


def check_stack(i: Inputs) -> Iterator[Finding]:
    h, st = i.host, i.stack
    torch = h.env.torch if h.env else None
    # Only a package list that says torch is not installed (null); the probe's NCCL reading
    # alone (probe_facts.py) or a list that leaves torch out says nothing of it.
    if h.env and h.env.torch_absent and not h.env.torch:
        yield i.finding("no-torch", "", {"python_envs": h.env.python})
    if st.cuda and st.driver_ok is False:
        yield i.finding(
            "torch-cuda-needs-newer-driver",
            f"torch {torch or ''} is built for CUDA {st.cuda[0]}.{st.cuda[1]}, which needs "
            f"driver >= {st.required_driver}; the host has {h.driver}",
            {"python_envs.torch": torch, "driver": h.driver},
        )
    elif st.cuda and st.via_minor_compat:
        yield i.finding(
            "torch-cuda-minor-compat",
            f"driver {h.driver} runs CUDA {st.cuda[0]}.{st.cuda[1]} only through "
            "minor-version compatibility (no PTX JIT for newer code)",
            {"driver": h.driver},
        )
    caps = {"gpus.compute_capability": list(h.compute_caps), "torch": torch}
    if st.arch_problem == "dropped":
        yield i.finding("gpu-arch-dropped", "", caps)
    elif st.arch_problem == "newer":
        yield i.finding("gpu-arch-newer-than-wheel", "", caps)


def no_p2p(h: Host, kb: KnowledgeBase) -> bool:
    """The GPUs cannot do PCIe P2P at all. The host's own reading (`nvidia-smi topo -p2p r`, i.e.
    cudaDeviceCanAccessPeer, which NVIDIA calls the final determinant) wins; without it, a
    model list (gpu_p2p.yaml) that leaves no pair of GPUs that might do it: on a mixed host two
    GPUs of models not listed still may, and turning P2P off would cost them bandwidth."""
    if h.p2p_read is not None:
        return h.p2p_read is False or ok_reading_untrusted(h, kb)
    maybe = [n for n in h.gpu_names if kb.gpu_p2p_capable(n) is not False]
    return len(maybe) < len(h.gpu_names) and len(maybe) <= 1


def ok_reading_untrusted(h: Host, kb: KnowledgeBase) -> bool:
    """The driver reads P2P OK, but every GPU is a model listed without P2P on drivers below a
    version (gpu_p2p.yaml ok_reading_before_driver: RTX 40 before 550.40.07, as accelerate's
    check_cuda_p2p_ib_support judges): such a reading is not believed; NCCL would try P2P, and
    no ACS change can make it work."""
    if h.p2p_read is not True or not h.gpu_names or h.driver is None:
        return False
    trusted_from = [kb.p2p_ok_reading_trusted_from(n) for n in h.gpu_names]
    return all(v is not None and versions.at_least(h.driver, v) is False for v in trusted_from)


def models_without_p2p(h: Host, kb: KnowledgeBase) -> list[str]:
    """The GPU models of the host that gpu_p2p.yaml lists without P2P, each once."""
    return [n for n in dict.fromkeys(h.gpu_names) if kb.gpu_p2p_capable(n) is False]


# From 2.19.1 NCCL turns P2P off wherever NVML reports it disabled, whatever each rank sees
# (ncclTopoCheckP2p in src/graph/paths.cc). Before, only a process that sees both GPUs asks
# cudaDeviceCanAccessPeer (p2pCanConnect in src/transport/p2p.cc): ranks that see one GPU each
# (CUDA_VISIBLE_DEVICES per rank) still try P2P there.
NCCL_FOLLOWS_P2P_STATUS = "2.19.1"


def p2p_refusal_honoured(h: Host, kb: KnowledgeBase) -> bool:
    """The driver refuses P2P between every pair (`nvidia-smi topo -p2p r` NS/CNS) and the job's
    NCCL is known to go by that in every process: NCCL_P2P_DISABLE=1 changes nothing there."""
    if h.p2p_read is not False:
        return False
    return versions.at_least(nccl_version_of(h, kb), NCCL_FOLLOWS_P2P_STATUS) is True


def acs_bridges_that_matter(h: Host) -> tuple[str, ...]:
    """ACS-redirecting bridges that change P2P: switch ports always; root ports unless the IOMMU
    is known to be off or in pass-through (then P2P across root ports is not redirected through
    a translation). A bridge of unknown type counts as a switch port behind a switch."""
    out = []
    for bdf in h.acs_bridges:
        port = h.acs_ports.get(bdf) or ("downstream" if h.behind_switch else "root")
        if port != "root" or h.iommu_mode not in ("off", "pt"):
            out.append(bdf)
    return tuple(out)


def check_p2p_path(i: Inputs) -> Iterator[Finding]:
    h = i.host
    if not h.multi_gpu:
        return
    if no_p2p(h, i.kb):
        if p2p_refusal_honoured(h, i.kb):
            yield i.finding(
                "gpu-p2p-refused",
                "the driver refuses PCIe peer-to-peer between these GPUs (nvidia-smi topo -p2p "
                f"r) and NCCL {nccl_version_of(h, i.kb)} goes by that: it uses shared memory, so "
                "NCCL_P2P_DISABLE=1 and ACS/IOMMU settings change nothing for it",
                {
                    "gpus.name": list(dict.fromkeys(h.gpu_names)),
                    "p2p.read": h.p2p_read,
                    "nccl": nccl_version_of(h, i.kb),
                },
            )
        elif h.nccl_settings.get("NCCL_P2P_DISABLE") != "1":
            untrusted = ok_reading_untrusted(h, i.kb)
            trusted_from = i.kb.p2p_ok_reading_trusted_from(h.gpu_names[0]) if untrusted else None
            yield i.finding(
                "gpu-no-p2p",
                f"{', '.join(models_without_p2p(h, i.kb)) or 'these GPUs'}: no PCIe peer-to-peer; "
                "where NCCL hangs on P2P, NCCL_P2P_DISABLE=1 is the fix, not a workaround (it costs "
                "nothing: no P2P to lose)"
                + (
                    f" (driver {h.driver} reads P2P OK, which is not believed below "
                    f"{trusted_from}: P2P does not work on these GPUs there; NCCL would try it)"
                    if untrusted
                    else ""
                ),
                {
                    "gpus.name": list(dict.fromkeys(h.gpu_names)),
                    "p2p.read": h.p2p_read,
                    **({"driver": h.driver} if untrusted else {}),
                },
            )
        return
    matter = acs_bridges_that_matter(h)
    if matter:
        yield i.finding(
            "acs-enabled-above-gpus",
            f"ACS redirect is on at {', '.join(matter)} above the GPUs "
            f"(topology {h.worst_link or 'unknown'}): "
            + (
                "P2P between GPUs on one switch is bounced up to the root complex"
                if shares_switch(h)
                else "on root ports it routes P2P through the IOMMU unless that is off or in "
                "pass-through"
            ),
            {"pcie.bridges": list(matter), "topology.worst": h.worst_link},
        )
    if h.iommu_mode == "translated":
        yield i.finding("iommu-translated", "", {"iommu.mode": h.iommu_mode})


def check_container(i: Inputs) -> Iterator[Finding]:
    h = i.host
    shm_min = i.rules.thresholds["shm_min_bytes"]
    if h.multi_gpu and h.shm_bytes is not None and h.shm_bytes < shm_min:
        yield i.finding(
            "shm-too-small",
            f"/dev/shm is {h.shm_bytes // (1 << 20)} MiB (< {shm_min // (1 << 20)} MiB)",
            {"shm.size_bytes": h.shm_bytes, "containers.in_container": h.in_container},
        )
    if h.in_container and h.net_host is False:
        yield i.finding("container-private-network", "", {"containers.net_host": False})


def check_fabricmanager(i: Inputs) -> Iterator[Finding]:
    h = i.host
    # Inside a container, dpkg and systemd are the container's: the host's fabric manager is
    # not visible from there.
    if not h.nvswitch or h.from_container:
        return
    # A version left unknown beside a known stopped service is still a stopped service.
    if not h.fabricmanager_known and h.fabricmanager_running is not False:
        return
    if not h.fabricmanager or h.fabricmanager_running is False:
        state = "not installed" if h.fabricmanager_known and not h.fabricmanager else "not running"
        yield i.finding(
            "fabricmanager-missing",
            f"fabric manager {state} "
            f"on an NVSwitch system ({h.gpu_count}x {h.gpu_names[0] if h.gpu_names else 'GPU'})",
            {
                "fabricmanager.installed": h.fabricmanager,
                "fabricmanager.running": h.fabricmanager_running,
            },
        )
    if h.fabricmanager and h.driver and versions.parse(h.fabricmanager) != versions.parse(h.driver):
        yield i.finding(
            "fabricmanager-version-mismatch",
            f"fabric manager {h.fabricmanager} vs driver {h.driver}",
            {"fabricmanager.installed": h.fabricmanager, "driver": h.driver},
        )


# What gpufix does not install on a fourth-generation NVSwitch board (Fabric Manager user guide:
# "Systems Using Fourth Generation NVSwitches", "Other NVIDIA Software Packages", "Bare Metal
# Mode"); strategies/driver_pin.py says the same in its risk line (NVLSM_RISK).
NVLSM_STACK = (
    "the NVLink Subnet Manager (NVLSM, package nvlsm), which programs the NVSwitches' routing "
    "and runs beside fabric manager (its service starts both), and the InfiniBand userspace it "
    "uses (libibumad3, infiniband-diags, an OFED/MOFED driver for the board's CX7 bridge); "
    "NVIDIA's CUDA repository installs them with the meta-package nvlink5-<branch> (the "
    "guide's example: nvlink5-570)"
)


def fourth_gen_nvswitch(h: Host, kb: KnowledgeBase) -> bool:
    """An NVSwitch system whose GPUs are models on fourth-generation NVSwitch boards
    (gpu_models.yaml, fourth_gen_nvswitch: HGX/DGX B200, B300)."""
    return h.nvswitch and any(kb.uses_fourth_gen_nvswitch(n) for n in h.gpu_names)


def check_fourth_gen_nvswitch(i: Inputs) -> Iterator[Finding]:
    """Fabric manager alone does not bring a fourth-generation NVSwitch fabric up; gpufix neither
    installs nor reads what else it needs, so this is said on every such host."""
    h = i.host
    if not fourth_gen_nvswitch(h, i.kb):
        return
    names = list(dict.fromkeys(n for n in h.gpu_names if i.kb.uses_fourth_gen_nvswitch(n)))
    yield i.finding(
        "fabric-needs-nvlsm",
        f"{h.gpu_count}x {names[0]}: fourth-generation NVSwitches, where fabric manager brings "
        f"the NVLink fabric up only with {NVLSM_STACK}. gpufix installs none of these (driver-pin "
        "installs the driver, nvidia-fabricmanager and libnvidia-nscq) and does not read them: "
        "without them the GPUs do not complete their registration with the NVLink fabric "
        "(nvidia-smi -q, Fabric State), which CUDA initialization waits for",
        {
            "gpus.name": names,
            "fabricmanager.installed": h.fabricmanager,
            "fabricmanager.running": h.fabricmanager_running,
        },
    )


def check_driver_issues(i: Inputs) -> Iterator[Finding]:
    h = i.host
    for issue in known_driver_issues(h, i.kb):
        yield i.finding(
            "driver-known-issue",
            f"driver {h.driver}: {issue.symptom} (fixed in {issue.fixed_in})",
            {"driver": h.driver, "issue": issue.id},
            issue.source,
        )


def check_nccl_issues(i: Inputs) -> Iterator[Finding]:
    """One finding for all the documented fixed problems this NCCL still has here."""
    version = nccl_version_of(i.host, i.kb)
    if version is None:
        return
    multi = (i.verdict or {}).get("scope") == "multi-node"
    found = sorted(issues_of(i.host, i.kb, version, multi), key=lambda x: versions.key(x.fixed_in))
    if not found:
        return
    newest = found[-1].fixed_in
    listed = "; ".join(f"{x.symptom} (fixed in {x.fixed_in})" for x in found[-3:])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    yield i.finding(
        "nccl-known-issue",
        f"NCCL {version}: {len(found)} documented problem(s) fixed in later releases, the last in "
        f"{newest}: {listed}{more}",
        {"nccl": version, "issues": [x.id for x in found], "fixed_by": newest},
        "; ".join(x.source for x in found[-3:]),
    )


def check_nccl(i: Inputs) -> Iterator[Finding]:
    h = i.host
    knobs = [k for k in i.kb.nccl_debug_knobs() if k in h.nccl_settings]
    if knobs:
        yield i.finding(
            "nccl-debug-knobs", f"{', '.join(knobs)} set in NCCL configuration", {"nccl": knobs}
        )
    admin = dict(h.nccl_admin)  # not gpufix's own profiles (p2p-level-pxb sets a tuning knob)
    tuning = {k.name: admin[k.name] for k in i.kb.nccl_knobs
              if k.kind == "tuning" and k.name in admin}  # fmt: skip
    if tuning:
        yield i.finding(
            "nccl-tuning-knobs",
            f"{', '.join(f'{k}={v}' for k, v in tuning.items())} set in NCCL configuration",
            {"nccl": sorted(tuning)},
        )
    if h.nccl_settings.get("NCCL_P2P_DISABLE") == "1":
        yield i.finding("nccl-p2p-disabled", "", {"nccl.NCCL_P2P_DISABLE": "1"})


def check_kernel_log(i: Inputs) -> Iterator[Finding]:
    h = i.host
    if h.xid:
        yield i.finding(
            "xid-errors", f"{h.xid} Xid errors in the kernel log", {"kernel_log.xid": h.xid}
        )
    if h.aer:
        yield i.finding(
            "pcie-aer-errors", f"{h.aer} AER errors in the kernel log", {"kernel_log.aer": h.aer}
        )


def check_host_state(i: Inputs) -> Iterator[Finding]:
    h = i.host
    if h.gpu_processes:
        yield i.finding("gpu-processes-running", "", {"gpu_processes": h.gpu_processes})
    if h.from_container:
        return  # the container's apt and Secure Boot view say nothing about its host
    if h.unattended_touches_nvidia:
        yield i.finding(
            "unattended-upgrades-nvidia", "", {"unattended_upgrades.nvidia_blacklisted": False}
        )
    if h.secure_boot and h.dkms_nvidia:
        yield i.finding("secure-boot-dkms", "", {"secure_boot.enabled": True})


def check_probe(i: Inputs) -> Iterator[Finding]:
    v = i.verdict
    if not v:
        return
    broke = printed_none(v)
    if broke:
        yield i.finding("probe-printed-none", broke, {"probe.error": broke})
        return
    short = cut_short(v)
    if short:
        yield i.finding("probe-cut-short", short, {"probe.stalled": v.get("stalled")})
        return
    kind = v.get("verdict")
    if kind == "healthy":
        yield i.finding("probe-healthy", "", {"probe.verdict": kind})
    elif kind == "hung":
        st = v.get("stalled") or {}
        ranks = f" on ranks {st.get('ranks')}" if st.get("ranks") else ""
        yield i.finding(
            "probe-hung",
            one_line(f"probe stalled in {st.get('phase')}{ranks}", 400),
            {"probe.stalled": st},
        )
    elif kind == "failed":
        where = (v.get("failed_in") or {}).get("phase")
        said = v.get("error") or (f"in {where} (no error text)" if where else "(no error text)")
        yield i.finding(
            "probe-failed",
            one_line(f"probe failed: {said}", 2000),
            {"probe.error": v.get("error")},
        )
    elif kind == "degraded":
        causes = [c.get("id") for c in v.get("causes") or [] if isinstance(c, dict)]
        yield i.finding("probe-degraded", "", {"probe.causes": causes})
    single = v.get("single_gpu") or {}
    on_gpu = single.get("device") != "cpu"  # a --cpu baseline is one CPU rank, not a GPU
    if kind in ("hung", "failed", "degraded") and single.get("verdict") == "healthy" and on_gpu:
        yield i.finding("single-gpu-fine", "", {"probe.single_gpu": single})


CHECKS: tuple[FactCheck, ...] = (
    check_gpus,
    check_probe_measured,
    check_gathered_in,
    check_gpus_unreachable,
    check_driver_mismatch,
    check_driver_support,
    check_kernel,
    check_stack,
    check_p2p_path,
    check_container,
    check_fabricmanager,
    check_fourth_gen_nvswitch,
    check_driver_issues,
    check_nccl_issues,
    check_nccl,
    check_kernel_log,
    check_host_state,
    check_probe,
)


def findings(
    host: Host, verdict: dict[str, Any] | None, kb: KnowledgeBase, rules: Rules, day: date
) -> list[Finding]:
    inputs = Inputs(host, verdict, kb, rules, stack(host, kb), day)
    if host.gpu_count == 0:
        return [inputs.finding("no-gpu", "", {"gpus": []})]
    return [f for check in CHECKS for f in check(inputs)]


def shares_switch(host: Host) -> bool:
    """GPUs share a PCIe switch (PIX/PXB): where NCCL's docs say ACS breaks P2P most often."""
    return bool(host.behind_switch) or host.worst_link in ("PIX", "PXB")


def known_driver_issues(host: Host, kb: KnowledgeBase) -> list[DriverIssue]:
    """Release-note problems of the installed driver on this platform (NVSwitch or not, the GPUs'
    architectures); what the probe shows is matched later (engine/conditions.py)."""
    if host.driver is None:
        return []
    archs = tuple(a.name for a in (kb.arch_for_cc(cc) for cc in host.compute_caps) if a)
    return [
        issue
        for issue in kb.driver_issues
        if issue.matches(host.driver) and issue.holds_on(host.nvswitch, archs)
    ]
