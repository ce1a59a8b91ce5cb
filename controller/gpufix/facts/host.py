"""A typed view of one host's facts: the few derived values the decision engine reasons about.

Facts may hold `{"unknown": reason}` anywhere; this module turns them into None so rules
can say "unknown" instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpufix import versions
from gpufix.facts import topology
from gpufix.facts.snapshot import get as fget
from gpufix.facts.snapshot import is_unknown


@dataclass(frozen=True)
class PyEnv:
    python: str
    version: str | None
    torch: str | None
    transformers: str | None
    accelerate: str | None
    nccl: str | None = None  # the nvidia-nccl-cuXX wheel the torch wheel loads
    torch_absent: bool = False  # the packages were read and torch is not among them (null)


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
    driver_flavor: str | None  # open | proprietary (the loaded module's licence)
    driver_reinstallable: bool | None  # the installed version is still in an apt index
    driver_origin: str | None  # where it came from: ubuntu, nvidia (CUDA repository), ppa
    driver_packages_flavour: (
        str | None
    )  # installed nvidia-driver-NNN[-server][-open]: "", server, ...
    driver_mismatch: bool | None
    nvml_error: str | None
    worst_link: str | None  # canonical: NV, PIX, PXB, PHB, NODE, SYS
    acs_bridges: tuple[str, ...]  # BDFs of bridges above GPUs with ACS redirect on
    acs_ports: dict[str, str | None]  # those bridges' port types: root, upstream, downstream
    acs_known: bool  # lspci could be read: an empty acs_bridges means "none", not "unknown"
    p2p_read: bool | None  # nvidia-smi topo -p2p r: any pair OK / none OK / not read
    behind_switch: bool | None
    iommu_mode: str | None
    cpu_vendor: str | None
    shm_bytes: int | None
    gathered_in: str | None  # host | container: where the facts module ran
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
    # unattended-upgrades reboots the host by itself (Automatic-Reboot); None: not read
    unattended_auto_reboot: bool | None
    interfaces: tuple[str, ...]
    infiniband: tuple[str, ...]
    # Fewest NVLinks between any two GPUs (NV12 -> 12); None when some pair is not on NVLink.
    nvlink_min: int | None = None
    fabricmanager_known: bool = False  # the facts say whether it is installed (None there: not)
    pod: bool = False  # gathered in a Kubernetes pod (kubepods cgroup or KUBERNETES_SERVICE_HOST)
    interfaces_read: bool = False  # network.interfaces was read (interfaces: those up, lo aside)
    network_read: bool = False  # network.infiniband was read (an empty list: no IB/RoCE)
    docker_read: bool = False  # containers.docker was read (null: no Docker found)
    kube_node: bool | None = None  # containers.kubelet: a Kubernetes node (module 1.6.0)
    compute_caps_named: bool = False  # compute_caps come from the GPU names, not the facts
    # 8+ GPUs whose names are parts NVIDIA ships on NVSwitch baseboards (engine/gpu_names.py),
    # with the topology unread: an NVSwitch board by the models, not by nvidia-smi topo -m
    nvswitch_named: bool = False
    # What the probe's verdict supplied (torch, nccl, driver, kernel: engine/probe_facts.py).
    probe_measured: tuple[str, ...] = ()
    # GPUs nvidia-smi could not reach while it read the others: (pci_bus_id, message, rc)
    gpu_errors: tuple[tuple[str | None, str | None, int | None], ...] = ()
    # NCCL_* variables of the environment the facts module ran in (nccl.env): a container's own,
    # or the login environment of the user Ansible connects as; NCCL reads its config files
    # only for variables not set there
    nccl_env: tuple[tuple[str, str], ...] = ()
    # NCCL_* settings of /etc/nccl.conf alone (the file nccl-profile writes; NCCL reads
    # ~/.nccl.conf before it, and the environment over both), and of the files and environment
    # gpufix did not write (nccl.gpufix_written, facts module 1.4.0): an administrator's
    nccl_etc: tuple[tuple[str, str], ...] = ()
    nccl_admin: tuple[tuple[str, str], ...] = ()
    # NCCL config files other than /etc/nccl.conf (~/.nccl.conf, NCCL_CONF_FILE): read before it
    nccl_home: tuple[tuple[str, str], ...] = ()
    # os-release's ID_LIKE (facts module 1.4.0): None where the facts do not carry it
    os_id_like: tuple[str, ...] | None = None

    @property
    def multi_gpu(self) -> bool:
        return (self.gpu_count or 0) > 1

    @property
    def debian_family(self) -> bool | None:
        """os-release names Debian or Ubuntu, or a distribution that derives from them (ID_LIKE,
        os-release(5)); False: it names another; None: the OS, or its ID_LIKE, was not read."""
        if self.os_id is None:
            return None
        if {self.os_id.lower(), *(self.os_id_like or ())} & {"debian", "ubuntu"}:
            return True
        return False if self.os_id_like is not None else None

    @property
    def from_container(self) -> bool:
        """The facts describe a container: host-level changes belong on the container's host."""
        return self.gathered_in == "container"

    @property
    def torch_cuda(self) -> tuple[int, int] | None:
        return versions.cuda_from_tag(versions.local_tag(self.env.torch)) if self.env else None

    @property
    def nvswitch(self) -> bool:
        """NVSwitch boards (HGX), which need fabric manager: 8 (or 16) SXM GPUs on NVLink, or every
        GPU pair on 12 or more NVLinks (nvidia-smi topo -m prints NV12 on HGX A100, NV18 on HGX
        H100) unless the GPUs are PCIe cards joined by NVLink bridges (H100 NVL)."""
        sxm = [n for n in self.gpu_names if "SXM" in n.upper() or "H100 80GB HBM3" in n]
        if len(sxm) >= 8 and (self.worst_link or "").startswith("NV"):
            return True
        if self.nvswitch_named and self.worst_link is None and self.nvlink_min is None:
            return True
        bridged = any(" NVL" in f"{n} " or "PCIE" in n.upper() for n in self.gpu_names)
        many = (self.gpu_count or 0) >= 2
        return many and self.nvlink_min is not None and self.nvlink_min >= 12 and not bridged


