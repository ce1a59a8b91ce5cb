"""Turn a corpus case (tests/corpus/cases.yaml) into a recorded host and a probe verdict.

The environment is what the thread states; anything it does not state stays `unknown`. The
probe's causes are not written by hand: they come from the probe program's own cause table
(`find_causes` in gpufix_probe.py) applied to the evidence the symptom implies.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml
from gpufix.probe.local import load_program

gpufix_probe = load_program()

HERE = Path(__file__).parent
BASE = HERE.parent / "fixtures" / "hosts" / "focal-4x4090.json"
CODENAMES = {"18.04": "bionic", "20.04": "focal", "22.04": "jammy", "24.04": "noble"}
# Compute capability by the GPU names the threads use (NVIDIA's CUDA GPUs page).
CC = (
    ("H200", "9.0"),
    ("H100", "9.0"),
    ("A100", "8.0"),
    ("A6000", "8.6"),
    ("5880 Ada", "8.9"),
    ("4090", "8.9"),
    ("3090", "8.6"),
    ("2080", "7.5"),
    ("V100", "7.0"),
    ("1080", "6.1"),
    ("Titan Xp", "6.1"),
)
UNSTATED = {"unknown": "not stated in the thread"}


def cases() -> list[dict[str, Any]]:
    return yaml.safe_load((HERE / "cases.yaml").read_text())


def _base() -> dict[str, Any]:
    """A neutral multi-GPU host: every fact the thread might not state is unknown."""
    f = copy.deepcopy(json.loads(BASE.read_text())["facts"])
    f["driver"] = {
        "kernel_module": "535.183.01",
        "userspace": "535.183.01",
        "mismatch": False,
        "nvml_error": None,
    }
    f["kernel"]["running"] = "5.15.0-91-generic"
    f["os"].update({"id": "ubuntu", "version_id": "22.04", "codename": "jammy"})
    f["glibc"] = "2.35"
    f["pcie"] = {"bridges": UNSTATED, "gpus_behind_switch": UNSTATED}
    f["iommu"] = {"cmdline": UNSTATED, "groups": UNSTATED, "mode": UNSTATED}
    f["topology"] = UNSTATED
    f["p2p"] = UNSTATED
    f["fabricmanager"] = {"installed": None, "running": None}
    f["shm"] = {"path": "/dev/shm", "size_bytes": 32 << 30}
    f["containers"] = {k: None for k in f["containers"]} | {"in_container": False}
    f["nccl"] = {"files": {}, "env": {}}
    f["unattended_upgrades"] = {"installed": False, "enabled": False, "nvidia_blacklisted": False}
    f["kernel_log"] = {"xid": 0, "nvrm": 0, "aer": 0, "source": "dmesg"}
    return f


def _gpus(text: str) -> list[dict[str, Any]]:
    m = re.match(r"\s*(\d+)\s*x?\s*(.*)", text)
    count, name = (int(m.group(1)), m.group(2)) if m else (2, text)
    count = max(count, 2)  # "RTX A6000" alone still means a multi-GPU run in these threads
    cc = next((c for key, c in CC if key.lower() in text.lower()), None)
    return [
        {
            "index": i,
            "name": name.strip() or "NVIDIA GPU",
            "pci_bus_id": f"00000000:{i + 1:02x}:00.0",
            "memory_mib": 24576,
            "compute_capability": cc or UNSTATED,
            "uuid": f"GPU-{i}",
        }
        for i in range(count)
    ]


def facts_for(case: dict[str, Any]) -> dict[str, Any]:
    env = case.get("environment") or {}
    f = _base()
    if "os" in env:
        m = re.search(r"(\d\d\.\d\d)", str(env["os"]))
        if m and m.group(1) in CODENAMES:
            f["os"].update({"version_id": m.group(1), "codename": CODENAMES[m.group(1)]})
        elif "ubuntu" not in str(env["os"]).lower():
            f["os"] = {
                "id": str(env["os"]).split()[0].lower(),
                "version_id": UNSTATED,
                "codename": UNSTATED,
                "pretty_name": env["os"],
            }
    if "kernel" in env:
        f["kernel"]["running"] = str(env["kernel"])
    if "gpus" in env:
        f["gpus"] = _gpus(str(env["gpus"]))
    n = len(f["gpus"])
    inter = str(env.get("interconnect", "")).lower()
    link = None
    if "nvswitch" in inter or "nvlink" in inter:
        link = "NV12"
    elif "plx" in inter or "switch" in inter or "pix" in inter or "pxb" in inter:
        link = "PXB"
    elif "phb" in inter:
        link = "PHB"
    elif "sys" in inter:
        link = "SYS"
    if link:
        f["topology"] = {
            "matrix": {f"GPU{i}": {f"GPU{j}": link for j in range(n) if j != i} for i in range(n)},
            "worst": link,
            "raw": None,
        }
        f["pcie"]["gpus_behind_switch"] = link in ("PIX", "PXB")
    if re.search(r"\bib\d|infiniband", inter):
        f["network"]["infiniband"] = ["mlx5_0"]
    if "amd" in inter:
        f["cpu"] = {"vendor": "AuthenticAMD", "model": UNSTATED}
    acs = env.get("acs")
    if acs in ("enabled", "disabled"):
        f["pcie"]["bridges"] = [
            {
                "bdf": f"0000:00:0{i + 1}.0",
                "acs_ctl": {},
                "acs_enabled": acs == "enabled",
                "above_gpu": True,
            }
            for i in range(n)
        ]
    iommu = env.get("iommu")
    if iommu in ("on", "off", "pt"):
        f["iommu"]["mode"] = {"on": "translated", "off": "off", "pt": "pt"}[iommu]
    if "driver" in env:
        d = str(env["driver"])
        m = re.findall(r"\d{3}(?:\.\d+)*", d)
        if len(m) >= 2 and "kernel" in d and "user" in d:
            f["driver"] = {
                "kernel_module": m[0],
                "userspace": m[1],
                "mismatch": True,
                "nvml_error": None,
            }
        elif m:
            ver = m[0] if "." in m[0] else f"{m[0]}.0"
            f["driver"] = {
                "kernel_module": ver,
                "userspace": ver,
                "mismatch": False,
                "nvml_error": None,
            }
    if "torch" in env:
        m = re.search(r"\d+\.\d+(?:\.\d+)?(?:\+cu\d+)?", str(env["torch"]))
        if m and not str(env["torch"]).startswith("NCCL"):
            f["python_envs"][0]["packages"]["torch"] = m.group(0)
    cont = env.get("container")
    if cont:
        text = str(cont).lower()
        m = re.search(r"(\d+)\s*m", text)
        if m:
            shm: Any = int(m.group(1)) << 20
        elif "default" in text:
            shm = 64 << 20  # Docker's default /dev/shm
        else:
            shm = UNSTATED
        f["shm"] = {"path": "/dev/shm", "size_bytes": shm}
        f["containers"].update(
            {"in_container": True, "docker": UNSTATED, "ipc_host": False, "net_host": UNSTATED}
        )
    return f


def verdict_for(case: dict[str, Any]) -> dict[str, Any]:
    ev = case.get("evidence") or {}
    kind = ev.get("probe_verdict")
    phase = ev.get("stalled_phase")
    main: dict[str, Any] = {"verdict": kind}
    if kind == "hung" and phase:
        main["stalled"] = {"phase": phase, "ranks": [1]}
    if kind == "failed" and phase:
        main["failed_in"] = {"phase": phase, "ranks": [0]}
    rerun = ev.get("no_p2p_rerun")
    frac = ev.get("p2p_copy_fraction")
    evidence = {
        "texts": [ev["error_text"]] if ev.get("error_text") else [],
        "main": main,
        "rerun": {"verdict": rerun} if rerun in ("healthy", "hung", "failed") else {},
        "single": {},
        "slow": [],
        "low_copy": frac is not None and frac < 0.25,
        "low_bw": False,
    }
    verdict: dict[str, Any] = {
        "format": "gpufix-probe",
        "version": 1,
        "verdict": kind,
        "stalled": main.get("stalled") or main.get("failed_in"),
        "error": ev.get("error_text"),
        "causes": gpufix_probe.find_causes(evidence),
    }
    if rerun in ("healthy", "hung", "failed"):
        verdict["no_p2p_rerun"] = {"verdict": rerun}
    return verdict


def evaluate(case: dict[str, Any]) -> dict[str, Any]:
    from gpufix.engine.decide import decide
    from gpufix.engine.kb import load
    from gpufix.engine.rules import load as load_rules

    plan = decide(
        facts_for(case), verdict_for(case), kb=load(), rules=load_rules(), host_name=case["id"]
    )
    alts = plan.alternatives()
    want = case["fix_strategy"]
    return {
        "id": case["id"],
        "want": want,
        "chosen": plan.strategy,
        "first_alternative": alts[0] if alts else None,
        "hit": plan.strategy == want or (alts[:1] == [want]),
        "exact": plan.strategy == want,
        "source": case["source"],
    }
