"""`gpufix preflight`: quick checks on the training host itself, before a job starts.

No Ansible: facts come from the facts module run in this process (or a saved snapshot), rules
from the knowledge base. Each check is a small function of (facts, kb, env) -> CheckResult.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from gpufix import versions
from gpufix.engine.kb import KnowledgeBase
from gpufix.engine.kb import load as load_kb
from gpufix.errors import EXIT_OK, GpufixError, InvalidInput
from gpufix.facts.local import gather_local
from gpufix.facts.snapshot import (
    Snapshot,
    get,
    is_unknown,
    known,
    load_snapshot,
    now_utc,
    unknown_reason,
    validate,
)
from gpufix.inputs import one_line
from gpufix.nccl_env import DEBUG_KNOBS, P2P_DISABLE_VAR

EXIT_FAILED = 1  # a check failed (the brief's contract, as for `gpufix lint`)
STATUSES = ("pass", "warn", "fail", "skip")
NO_GPU = "no NVIDIA GPU on this host"
MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class ShmPolicy:
    """How much /dev/shm a multi-GPU job needs: a floor that fails, a per-GPU size that warns."""

    fail_below: int
    warn_below_per_gpu: int
    source: str


# NCCL keeps its shared-memory transport and proxy buffers in /dev/shm; Docker's default is
# 64 MiB, where NCCL fails with "Error while creating shared memory segment". NCCL's troubleshooting
# guide asks containers for --shm-size=1g (or --ipc=host); PyTorch's DataLoader workers pass
# batches through /dev/shm too, so we ask 1 GiB per GPU and fail under 256 MiB (4x Docker's default).
SHM_POLICY = ShmPolicy(
    fail_below=256 * MIB,
    warn_below_per_gpu=1 * GIB,
    source="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html "
    "(Docker: --shm-size=1g --ulimit memlock=-1); "
    "https://docs.docker.com/reference/cli/docker/container/run/ (--shm-size, default 64m); "
    "https://github.com/pytorch/pytorch#docker-image (DataLoader workers use shared memory)",
)


@dataclass(frozen=True)
class CheckResult:
    id: str
    status: str  # pass | warn | fail | skip
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "message": self.message,
            "evidence": dict(self.evidence),
        }


@dataclass(frozen=True)
class Report:
    host: str
    source: str  # "local" or the snapshot file it was read from
    checks: tuple[CheckResult, ...]

    @property
    def status(self) -> str:
        seen = {c.status for c in self.checks}
        return next((s for s in ("fail", "warn", "pass") if s in seen), "skip")

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.status == "fail" else EXIT_OK

    def check(self, check_id: str) -> CheckResult:
        return next(c for c in self.checks if c.id == check_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "gpufix-preflight",
            "version": 1,
            "host": self.host,
            "source": self.source,
            "status": self.status,
            "checks": [c.to_dict() for c in self.checks],
        }


Env = Mapping[str, str] | None  # None: use the environment recorded in the facts
CheckFn = Callable[[Mapping[str, Any], KnowledgeBase, Env], CheckResult]


def _gpus(facts: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]] | None, str | None]:
    """(gpus, None) when known; (None, why we skip) when there are none or we cannot tell."""
    gpus = facts.get("gpus")
    if is_unknown(gpus):
        return None, f"could not tell whether this host has a GPU: {unknown_reason(gpus)}"
    if not gpus:
        return None, NO_GPU
    return list(gpus), None


# ------------------------------------------------------------------------------------ checks


def _gpu_count(n: int) -> str:
    return "1 GPU" if n == 1 else f"{n} GPUs"


def check_kernel(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    cid = "kernel"
    rule = kb.accelerate_kernel_check
    running = get(facts, "kernel.running")
    k = versions.kernel(running)
    if k is None:
        why = (
            unknown_reason(get(facts, "kernel", {}).get("running")) if facts.get("kernel") else None
        )
        return CheckResult(cid, "skip", f"running kernel unknown: {why or 'not reported'}")
    floor = versions.kernel(rule.threshold)
    assert floor is not None, rule.threshold
    evidence: dict[str, Any] = {
        "running": running,
        "threshold": rule.threshold,
        "source": rule.source,
    }
    if k >= floor:
        return CheckResult(
            cid, "pass", f"kernel {running} is at or above {rule.threshold}", evidence
        )
    msg = (
        f"kernel {running} is below {rule.threshold}, the minimum accelerate >= "
        f"{rule.since_accelerate} warns about; this is a risk factor, not a diagnosed cause of "
        "hangs: check P2P/ACS, /dev/shm and the driver first"
    )
    release = kb.ubuntu(str(get(facts, "os.codename", "")))
    hwe = versions.kernel(release.hwe_kernel) if release and release.hwe_kernel else None
    if release and hwe is not None and hwe < floor:
        msg += (
            f"; Ubuntu {release.version_id}'s newest supported kernel is {release.hwe_kernel}, "
            "so a kernel upgrade cannot clear this warning there"
        )
        evidence["release_hwe_kernel"] = release.hwe_kernel
    return CheckResult(cid, "warn", msg, evidence)


def _cuda_of_env(
    packages: Mapping[str, Any], kb: KnowledgeBase
) -> tuple[tuple[int, int] | None, int | None, str]:
    """(cuda (major, minor), cuda major, how we know) for the torch in one environment."""
    torch = str(packages.get("torch"))
    tag = versions.local_tag(torch)
    cuda = versions.cuda_from_tag(tag)
    if cuda:
        return cuda, cuda[0], f"torch {torch}"
    if tag == "cpu" or (tag or "").startswith("rocm"):
        return None, None, f"torch {torch} is not a CUDA build"
    # NGC containers ship source builds ('2.1.0a0+32f93b1': a git hash, no CUDA tag); the
    # knowledge base names the image, and so the CUDA, of the ones it knows.
    image = next((i for i in kb.container_images if i.torch == torch), None)
    mm = versions.major_minor(image.cuda) if image else None
    if image and mm:
        return mm, mm[0], f"torch {torch} of {image.ref}"
    # PyPI's default Linux wheels carry no tag; their NCCL dependency names the CUDA major.
    for name, version in sorted(packages.items()):
        known_version = isinstance(version, str) and version
        if name.startswith("nvidia-nccl-cu") and known_version and name[14:].isdigit():
            return None, int(name[14:]), f"torch {torch} with {name} {version}"
    if tag:
        why = "its CUDA version is not in the version string"
        return (
            None,
            None,
            f"torch {torch} is a source build the knowledge base does not list: {why}",
        )
    return None, None, f"torch {torch} names no CUDA version"


def check_driver_cuda(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    cid = "driver-cuda"
    _, skip = _gpus(facts)
    if skip == NO_GPU:
        return CheckResult(cid, "skip", NO_GPU)
    driver = get(facts, "driver.userspace") or get(facts, "driver.kernel_module")
    if versions.driver(driver) is None:
        return CheckResult(cid, "skip", "NVIDIA driver version unknown")
    envs = [e for e in known(facts.get("python_envs"), []) if get(e, "packages.torch")]
    if not envs:
        return CheckResult(cid, "skip", "no Python environment with torch was found")
    own = get(facts, "python.executable")
    envs = [e for e in envs if e.get("python") == own] or envs
    results = [_driver_vs_env(str(driver), e, kb) for e in envs]
    worst = next(
        (r for s in ("fail", "warn", "pass", "skip") for r in results if r[0] == s), results[0]
    )
    evidence = {"driver": driver, "environments": [r[2] for r in results]}
    return CheckResult(cid, worst[0], worst[1], evidence)


def _driver_vs_env(
    driver: str, env: Mapping[str, Any], kb: KnowledgeBase
) -> tuple[str, str, dict[str, Any]]:
    packages = known(env.get("packages"), {})
    cuda, major, how = _cuda_of_env(packages, kb)
    ev: dict[str, Any] = {"python": env.get("python"), "torch": packages.get("torch")}
    if major is None:
        return "skip", how, ev
    floor = kb.cuda_minor_compat_floor(major)
    toolkit = kb.cuda_min_driver(f"{cuda[0]}.{cuda[1]}") if cuda else None
    cuda_text = f"CUDA {cuda[0]}.{cuda[1]}" if cuda else f"CUDA {major}.x"
    ev.update({"cuda": cuda_text, "toolkit_min_driver": toolkit, "minor_compat_floor": floor})
    have = versions.driver(driver)
    assert have is not None
    if floor is None and toolkit is None:
        return "skip", f"{how}: the knowledge base has no driver minimum for {cuda_text}", ev
    if toolkit and have >= versions.driver(toolkit):  # type: ignore[operator]
        return "pass", f"driver {driver} meets {cuda_text} ({how}): needs >= {toolkit}", ev
    if floor and have >= versions.driver(floor):  # type: ignore[operator]
        if toolkit is None:
            return "pass", f"driver {driver} meets the {cuda_text} floor {floor} ({how})", ev
        return (
            "warn",
            f"driver {driver} is below {toolkit} for {cuda_text} ({how}) but above the "
            f"minor-version compatibility floor {floor}: it runs, without features that need "
            "the newer driver (such as PTX JIT of newer code)",
            ev,
        )
    need = floor or toolkit
    return (
        "fail",
        f"driver {driver} is too old for {cuda_text} ({how}): it needs at least {need}; "
        "upgrade the driver or install a torch built for an older CUDA",
        ev,
    )


def parse_visible_devices(value: str, gpus: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What CUDA makes of CUDA_VISIBLE_DEVICES: it reads entries in order and stops at the
    first one that is invalid (CUDA C Programming Guide, "CUDA Environment Variables")."""
    count = len(gpus)
    uuids = [u if isinstance(u := g.get("uuid"), str) else "" for g in gpus]
    visible: list[int] = []
    invalid: str | None = None
    unchecked: str | None = None
    for raw in value.split(","):
        entry = raw.strip()
        index: int | None = None
        if entry.lstrip("-").isdigit():
            index = int(entry)
            index = index if 0 <= index < count else None
        elif entry.startswith("GPU-"):
            hits = [i for i, u in enumerate(uuids) if u and u.startswith(entry)]
            if not any(uuids):
                unchecked = entry
                break
            index = hits[0] if len(hits) == 1 else None
        elif entry.startswith("MIG-"):
            unchecked = entry
            break
        if index is None or index in visible:
            invalid = entry
            break
        visible.append(index)
    return {"visible": visible, "invalid": invalid, "unchecked": unchecked, "gpu_count": count}