_UNREAD = object()  # a default no snapshot value can be


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


def _driver(v: Any) -> str | None:
    """A driver version string, or None when it does not read as one ("abc", "")."""
    s = _str(v)
    return s if versions.driver(s) is not None else None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _words(v: Any) -> tuple[str, ...] | None:
    """A list of os-release identifiers, lower-cased; None when not a list (not read)."""
    return tuple(str(w).lower() for w in v) if isinstance(v, list) else None


_P2P_NO = ("NS", "CNS", "GNS", "TNS", "NV_NS")


def _p2p_read(read: Any) -> bool | None:
    """True when any GPU pair reads OK in `nvidia-smi topo -p2p r`, False when every pair reads
    "not supported", None when the matrix is missing or says something else."""
    if not isinstance(read, dict):
        return None
    cells = [str(c) for row in read.values() if isinstance(row, dict) for c in row.values()]
    if any(c == "OK" for c in cells):
        return True
    if cells and all(c in _P2P_NO for c in cells):
        return False
    return None


_DRIVER_PKG = re.compile(r"nvidia-driver-\d+(?:-(server-open|server|open))?")


def _packages_flavour(nvidia: Any) -> str | None:
    """The flavour of the installed Ubuntu driver metapackage (nvidia-driver-535-server ->
    "server"); None when no such package is installed or the list is unknown."""
    if not isinstance(nvidia, dict):
        return None
    for name in sorted(nvidia):
        m = _DRIVER_PKG.fullmatch(str(name))
        if m:
            return m.group(1) or ""
    return None


def _gathered_in(facts: Mapping[str, Any]) -> str | None:
    where = _str(fget(facts, "gathered_in.where"))
    if where in ("host", "container"):
        return where
    # Snapshots from facts module 1.0.0 have no gathered_in; its container check is the same.
    inside = _bool(fget(facts, "containers.in_container"))
    return None if inside is None else ("container" if inside else "host")


def _fabricmanager_known(section: Any) -> bool:
    """Whether the facts say if fabric manager is installed (a version, or null: not). A
    hand-written snapshot may leave the version unknown beside a known service state."""
    return isinstance(section, dict) and not is_unknown(section.get("installed"))


