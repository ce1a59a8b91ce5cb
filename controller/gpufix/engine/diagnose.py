"""Findings: what the facts and the probe verdict say is wrong or risky, each with its evidence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufix import versions
from gpufix.engine.plan import Finding
from gpufix.engine.rules import Rules
from gpufix.facts.host import Host

DEBUG_KNOBS = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")


@dataclass(frozen=True)
class Stack:
    """Whether the installed torch wheel can run on this driver and these GPUs."""

    cuda: tuple[int, int] | None
    driver_ok: bool | None  # None: unknown driver or no CUDA wheel
    via_minor_compat: bool
    required_driver: str | None
    arch_problem: str | None  # "dropped" | "newer" | None


def required_driver(kb: Any, cuda: tuple[int, int]) -> tuple[str | None, str | None]:
    """(toolkit minimum, minor-version-compatibility floor) for a CUDA major.minor."""
    return kb.cuda_min_driver(f"{cuda[0]}.{cuda[1]}"), kb.cuda_minor_compat_floor(cuda[0])


def driver_runs_cuda(
    kb: Any, driver: str | None, cuda: tuple[int, int]
) -> tuple[bool | None, bool]:
    """(runs, only through minor-version compatibility)."""
    if driver is None:
        return None, False
    toolkit_min, floor = required_driver(kb, cuda)
    if toolkit_min and versions.at_least(driver, toolkit_min):
        return True, False
    if floor and versions.at_least(driver, floor):
        return True, True
    if toolkit_min is None and floor is None:
        return None, False
    return False, False


def arch_problem(kb: Any, caps: tuple[str, ...], cuda: tuple[int, int]) -> str | None:
    cu = versions.parse(f"{cuda[0]}.{cuda[1]}")
    for cc in caps:
        arch = kb.arch_for_cc(cc)
        if arch is None or cu is None:
            continue
        if arch.last_cuda and cu > versions.parse(arch.last_cuda):  # type: ignore[operator]
            return "dropped"
        first = kb.first_cuda_for_cc(cc)
        if first and cu < versions.parse(first):  # type: ignore[operator]
            return "newer"
    return None


def stack(host: Host, kb: Any) -> Stack:
    cuda = host.torch_cuda
    if cuda is None:
        return Stack(None, None, False, None, None)
    ok, compat = driver_runs_cuda(kb, host.driver, cuda)
    toolkit_min, floor = required_driver(kb, cuda)
    return Stack(cuda, ok, compat, floor or toolkit_min, arch_problem(kb, host.compute_caps, cuda))


def _f(rules: Rules, rid: str, message: str, evidence: dict[str, Any], source: str = "") -> Finding:
    r = rules.rule(rid)
    return Finding(rid, r.severity, message or r.title, evidence, source or r.source)


def findings(host: Host, verdict: dict[str, Any] | None, kb: Any, rules: Rules) -> list[Finding]:
    out: list[Finding] = []
    add = out.append
    if host.gpu_count is None:
        add(_f(rules, "gpus-unknown", "", {"gpus": "unknown"}))
    elif host.gpu_count == 0:
        add(_f(rules, "no-gpu", "", {"gpus": []}))
        return out
    elif host.gpu_count == 1:
        add(_f(rules, "single-gpu-host", "", {"gpus": list(host.gpu_names)}))

    if host.driver_mismatch or (host.nvml_error and "mismatch" in host.nvml_error.lower()):
        add(
            _f(
                rules,
                "driver-library-mismatch",
                f"kernel module {host.driver} but userspace {host.driver_userspace}: "
                "a reboot (or module reload) is needed, and a hold keeps it from recurring",
                {
                    "driver.kernel_module": host.driver,
                    "driver.userspace": host.driver_userspace,
                    "driver.nvml_error": host.nvml_error,
                },
            )
        )

    check = kb.accelerate_kernel_check
    if host.kernel and versions.at_least(host.kernel, check.threshold) is False:
        add(
            _f(
                rules,
                "kernel-below-accelerate-threshold",
                f"kernel {host.kernel} is below {check.threshold}, the minimum accelerate "
                f">= {check.since_accelerate} recommends; its cause was never found, so this is a "
                "risk factor, not the diagnosis",
                {"kernel.running": host.kernel},
                check.source,
            )
        )
        rel = kb.ubuntu(host.codename) if host.codename else None
        if rel and rel.hwe_kernel and versions.major_minor(host.kernel) is not None:
            newest = rel.hwe_kernel
            if versions.major_minor(host.kernel) >= versions.major_minor(newest):  # type: ignore[operator]
                add(
                    _f(
                        rules,
                        "kernel-at-release-ceiling",
                        f"{host.kernel} is already {rel.codename}'s newest supported series "
                        f"({newest}); no supported kernel >= {check.threshold} exists for it",
                        {"kernel.running": host.kernel, "os.codename": host.codename},
                        rel.source,
                    )
                )

    st = stack(host, kb)
    if host.env and not host.env.torch:
        add(_f(rules, "no-torch", "", {"python_envs": host.env.python}))
    if st.cuda and st.driver_ok is False:
        add(
            _f(
                rules,
                "torch-cuda-needs-newer-driver",
                f"torch {host.env.torch if host.env else ''} is built for CUDA "
                f"{st.cuda[0]}.{st.cuda[1]}, which needs driver >= {st.required_driver}; "
                f"the host has {host.driver}",
                {"python_envs.torch": host.env.torch if host.env else None, "driver": host.driver},
            )
        )
    elif st.cuda and st.via_minor_compat:
        add(
            _f(
                rules,
                "torch-cuda-minor-compat",
                f"driver {host.driver} runs CUDA {st.cuda[0]}.{st.cuda[1]} only through "
                "minor-version compatibility (no PTX JIT for newer code)",
                {"driver": host.driver},
            )
        )
    if st.arch_problem == "dropped":
        add(_f(rules, "gpu-arch-dropped", "", {"gpus.compute_capability": list(host.compute_caps)}))
    elif st.arch_problem == "newer":
        add(
            _f(
                rules,
                "gpu-arch-newer-than-wheel",
                "",
                {
                    "gpus.compute_capability": list(host.compute_caps),
                    "torch": host.env and host.env.torch,
                },
            )
        )

    if host.multi_gpu and host.acs_bridges:
        add(
            _f(
                rules,
                "acs-enabled-above-gpus",
                f"ACS redirect is on at {', '.join(host.acs_bridges)} above the GPUs "
                f"(topology {host.worst_link or 'unknown'}): "
                + (
                    "P2P between GPUs on one switch is bounced up to the root complex"
                    if shares_switch(host)
                    else "on root ports it routes P2P through the IOMMU"
                ),
                {"pcie.bridges": list(host.acs_bridges), "topology.worst": host.worst_link},
            )
        )
    if host.multi_gpu and host.iommu_mode == "translated":
        add(_f(rules, "iommu-translated", "", {"iommu.mode": host.iommu_mode}))

    shm_min = rules.thresholds["shm_min_bytes"]
    if host.multi_gpu and host.shm_bytes is not None and host.shm_bytes < shm_min:
        add(
            _f(
                rules,
                "shm-too-small",
                f"/dev/shm is {host.shm_bytes // (1 << 20)} MiB (< {shm_min // (1 << 20)} MiB)",
                {"shm.size_bytes": host.shm_bytes, "containers.in_container": host.in_container},
            )
        )
    if host.in_container and host.net_host is False:
        add(_f(rules, "container-private-network", "", {"containers.net_host": False}))

    if host.nvswitch:
        if not host.fabricmanager or host.fabricmanager_running is False:
            add(
                _f(
                    rules,
                    "fabricmanager-missing",
                    f"fabric manager {'not installed' if not host.fabricmanager else 'not running'} "
                    f"on an NVSwitch system ({host.gpu_count}x {host.gpu_names[0]})",
                    {
                        "fabricmanager.installed": host.fabricmanager,
                        "fabricmanager.running": host.fabricmanager_running,
                    },
                )
            )
        if (
            host.fabricmanager
            and host.driver
            and versions.parse(host.fabricmanager) != versions.parse(host.driver)
        ):
            add(
                _f(
                    rules,
                    "fabricmanager-version-mismatch",
                    f"fabric manager {host.fabricmanager} vs driver {host.driver}",
                    {"fabricmanager.installed": host.fabricmanager, "driver": host.driver},
                )
            )

    for issue in known_driver_issues(host, kb):
        add(
            _f(
                rules,
                "driver-known-issue",
                f"driver {host.driver}: {issue.symptom} (fix: {issue.fix} to branch "
                f"{'/'.join(str(b) for b in issue.good_branches)})",
                {"driver": host.driver, "issue": issue.id},
                issue.source,
            )
        )

    knobs = [k for k in DEBUG_KNOBS if k in host.nccl_settings]
    if knobs:
        add(
            _f(
                rules,
                "nccl-debug-knobs",
                f"{', '.join(knobs)} set in NCCL configuration",
                {"nccl": knobs},
            )
        )
    if host.nccl_settings.get("NCCL_P2P_DISABLE") == "1":
        add(_f(rules, "nccl-p2p-disabled", "", {"nccl.NCCL_P2P_DISABLE": "1"}))
    if host.xid:
        add(
            _f(
                rules,
                "xid-errors",
                f"{host.xid} Xid errors in the kernel log",
                {"kernel_log.xid": host.xid},
            )
        )
    if host.aer:
        add(
            _f(
                rules,
                "pcie-aer-errors",
                f"{host.aer} AER errors in the kernel log",
                {"kernel_log.aer": host.aer},
            )
        )
    if host.gpu_processes:
        add(_f(rules, "gpu-processes-running", "", {"gpu_processes": host.gpu_processes}))
    if host.unattended_touches_nvidia:
        add(
            _f(
                rules,
                "unattended-upgrades-nvidia",
                "",
                {"unattended_upgrades.nvidia_blacklisted": False},
            )
        )
    if host.secure_boot and host.dkms_nvidia:
        add(_f(rules, "secure-boot-dkms", "", {"secure_boot.enabled": True}))

    out.extend(probe_findings(verdict, rules))
    return out


def shares_switch(host: Host) -> bool:
    """GPUs share a PCIe switch (PIX/PXB): where NCCL's docs say ACS breaks P2P most often."""
    return bool(host.behind_switch) or host.worst_link in ("PIX", "PXB")