UNREAD = {"unknown": "not read"}  # get()'s default where a section or value is unknown


def check_visible_devices(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    cid = "visible-devices"
    gpus, skip = _gpus(facts)
    if gpus is None:
        return CheckResult(cid, "skip", skip or NO_GPU)
    if env is None and is_unknown(get(facts, "env.CUDA_VISIBLE_DEVICES", UNREAD)):
        return CheckResult(cid, "skip", "CUDA_VISIBLE_DEVICES was not read")
    value = (
        env.get("CUDA_VISIBLE_DEVICES")
        if env is not None
        else get(facts, "env.CUDA_VISIBLE_DEVICES")
    )
    n = len(gpus)
    if value is None:
        return CheckResult(
            cid, "pass", f"CUDA_VISIBLE_DEVICES is unset: all {_gpu_count(n)} visible"
        )
    ev: dict[str, Any] = {"CUDA_VISIBLE_DEVICES": value, "gpu_count": n}
    if not value.strip():
        return CheckResult(
            cid, "fail", "CUDA_VISIBLE_DEVICES is set but empty: it hides every GPU", ev
        )
    parsed = parse_visible_devices(value, gpus)
    ev.update(parsed)
    shown = ",".join(map(str, parsed["visible"])) or "none"
    if parsed["invalid"] is not None:
        return CheckResult(
            cid,
            "fail",
            f"CUDA_VISIBLE_DEVICES={value}: entry {parsed['invalid']!r} is not one of this "
            f"host's {_gpu_count(n)} (0-{n - 1}) or repeats one; CUDA stops at it, so visible: {shown}",
            ev,
        )
    if parsed["unchecked"] is not None:
        return CheckResult(
            cid,
            "warn",
            f"CUDA_VISIBLE_DEVICES={value}: cannot check {parsed['unchecked']!r} against this "
            f"host's GPUs; visible before it: {shown}",
            ev,
        )
    return CheckResult(cid, "pass", f"CUDA_VISIBLE_DEVICES={value}: GPUs {shown} of {n}", ev)


def check_shm(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    cid = "shm"
    gpus, skip = _gpus(facts)
    if gpus is None:
        return CheckResult(cid, "skip", skip or NO_GPU)
    shm = facts.get("shm")
    if is_unknown(shm) or not isinstance(shm, Mapping):
        return CheckResult(cid, "skip", f"/dev/shm size unknown: {unknown_reason(shm)}")
    size = int(shm["size_bytes"])
    want = SHM_POLICY.warn_below_per_gpu * len(gpus)
    ev = {
        "path": shm.get("path"),
        "size_bytes": size,
        "gpus": len(gpus),
        "fail_below": SHM_POLICY.fail_below,
        "warn_below": want,
        "source": SHM_POLICY.source,
    }
    have = f"{size / MIB:.0f} MiB"
    if size < SHM_POLICY.fail_below:
        return CheckResult(
            cid,
            "fail",
            f"/dev/shm is {have}, under {SHM_POLICY.fail_below // MIB} MiB: NCCL fails to create "
            "its shared-memory segments (Docker's default is 64 MiB); run the container with "
            "--ipc=host or --shm-size=1g or more",
            ev,
        )
    if size < want:
        return CheckResult(
            cid,
            "warn",
            f"/dev/shm is {have}, under 1 GiB per GPU ({want // GIB} GiB for {len(gpus)}): "
            "NCCL and DataLoader workers may run out",
            ev,
        )
    return CheckResult(cid, "pass", f"/dev/shm is {have} for {_gpu_count(len(gpus))}", ev)


def _nccl_settings(facts: Mapping[str, Any], env: Env) -> list[tuple[str, str, str]]:
    """(where, key, value) for NCCL config files and the environment."""
    out: list[tuple[str, str, str]] = []
    nccl = facts.get("nccl")
    files = nccl.get("files", {}) if isinstance(nccl, Mapping) and not is_unknown(nccl) else {}
    for path, settings in sorted(files.items()):
        if isinstance(settings, Mapping) and not is_unknown(settings):
            out.extend((path, k, str(v)) for k, v in sorted(settings.items()))
    if env is not None:
        environ = {k: v for k, v in env.items() if k in DEBUG_KNOBS or k.startswith("NCCL_")}
    else:
        environ = dict(nccl.get("env", {})) if isinstance(nccl, Mapping) else {}
    out.extend(("environment", k, str(v)) for k, v in sorted(environ.items()))
    return out


def check_nccl_config(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    cid = "nccl-config"
    if is_unknown(facts.get("nccl")) and env is None:
        return CheckResult(cid, "skip", f"NCCL settings unknown: {unknown_reason(facts['nccl'])}")
    problems: list[str] = []
    found = []
    without_p2p = _gpus_without_p2p(facts, kb)
    for where, key, value in _nccl_settings(facts, env):
        wanted = DEBUG_KNOBS.get(key, ())
        debug = key in DEBUG_KNOBS and (wanted is None or value.strip().upper() in wanted)
        p2p_off = key == P2P_DISABLE_VAR and value.strip() not in ("", "0")
        if debug:
            problems.append(f"{key}={value} in {where} (a debugging setting)")
        elif p2p_off and not without_p2p:
            problems.append(
                f"{key}={value} in {where} (a workaround: costs bandwidth, hides the cause)"
            )
        found.append({"where": where, "key": key, "value": value})
    ev: dict[str, Any] = {"settings": found}
    if without_p2p:
        ev["gpus_without_p2p"] = True  # P2P off is the fix there, or changes nothing
    if problems:
        return CheckResult(cid, "warn", "; ".join(problems), ev)
    return CheckResult(cid, "pass", "no NCCL debug settings or P2P workaround in force", ev)


def _gpus_without_p2p(facts: Mapping[str, Any], kb: KnowledgeBase) -> bool:
    """The GPUs cannot do PCIe P2P (the host's reading, or unread the model list): there
    NCCL_P2P_DISABLE=1 is the fix or changes nothing, not a workaround (engine.diagnose)."""
    from gpufix.engine.diagnose import no_p2p
    from gpufix.facts.host import from_facts

    return no_p2p(from_facts(facts), kb)


def check_driver_mismatch(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    cid = "driver-mismatch"
    driver = facts.get("driver")
    if is_unknown(driver) or not isinstance(driver, Mapping):
        return CheckResult(cid, "skip", f"driver state unknown: {unknown_reason(driver)}")
    module = known(driver.get("kernel_module"))
    user = known(driver.get("userspace"))
    ev = {"kernel_module": module, "userspace": user, "nvml_error": driver.get("nvml_error")}
    differ = module and user and versions.driver(module) != versions.driver(user)
    if driver.get("mismatch") is True or differ:
        return CheckResult(
            cid,
            "fail",
            f"NVIDIA kernel module {module or '?'} and user-space libraries {user or '?'} differ "
            "(NVML: Driver/library version mismatch): reboot to load the installed module, then "
            "hold every nvidia-*/libnvidia-* package so upgrades cannot split them again",
            ev,
        )
    if driver.get("mismatch") is False or (module and user):
        return CheckResult(cid, "pass", f"kernel module and libraries agree ({module})", ev)
    _, skip = _gpus(facts)
    if skip == NO_GPU and not module:
        return CheckResult(cid, "skip", NO_GPU)
    return CheckResult(cid, "skip", "could not compare the kernel module with the libraries", ev)


def check_acs_iommu(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    """PCIe ACS redirect above the GPUs, or a translated IOMMU, can stall NCCL's P2P: the
    engine's findings `acs-enabled-above-gpus` and `iommu-translated`, with their sources."""
    from gpufix.engine.diagnose import shares_switch
    from gpufix.engine.rules import load as load_rules
    from gpufix.facts.host import from_facts

    cid = "acs-iommu"
    gpus, skip = _gpus(facts)
    if gpus is None:
        return CheckResult(cid, "skip", skip or NO_GPU)
    if len(gpus) < 2:
        return CheckResult(cid, "skip", "one GPU: no peer-to-peer traffic between GPUs")
    host, rules = from_facts(facts), load_rules()
    ev: dict[str, Any] = {
        "acs_bridges": list(host.acs_bridges),
        "iommu_mode": host.iommu_mode,
        "topology_worst": host.worst_link,
    }
    problems = []
    if host.acs_bridges:
        rule = rules.rule("acs-enabled-above-gpus")
        where = (
            "P2P between GPUs on one switch is bounced up to the root complex"
            if shares_switch(host)
            else "on root ports it routes P2P through the IOMMU"
        )
        problems.append(
            f"ACS redirect is on at {', '.join(host.acs_bridges)} above the GPUs: {where}; "
            "NCCL can hang or run slowly there (`gpufix plan` weighs pcie-acs)"
        )
        ev["acs_source"] = rule.source
    if host.iommu_mode == "translated":
        rule = rules.rule("iommu-translated")
        problems.append(
            "IOMMU is in translated mode: NCCL recommends pass-through (iommu=pt) or off for P2P"
        )
        ev["iommu_source"] = rule.source
    if problems:
        return CheckResult(cid, "warn", "; ".join(problems), ev)
    if not host.acs_known:
        why = unknown_reason(get(facts, "pcie", {}).get("bridges")) if facts.get("pcie") else None
        return CheckResult(
            cid,
            "skip",
            f"ACS state of the bridges above the GPUs unknown ({why or 'not reported'}): "
            "reading ACS registers needs root",
            ev,
        )
    iommu = host.iommu_mode or "unknown"
    return CheckResult(cid, "pass", f"no ACS redirect above the GPUs; IOMMU {iommu}", ev)


def _engine(facts: Mapping[str, Any], kb: KnowledgeBase) -> Any:
    """The decision engine's inputs for these facts, as `gpufix plan` builds them (no verdict,
    judged today), so a check and the plan read the facts with one rule."""
    from datetime import date

    from gpufix.engine.diagnose import Inputs
    from gpufix.engine.rules import load as load_rules
    from gpufix.engine.stack import stack
    from gpufix.facts.host import from_facts

    host = from_facts(facts)
    return Inputs(host, None, kb, load_rules(), stack(host, kb), date.today())


def check_fabric_manager(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    """An NVSwitch system needs fabric manager running at the driver's own version, or CUDA and
    NCCL stall or fail at start-up: the engine's `fabricmanager-missing` and
    `fabricmanager-version-mismatch`, with their source."""
    from gpufix.engine.diagnose import check_fabricmanager

    cid = "fabric-manager"
    gpus, skip = _gpus(facts)
    if gpus is None:
        return CheckResult(cid, "skip", skip or NO_GPU)
    i = _engine(facts, kb)
    h = i.host
    if not h.nvswitch:
        return CheckResult(cid, "skip", "no NVSwitch on this host: fabric manager not needed")
    if h.from_container:
        return CheckResult(
            cid, "skip", "inside a container: the host's fabric manager is not visible here"
        )
    if not h.fabricmanager_known:
        return CheckResult(cid, "skip", "fabric manager's state was not read")
    ev = {"fabricmanager": h.fabricmanager, "running": h.fabricmanager_running, "driver": h.driver}
    found = list(check_fabricmanager(i))
    if found:
        ev["source"] = found[0].source
        msg = "; ".join(f.message for f in found)
        return CheckResult(cid, "fail", f"{msg}: NCCL and CUDA stall or fail at start-up", ev)
    return CheckResult(cid, "pass", f"fabric manager {h.fabricmanager} running, as the driver", ev)


def check_gpu_arch(facts: Mapping[str, Any], kb: KnowledgeBase, env: Env) -> CheckResult:
    """The torch build must carry kernels for every GPU: the engine's `gpu-arch-dropped` (fail:
    "no kernel image is available") and `gpu-arch-newer-than-wheel` (warn), with their source."""
    from gpufix.engine.diagnose import check_stack

    cid = "gpu-arch"
    gpus, skip = _gpus(facts)
    if gpus is None:
        return CheckResult(cid, "skip", skip or NO_GPU)
    i = _engine(facts, kb)
    torch = i.host.env.torch if i.host.env else None
    if not torch:
        return CheckResult(cid, "skip", "no torch in the Python environments read")
    if not i.stack.cuda:
        return CheckResult(cid, "skip", f"torch {torch}: the CUDA it was built for is unknown")
    if not i.host.compute_caps:
        return CheckResult(cid, "skip", "the GPUs' compute capability is unknown")
    ev = {"torch": torch, "compute_capability": list(i.host.compute_caps)}
    # check_stack yields at most one of the two: a build too new or too old for the GPUs
    arch = [f for f in check_stack(i) if f.id in ("gpu-arch-dropped", "gpu-arch-newer-than-wheel")]
    if not arch:
        return CheckResult(cid, "pass", f"torch {torch} has kernels for every GPU here", ev)
    ev["source"] = arch[0].source
    status = "fail" if arch[0].id == "gpu-arch-dropped" else "warn"
    return CheckResult(cid, status, f"torch {torch}: {arch[0].message}", ev)


CHECKS: tuple[tuple[str, CheckFn], ...] = (
    ("kernel", check_kernel),
    ("driver-mismatch", check_driver_mismatch),
    ("driver-cuda", check_driver_cuda),
    ("visible-devices", check_visible_devices),
    ("shm", check_shm),
    ("acs-iommu", check_acs_iommu),
    ("nccl-config", check_nccl_config),
    ("fabric-manager", check_fabric_manager),
    ("gpu-arch", check_gpu_arch),
)
CHECK_IDS: tuple[str, ...] = tuple(cid for cid, _ in CHECKS)

_PROBE_STATUS = {
    "healthy": "pass",
    "degraded": "warn",
    "hung": "fail",
    "failed": "fail",
    "not-applicable": "skip",
}


def check_probe(
    facts: Mapping[str, Any],
    env: Env = None,
    args: Sequence[str] = ("--quick", "--no-experiments"),
    cpu: bool = False,
) -> CheckResult:
    """Run the multi-GPU probe in quick mode; only when asked, as it starts a process per GPU.

    `cpu` runs it with gloo on the CPU (for hosts without a GPU, and for tests)."""
    cid = "probe"
    if not cpu:
        gpus, skip = _gpus(facts)
        if gpus is None:
            return CheckResult(cid, "skip", skip or NO_GPU)
    try:
        from gpufix.probe.local import run_local, summarize
    except ImportError as e:
        return CheckResult(cid, "skip", f"probe unavailable: {e}")
    try:
        verdict = run_local(args=[*args, *(["--cpu"] if cpu else [])], env=env)
    except GpufixError as e:
        return CheckResult(cid, "fail", f"probe: {e}")
    name = str(verdict.get("verdict"))
    status = _PROBE_STATUS.get(name, "fail")
    return CheckResult(cid, status, f"probe: {summarize(verdict)}", {"verdict": verdict})


# ------------------------------------------------------------------------------------ run


def _facts_of(facts: Snapshot | Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """(host, facts) from a Snapshot, a snapshot document or a bare facts mapping."""
    if isinstance(facts, Snapshot):
        return facts.host, facts.facts
    if facts.get("format") == "gpufix-facts":
        validate(facts)
        return str(facts["host"]), facts["facts"]
    doc = {
        "format": "gpufix-facts",
        "version": 1,
        "host": "facts",
        "gathered_at": now_utc(),
        "facts": facts,
    }
    validate(doc)
    return "facts", facts


def run(
    facts: Snapshot | Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    probe: bool = False,
    kb: KnowledgeBase | None = None,
    source: str | None = None,
) -> Report:
    """Run every check. Without facts, gather them here (and read CUDA_VISIBLE_DEVICES / NCCL_*
    from this process's environment unless `env` is given); with facts, use the environment
    they recorded unless `env` is given."""
    probe_env = env  # the probe inherits this process's environment unless told otherwise
    if kb is None:
        kb = load_kb()
    if facts is None:
        facts = gather_local(python_envs=[sys.executable])
        env = dict(os.environ) if env is None else env
        source = source or "local"
    host, data = _facts_of(facts)
    results = [fn(data, kb, env) for _, fn in CHECKS]
    if probe:
        results.append(check_probe(data, probe_env))
    return Report(host, source or "facts", tuple(results))


def format_text(report: Report) -> str:
    """One line per check; messages quote facts, so control characters are shown escaped."""
    from gpufix.cli.render import one_line

    width = max(len(c.id) for c in report.checks)
    lines = [f"{c.status.upper():4}  {c.id:<{width}}  {one_line(c.message)}" for c in report.checks]
    counts = {s: sum(c.status == s for c in report.checks) for s in STATUSES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines.append(f"{one_line(report.host)}: {report.status} ({summary})")
    return "\n".join(lines) + "\n"


def main_preflight(
    json_out: bool = False,
    probe: bool = False,
    facts_file: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Entry point for `gpufix preflight [--json] [--probe] [--facts FILE]`:
    0 no check failed (warnings allowed), 1 a check failed, 3 bad input."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        snapshot = None
        if facts_file is not None and probe:
            # the probe runs on this machine: its result would stand in the snapshot's report
            raise InvalidInput(
                "--facts and --probe: the probe runs on this machine, not the snapshot's host; "
                "give one of them"
            )
        if facts_file is not None:
            snapshot = load_snapshot(facts_file)
        report = run(snapshot, probe=probe, source=facts_file)
    except GpufixError as e:
        print(f"gpufix preflight: error: {one_line(str(e), 4000)}", file=err)
        return e.exit_code
    if json_out:
        out.write(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    else:
        out.write(format_text(report))
    return report.exit_code