def _in_container(facts: Mapping[str, Any]) -> bool | None:
    """Facts gathered in a container describe a job that runs in one, whatever a hand-written
    `containers` section says or leaves out (the module reads both the same way)."""
    if _str(fget(facts, "gathered_in.where")) == "container":
        return True
    return _bool(fget(facts, "containers.in_container"))


# The NCCL wheels torch's CUDA wheels depend on (pip METADATA Requires-Dist), newest CUDA first.
_NCCL_WHEELS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")


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
        nccl=next(
            (_str(pk.get(n)) for n in _NCCL_WHEELS if _str(pk.get(n))),
            None,
        ),
        # null is "not installed" (the module writes every package it looks for); a package a
        # hand-written snapshot leaves out, or marks unknown, is not read
        torch_absent=all(
            isinstance(x.get("packages"), dict)
            and "torch" in x["packages"]
            and x["packages"]["torch"] is None
            for x in envs
        ),
    )


def _nccl_merged(
    facts: Mapping[str, Any], keep: Callable[[str], bool], env: bool = True
) -> dict[str, str]:
    """NCCL_* settings of the config files whose path `keep` takes, then (with `env`) the
    environment, which wins, as in NCCL."""
    settings: dict[str, str] = {}
    files = fget(facts, "nccl.files")
    for path, kv in files.items() if isinstance(files, dict) else ():
        if isinstance(kv, dict) and keep(str(path)):
            settings.update({str(k): str(v) for k, v in kv.items()})
    env_kv = fget(facts, "nccl.env") if env else None
    if isinstance(env_kv, dict):
        settings.update({str(k): str(v) for k, v in env_kv.items()})
    return settings


def _nccl_settings(facts: Mapping[str, Any]) -> dict[str, str]:
    return _nccl_merged(facts, lambda path: True)


def _written(facts: Mapping[str, Any]) -> set[str]:
    w = fget(facts, "nccl.gpufix_written")
    return {str(p) for p in w} if isinstance(w, list) else set()