def known_driver_issues(host: Host, kb: Any) -> list[Any]:
    if host.driver is None:
        return []
    return [issue for issue in kb.driver_issues if issue.matches(host.driver)]


def probe_findings(verdict: dict[str, Any] | None, rules: Rules) -> list[Finding]:
    if not verdict:
        return []
    kind = verdict.get("verdict")
    out = []
    if kind == "healthy":
        out.append(_f(rules, "probe-healthy", "", {"probe.verdict": kind}))
    elif kind == "hung":
        st = verdict.get("stalled") or {}
        out.append(
            _f(
                rules,
                "probe-hung",
                f"probe stalled in {st.get('phase')} on ranks {st.get('ranks')}",
                {"probe.stalled": st},
            )
        )
    elif kind == "failed":
        out.append(
            _f(
                rules,
                "probe-failed",
                f"probe failed: {verdict.get('error')}",
                {"probe.error": verdict.get("error")},
            )
        )
    elif kind == "degraded":
        out.append(
            _f(
                rules,
                "probe-degraded",
                "",
                {"probe.causes": [c.get("id") for c in verdict.get("causes") or []]},
            )
        )
    single = verdict.get("single_gpu") or {}
    if kind in ("hung", "failed", "degraded") and single.get("verdict") == "healthy":
        out.append(_f(rules, "single-gpu-fine", "", {"probe.single_gpu": single}))
    return out
