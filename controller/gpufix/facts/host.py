"""A typed view of one host's facts: the few derived values the decision engine reasons about.

Facts may hold `{"unknown": reason}` anywhere; this module turns them into None so rules
can say "unknown" instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufix import versions
from gpufix.facts.snapshot import get as fget
from gpufix.facts.snapshot import is_unknown

# Kinds of link in `nvidia-smi topo -m`, best first.
_LINK_ORDER = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass(frozen=True)
class PyEnv:
    python: str
    version: str | None
    torch: str | None
    transformers: str | None
    accelerate: str | None


@dataclass(frozen=True)
class Host:
    os_id: str | None
    codename: str | None
    version_id: str | None
    kernel: str | None
    hwe_candidate: str | None  # apt's candidate version of the HWE metapackage
    glibc: str | None
    gpu_count: int | None  # None: could not tell
    gpu_names: tuple[str, ...]
    compute_caps: tuple[str, ...]
    driver: str | None  # kernel module version, else userspace
    driver_userspace: str | None
    driver_mismatch: bool | None
    nvml_error: str | None
    worst_link: str | None
    acs_bridges: tuple[str, ...]  # BDFs of bridges above GPUs with ACS redirect on
    acs_known: bool  # lspci could be read: an empty acs_bridges means "none", not "unknown"
    behind_switch: bool | None
    iommu_mode: str | None
    cpu_vendor: str | None
    shm_bytes: int | None
    in_container: bool | None
    ipc_host: bool | None
    net_host: bool | None
    docker: str | None
    nvidia_ctk: str | None
    fabricmanager: str | None
    fabricmanager_running: bool | None
    secure_boot: bool | None
    dkms_nvidia: bool
    kernel_nvidia_modules: tuple[str, ...]
    pythons: tuple[str, ...]  # versions of interpreters present
    python_paths: dict[str, str]  # "3.8" -> /usr/bin/python3.8
    env: PyEnv | None  # the environment that runs training (first with torch)
    nccl_settings: dict[str, str]
    xid: int | None
    aer: int | None
    gpu_processes: int | None
    unattended_touches_nvidia: bool | None
    interfaces: tuple[str, ...]
    infiniband: tuple[str, ...]

    @property
    def multi_gpu(self) -> bool:
        return (self.gpu_count or 0) > 1

    @property
    def torch_cuda(self) -> tuple[int, int] | None:
        return versions.cuda_from_tag(versions.local_tag(self.env.torch)) if self.env else None

    @property
    def nvswitch(self) -> bool:
        """HGX boards with 8 (or 16) SXM GPUs use NVSwitch, which needs fabric manager."""
        sxm = [n for n in self.gpu_names if "SXM" in n.upper() or "H100 80GB HBM3" in n]
        return len(sxm) >= 8 and (self.worst_link or "").startswith("NV")


def _int(v: Any) -> int | None:
    if v is None or is_unknown(v) or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _str(v: Any) -> str | None:
    if v is None or is_unknown(v):
        return None
    return str(v)


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _worst_link(matrix: Any) -> str | None:
    if not isinstance(matrix, dict):
        return None
    worst = -1
    for row in matrix.values():
        if not isinstance(row, dict):
            continue
        for cell in row.values():
            kind = str(cell)
            for i, prefix in enumerate(_LINK_ORDER):
                if kind.startswith(prefix):
                    worst = max(worst, i)
    return _LINK_ORDER[worst] if worst >= 0 else None


def _env(facts: Mapping[str, Any]) -> PyEnv | None:
    envs = [e for e in _list(fget(facts, "python_envs")) if isinstance(e, dict)]
    if not envs:
        return None
    with_torch = [
        e for e in envs if isinstance(e.get("packages"), dict) and _str(e["packages"].get("torch"))
    ]
    e = (with_torch or envs)[0]
    pk: dict[str, Any] = e["packages"] if isinstance(e.get("packages"), dict) else {}
    return PyEnv(
        python=str(e.get("python")),
        version=_str(e.get("version")),
        torch=_str(pk.get("torch")),
        transformers=_str(pk.get("transformers")),
        accelerate=_str(pk.get("accelerate")),
    )


def from_facts(facts: Mapping[str, Any]) -> Host:
    gpus = fget(facts, "gpus")
    gpu_list = [g for g in _list(gpus) if isinstance(g, dict)]
    gpu_count = None if gpus is None or is_unknown(gpus) else len(gpu_list)
    bridges = [b for b in _list(fget(facts, "pcie.bridges")) if isinstance(b, dict)]
    acs = tuple(
        str(b.get("bdf"))
        for b in bridges
        if b.get("above_gpu") is True and b.get("acs_enabled") is True
    )
    settings: dict[str, str] = {}
    files = fget(facts, "nccl.files")
    if isinstance(files, dict):
        for kv in files.values():
            if isinstance(kv, dict):
                settings.update({str(k): str(v) for k, v in kv.items()})
    env_kv = fget(facts, "nccl.env")
    if isinstance(env_kv, dict):
        settings.update({str(k): str(v) for k, v in env_kv.items()})
    procs = fget(facts, "gpu_processes")
    uu = fget(facts, "unattended_upgrades")
    uu_touch = None
    if isinstance(uu, dict) and isinstance(uu.get("installed"), bool):
        uu_touch = bool(
            uu.get("installed") and uu.get("enabled") and not uu.get("nvidia_blacklisted")
        )
    ifaces = tuple(
        str(i.get("name"))
        for i in _list(fget(facts, "network.interfaces"))
        if isinstance(i, dict) and i.get("up") and i.get("name") not in (None, "lo")
    )
    return Host(
        os_id=_str(fget(facts, "os.id")),
        codename=_str(fget(facts, "os.codename")),
        version_id=_str(fget(facts, "os.version_id")),
        kernel=_str(fget(facts, "kernel.running")),
        hwe_candidate=_str(fget(facts, "kernel.hwe.candidate")),
        glibc=_str(fget(facts, "glibc")),
        gpu_count=gpu_count,
        gpu_names=tuple(str(g.get("name", "")) for g in gpu_list),
        compute_caps=tuple(
            str(g["compute_capability"]) for g in gpu_list if _str(g.get("compute_capability"))
        ),
        driver=_str(fget(facts, "driver.kernel_module")) or _str(fget(facts, "driver.userspace")),
        driver_userspace=_str(fget(facts, "driver.userspace")),
        driver_mismatch=_bool(fget(facts, "driver.mismatch")),
        nvml_error=_str(fget(facts, "driver.nvml_error")),
        worst_link=_str(fget(facts, "topology.worst"))
        or _worst_link(fget(facts, "topology.matrix")),
        acs_bridges=acs,
        acs_known=isinstance(fget(facts, "pcie.bridges"), list),
        behind_switch=_bool(fget(facts, "pcie.gpus_behind_switch")),
        iommu_mode=_str(fget(facts, "iommu.mode")),
        cpu_vendor=_str(fget(facts, "cpu.vendor")),
        shm_bytes=_int(fget(facts, "shm.size_bytes")),
        in_container=_bool(fget(facts, "containers.in_container")),
        ipc_host=_bool(fget(facts, "containers.ipc_host")),
        net_host=_bool(fget(facts, "containers.net_host")),
        docker=_str(fget(facts, "containers.docker")),
        nvidia_ctk=_str(fget(facts, "containers.nvidia_container_toolkit")),
        fabricmanager=_str(fget(facts, "fabricmanager.installed")),
        fabricmanager_running=_bool(fget(facts, "fabricmanager.running")),
        secure_boot=_bool(fget(facts, "secure_boot.enabled")),
        dkms_nvidia=any(
            isinstance(d, dict) and str(d.get("module", "")).startswith("nvidia")
            for d in _list(fget(facts, "dkms"))
        ),
        kernel_nvidia_modules=tuple(
            str(p) for p in _list(fget(facts, "packages.kernel_nvidia_modules"))
        ),
        pythons=tuple(
            str(p.get("version"))
            for p in _list(fget(facts, "pythons"))
            if isinstance(p, dict) and _str(p.get("version"))
        ),
        python_paths={
            ".".join(str(p.get("version")).split(".")[:2]): str(p.get("path"))
            for p in reversed(_list(fget(facts, "pythons")))
            if isinstance(p, dict) and _str(p.get("version")) and _str(p.get("path"))
        },
        env=_env(facts),
        nccl_settings=settings,
        xid=_int(fget(facts, "kernel_log.xid")),
        aer=_int(fget(facts, "kernel_log.aer")),
        gpu_processes=len(procs) if isinstance(procs, list) else None,
        unattended_touches_nvidia=uu_touch,
        interfaces=ifaces,
        infiniband=tuple(str(x) for x in _list(fget(facts, "network.infiniband"))),
    )