def _nccl_etc(facts: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    if "/etc/nccl.conf" in _written(facts):
        return ()
    return tuple(sorted(_nccl_merged(facts, lambda path: path == "/etc/nccl.conf", False).items()))


def _nccl_admin(facts: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """As _nccl_settings, without the files gpufix wrote: what an administrator left."""
    written = _written(facts)
    return tuple(sorted(_nccl_merged(facts, lambda path: path not in written).items()))


def _nccl_home(facts: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(_nccl_merged(facts, lambda path: path != "/etc/nccl.conf", False).items()))


def _nccl_env(facts: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(_nccl_merged(facts, lambda path: False).items()))


def _nvlink_min(matrix: Any) -> int | None:
    """The fewest NVLinks between two GPUs when every pair is on NVLink (NV#); else None."""
    if not isinstance(matrix, dict):
        return None
    cells = [str(c) for row in matrix.values() if isinstance(row, dict) for c in row.values()]
    links = [c for c in cells if c not in ("X", "")]
    counts = [int(c[2:]) for c in links if re.fullmatch(r"NV\d+", c)]
    return min(counts) if links and len(counts) == len(links) else None


def _interfaces(facts: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(i.get("name"))
        for i in _list(fget(facts, "network.interfaces"))
        if isinstance(i, dict) and i.get("up") and i.get("name") not in (None, "lo")
    )


def _unattended(uu: Any) -> tuple[bool | None, bool | None]:
    """Whether unattended-upgrades may touch NVIDIA packages, and whether it reboots by itself."""
    if not isinstance(uu, dict) or not isinstance(uu.get("installed"), bool):
        return None, None
    touch = bool(uu.get("installed") and uu.get("enabled") and not uu.get("nvidia_blacklisted"))
    reboot = uu["automatic_reboot"] if isinstance(uu.get("automatic_reboot"), bool) else None
    return touch, reboot


def _pod(facts: Mapping[str, Any]) -> bool:
    """Gathered in a Kubernetes pod: the container check found kubepods in /proc/1/cgroup or
    KUBERNETES_SERVICE_HOST in the environment (facts module 1.5.0)."""
    where = _gathered_in(facts)
    evidence = _str(fget(facts, "gathered_in.evidence")) or ""
    return where == "container" and (
        "kubepods" in evidence or "KUBERNETES_SERVICE_HOST" in evidence
    )


def from_facts(facts: Mapping[str, Any]) -> Host:
    gpus = fget(facts, "gpus")
    gpu_list = [g for g in _list(gpus) if isinstance(g, dict)]
    gpu_count = None if gpus is None or is_unknown(gpus) else len(gpu_list)
    bridges = [b for b in _list(fget(facts, "pcie.bridges")) if isinstance(b, dict)]
    acs_rows = [b for b in bridges if b.get("above_gpu") is True and b.get("acs_enabled") is True]
    acs = tuple(str(b.get("bdf")) for b in acs_rows)
    procs = fget(facts, "gpu_processes")
    uu_touch, uu_reboot = _unattended(fget(facts, "unattended_upgrades"))
    return Host(
        os_id=_str(fget(facts, "os.id")),
        os_id_like=_words(fget(facts, "os.id_like")),
        nccl_etc=_nccl_etc(facts),
        nccl_admin=_nccl_admin(facts),
        nccl_home=_nccl_home(facts),
        codename=_str(fget(facts, "os.codename")),
        version_id=_str(fget(facts, "os.version_id")),
        kernel=_str(fget(facts, "kernel.running")),
        hwe_candidate=_str(fget(facts, "kernel.hwe.candidate")),
        glibc=_str(fget(facts, "glibc")),
        gpu_count=gpu_count,
        gpu_names=tuple(_str(g.get("name")) or "" for g in gpu_list),
        compute_caps=tuple(
            str(g["compute_capability"]) for g in gpu_list if _str(g.get("compute_capability"))
        ),
        driver=_driver(fget(facts, "driver.kernel_module"))
        or _driver(fget(facts, "driver.userspace")),
        driver_userspace=_driver(fget(facts, "driver.userspace")),
        driver_flavor=_str(fget(facts, "driver.flavor")),
        driver_reinstallable=_bool(fget(facts, "packages.driver_rollback.installable")),
        driver_origin=_str(fget(facts, "packages.driver_rollback.origin")),
        driver_packages_flavour=_packages_flavour(fget(facts, "packages.nvidia")),
        driver_mismatch=_bool(fget(facts, "driver.mismatch")),
        nvml_error=_str(fget(facts, "driver.nvml_error")),
        worst_link=topology.canonical(fget(facts, "topology.worst"))
        or topology.worst_link(fget(facts, "topology.matrix")),
        acs_bridges=acs,
        acs_ports={str(b.get("bdf")): _str(b.get("port")) for b in acs_rows},
        acs_known=isinstance(fget(facts, "pcie.bridges"), list),
        p2p_read=_p2p_read(fget(facts, "p2p.read")),
        behind_switch=_bool(fget(facts, "pcie.gpus_behind_switch")),
        iommu_mode=_str(fget(facts, "iommu.mode")),
        cpu_vendor=_str(fget(facts, "cpu.vendor")),
        shm_bytes=_int(fget(facts, "shm.size_bytes")),
        gathered_in=_gathered_in(facts),
        pod=_pod(facts),
        in_container=_in_container(facts),
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
        nccl_settings=_nccl_settings(facts),
        nccl_env=_nccl_env(facts),
        xid=_int(fget(facts, "kernel_log.xid")),
        aer=_int(fget(facts, "kernel_log.aer")),
        gpu_processes=len(procs) if isinstance(procs, list) else None,
        unattended_touches_nvidia=uu_touch,
        unattended_auto_reboot=uu_reboot,
        interfaces=_interfaces(facts),
        interfaces_read=isinstance(fget(facts, "network.interfaces"), list),
        infiniband=tuple(str(x) for x in _list(fget(facts, "network.infiniband"))),
        nvlink_min=_nvlink_min(fget(facts, "topology.matrix")),
        network_read=isinstance(fget(facts, "network.infiniband"), list),
        docker_read=fget(facts, "containers.docker", _UNREAD) is not _UNREAD,
        kube_node=_bool(fget(facts, "containers.kubelet")),
        fabricmanager_known=_fabricmanager_known(fget(facts, "fabricmanager")),
        gpu_errors=tuple(
            (
                _str(e.get("pci_bus_id")),
                (_str(e.get("message")) or "")[:160] or None,
                _int(e.get("rc")),
            )
            for e in _list(fget(facts, "driver.gpu_errors"))
            if isinstance(e, dict)
        ),
    )
