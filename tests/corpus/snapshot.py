"""A gpufix-facts v1 snapshot built from what a corpus thread states about its host.

Every fact the thread does not state is `{"unknown": "not stated in the thread"}` wherever the
schema allows it. Where the schema needs a concrete value inside an object the thread does
describe, the value is a neutral placeholder listed in README.md ("Snapshots"); the engine
does not read any of them (IOMMU group count, synthetic bridge addresses, null GPU UUIDs).
"""

from __future__ import annotations

import re
from typing import Any

UNSTATED = {"unknown": "not stated in the thread"}
GATHERED_AT = "2000-01-01T00:00:00Z"  # a constant: the corpus is not a point in time
CODENAMES = {"16.04": "xenial", "18.04": "bionic", "20.04": "focal", "22.04": "jammy"}
CODENAMES |= {"24.04": "noble"}
LINK_WORDS = (
    ("nvswitch", "NV12"),
    ("nvlink", "NV4"),
    ("pix", "PIX"),
    ("pxb", "PXB"),
    ("plx", "PXB"),
    ("pcie switch", "PXB"),
    ("phb", "PHB"),
    ("node", "NODE"),
    ("sys", "SYS"),
)


def _stated(env: dict[str, Any], key: str) -> Any:
    value = env.get(key)
    return None if value in (None, "", [], {}) else value


TRUE_WORDS = {"true", "yes", "on", "enabled", "enable", "1"}
FALSE_WORDS = {"false", "no", "off", "disabled", "disable", "0"}


def _flag(value: Any) -> bool | None:
    """A yes/no fact as a case may spell it: a YAML bool, or true/yes/on/enabled and their
    opposites; anything else is not stated."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower() if value is not None else ""
    return True if word in TRUE_WORDS else False if word in FALSE_WORDS else None


def _os(env: dict[str, Any]) -> Any:
    text = _stated(env, "os")
    if text is None:
        return UNSTATED
    m = re.search(r"\b(\d\d\.\d\d)\b", str(text))
    version = m.group(1) if m else None
    is_ubuntu = "ubuntu" in str(text).lower()
    return {
        "id": "ubuntu" if is_ubuntu else str(text).split()[0].lower(),
        "version_id": version,
        "codename": CODENAMES.get(version or "") if is_ubuntu else None,
        "pretty_name": str(text),
    }


def _cpu(env: dict[str, Any]) -> Any:
    text = _stated(env, "cpu")
    if text is None:
        return UNSTATED
    low = str(text).lower()
    vendor = "AuthenticAMD" if "amd" in low else "GenuineIntel" if "intel" in low else None
    return {"vendor": vendor, "model": str(text)}


def _kernel(env: dict[str, Any]) -> Any:
    running = _stated(env, "kernel")
    if running is None:
        return UNSTATED
    return {"running": str(running), "cmdline": UNSTATED, "installed": UNSTATED, "hwe": UNSTATED}


def _gpu_count_and_name(text: str) -> tuple[int, str | None]:
    """ "8x A100", "8 x A100", "8 A100", "A100 x 8"; a number that is a model ("4090", "2080 Ti")
    is not a count. A multi-GPU hang: at least two, also when the count is not stated."""
    m = re.match(r"\s*(\d{1,3})\s*[x×]\s*(.*)", text) or re.match(
        r"\s*(\d{1,2})\s+([A-Za-z].*)", text
    )
    if m:
        return max(int(m.group(1)), 2), m.group(2).strip() or None
    m = re.match(r"\s*(.*?[A-Za-z0-9])\s*[x×]\s*(\d{1,3})\s*$", text)
    if m:
        return max(int(m.group(2)), 2), m.group(1).strip() or None
    return 2, text.strip() or None


def _gpus(env: dict[str, Any]) -> list[dict[str, Any]]:
    text = str(_stated(env, "gpus") or "")
    count, name = _gpu_count_and_name(text)
    return [
        {
            "index": i,
            "name": name,
            "pci_bus_id": None,
            "memory_mib": None,
            "compute_capability": UNSTATED,
            "uuid": None,
        }
        for i in range(count)
    ]


def _driver(env: dict[str, Any]) -> Any:
    module = _stated(env, "driver")
    if module is None:
        return UNSTATED
    userspace = _stated(env, "driver_userspace") or module
    return {
        "kernel_module": str(module),
        "userspace": str(userspace),
        "mismatch": str(userspace) != str(module),
        "nvml_error": _stated(env, "nvml_error"),
    }


def _link(env: dict[str, Any]) -> str | None:
    if _stated(env, "link"):
        return str(env["link"])
    text = str(_stated(env, "interconnect") or "").lower()
    return next((link for word, link in LINK_WORDS if word in text), None)


def _topology(env: dict[str, Any], n: int) -> Any:
    link = _link(env)
    if link is None:
        return UNSTATED
    names = [f"GPU{i}" for i in range(n)]
    matrix = {a: {b: link for b in names if b != a} for a in names}
    return {"matrix": matrix, "worst": link, "raw": None}


def _pcie(env: dict[str, Any], n: int) -> Any:
    on = _flag(_stated(env, "acs"))
    acs = None if on is None else "enabled" if on else "disabled"
    behind = _flag(env.get("behind_switch"))
    if behind is None:
        link = _link(env)
        behind = link in ("PIX", "PXB") if link else None
    if acs not in ("enabled", "disabled") and behind is None:
        return UNSTATED
    bridges: Any = UNSTATED
    if acs in ("enabled", "disabled"):
        on = acs == "enabled"
        ctl = {"SrcValid": on, "ReqRedir": on, "CmpltRedir": on}
        bridges = [
            {"bdf": f"0000:f{i:x}:00.0", "acs_ctl": ctl, "acs_enabled": on, "above_gpu": True}
            for i in range(n)
        ]
    if behind is None and bridges is UNSTATED:
        return UNSTATED
    return {"bridges": bridges, "gpus_behind_switch": UNSTATED if behind is None else bool(behind)}


def _iommu(env: dict[str, Any]) -> Any:
    text = str(_stated(env, "iommu") or "").strip().lower()
    on = _flag(text)
    passthrough = text in ("pt", "passthrough", "iommu=pt", "identity")
    translated = text in ("translated", "dma", "dma-fq")
    mode = (
        "pt"
        if passthrough
        else "translated"
        if on or translated
        else "off"
        if on is False
        else None
    )
    if mode is None:
        return UNSTATED
    cmdline = {"intel_iommu": None, "amd_iommu": None, "iommu": None}
    return {"cmdline": cmdline, "groups": 0, "mode": mode}


def _shm(env: dict[str, Any]) -> Any:
    size = _stated(env, "shm")
    if size is None:
        return UNSTATED
    # 64M, 64MB, 64 MiB, 64Mi, 1G, 1GB, 65536K, or bytes: binary units, as df and docker read them
    m = re.fullmatch(r"(\d+)\s*(?:([KMG])(?:i?B|i)?)?", str(size).strip(), re.I)
    if not m:
        return UNSTATED
    shift = {"K": 10, "M": 20, "G": 30, None: 0}[m.group(2).upper() if m.group(2) else None]
    return {"path": "/dev/shm", "size_bytes": int(m.group(1)) << shift}


def _python_envs(env: dict[str, Any]) -> Any:
    torch = _stated(env, "torch")
    if torch is None:
        return UNSTATED
    return [{"python": "python3", "version": UNSTATED, "packages": {"torch": str(torch)}}]


def _containers(env: dict[str, Any]) -> Any:
    if _stated(env, "container") is None:
        return UNSTATED
    return {
        "in_container": True,  # the thread's logs and /dev/shm are the container's
        "docker": UNSTATED,
        "podman": UNSTATED,
        "nvidia_container_toolkit": UNSTATED,
        "nvidia_runtime_configured": UNSTATED,
        "ipc_host": UNSTATED if _flag(env.get("ipc_host")) is None else _flag(env["ipc_host"]),
        "net_host": UNSTATED if _flag(env.get("net_host")) is None else _flag(env["net_host"]),
    }


def _fabricmanager(env: dict[str, Any]) -> Any:
    fm = env.get("fabricmanager")
    if not isinstance(fm, dict):
        return UNSTATED
    running = _flag(fm.get("running"))
    return {
        "installed": None if fm.get("installed") is None else str(fm["installed"]),
        "running": UNSTATED if running is None else running,
    }


def _nccl(env: dict[str, Any]) -> Any:
    settings = _stated(env, "nccl_env")
    conf = _stated(env, "nccl_conf")
    if settings is None and conf is None:
        return UNSTATED
    files = {"/etc/nccl.conf": {str(k): str(v) for k, v in conf.items()}} if conf else {}
    return {"env": {str(k): str(v) for k, v in (settings or {}).items()}, "files": files}


def _network(env: dict[str, Any]) -> Any:
    names = _stated(env, "interfaces")
    ib = _stated(env, "infiniband")
    if names is None and ib is None:
        return UNSTATED
    return {
        "interfaces": [{"name": str(n), "up": True, "ipv4": None} for n in names or []],
        "infiniband": [str(x) for x in ib or []],
    }


def _env_vars(env: dict[str, Any]) -> Any:
    if "cuda_visible_devices" not in env:
        return UNSTATED
    return {"CUDA_VISIBLE_DEVICES": env["cuda_visible_devices"]}


def facts_for(case: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = dict(case.get("environment") or {})
    gpus = _gpus(env)
    return {
        "module_version": "corpus",
        "python": UNSTATED,
        "os": _os(env),
        "cpu": _cpu(env),
        "kernel": _kernel(env),
        "glibc": UNSTATED,
        "pythons": UNSTATED,
        "gpus": gpus,
        "driver": _driver(env),
        "topology": _topology(env, len(gpus)),
        "p2p": UNSTATED,
        "pcie": _pcie(env, len(gpus)),
        "iommu": _iommu(env),
        "shm": _shm(env),
        "cuda_toolkits": UNSTATED,
        "cuda_default": UNSTATED,
        "python_envs": _python_envs(env),
        "secure_boot": UNSTATED,
        "dkms": UNSTATED,
        "packages": UNSTATED,
        "unattended_upgrades": UNSTATED,
        "containers": _containers(env),
        "fabricmanager": _fabricmanager(env),
        "nccl": _nccl(env),
        "gpu_processes": UNSTATED,
        "kernel_log": UNSTATED,
        "network": _network(env),
        "env": _env_vars(env),
    }


def snapshot_for(case: dict[str, Any]) -> dict[str, Any]:
    """The whole gpufix-facts v1 document, as `gpufix facts` would save it."""
    return {
        "format": "gpufix-facts",
        "version": 1,
        "host": case["id"],
        "gathered_at": GATHERED_AT,
        "facts": facts_for(case),
    }
