#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Gather the facts gpufix decides on, from a GPU host, with the standard library only.

Runs on the target's stock Python (3.6 on Ubuntu 18.04): no f-strings with '=', no walrus,
no dataclasses, no subprocess.run(capture_output=/text=). Importable without Ansible:
the controller calls gather() directly for local hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import csv
import glob
import json
import os
import platform
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

try:
    from ansible.module_utils.basic import AnsibleModule
except ImportError:  # imported by the controller outside Ansible
    AnsibleModule = None

DOCUMENTATION = r"""
---
module: gpufix_facts
short_description: Gather GPU, driver, kernel, PCIe and ML-stack facts for gpufix
description:
  - Returns C(ansible_facts.gpufix), a dictionary whose keys are always present.
  - >-
    A value that could not be determined is C({"unknown": "<reason>"}); the module never
    fails because a tool is missing, forbidden or slow.
  - Every external command runs with a timeout.
options:
  python_envs:
    description:
      - Interpreter paths whose site-packages are read for torch, transformers, accelerate and
        nvidia-nccl-* versions (from dist-info METADATA; nothing is imported).
      - When empty, the C(python3) found on PATH and C(/usr/bin/python3) are read.
    type: list
    elements: path
    default: []
  timeout:
    description: Seconds allowed for each external command.
    type: int
    default: 10
  total_timeout:
    description:
      - Seconds allowed for all external commands together. Each command gets the smaller of
        O(timeout) and what is left; a fact whose command did not run, or was cut short, because
        this ran out reads as unknown, naming the time budget.
      - The default stays under gpufix's own 120 s limit for a whole fact-gathering run, so a
        slow host still returns what it could gather.
    type: int
    default: 60
author: gpufix
"""

EXAMPLES = r"""
- name: Gather gpufix facts
  gpufix_facts:
    python_envs: [/opt/venvs/train/bin/python]
    timeout: 10
    total_timeout: 60
"""

RETURN = r"""
ansible_facts:
  description: The snapshot under C(gpufix); see docs/facts.md for every key.
  returned: always
  type: dict
"""


MODULE_VERSION = "1.6.0"
DEFAULT_TIMEOUT = 10
DEFAULT_TOTAL_TIMEOUT = 60  # under the controller's 120 s for a whole gathering run
# Seconds to wait for a killed tool to go; one stuck in the kernel never does.
KILL_GRACE = 2

# HWE metapackage per Ubuntu release. Duplicated from the knowledge base on purpose: the
# module runs on the target with the standard library only and cannot read it.
HWE_METAPACKAGES = {
    "bionic": "linux-generic-hwe-18.04",
    "focal": "linux-generic-hwe-20.04",
    "jammy": "linux-generic-hwe-22.04",
    "noble": "linux-generic-hwe-24.04",
}

GPU_QUERY_FIELDS = ["index", "name", "pci.bus_id", "memory.total", "compute_cap", "uuid"]
TRACKED_PACKAGES = [
    "torch",
    "transformers",
    "accelerate",
    "deepspeed",
    "nvidia-nccl-cu11",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
]
# Lower is better; NV# (NVLink) ranks best. SOC is the pre-NODE name of SYS.
TOPOLOGY_RANK = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}
# ACS control bits that send peer-to-peer traffic up to the root complex (or check it there).
ACS_P2P_BITS = ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")
NVML_MISMATCH = "Driver/library version mismatch"

# PCIe port type from lspci's "Express (v2) Root Port" capability line: ACS on a root port only
# matters when the IOMMU translates; on switch ports it bounces P2P up to the root complex.
PORT_TYPES = {"Root Port": "root", "Upstream Port": "upstream", "Downstream Port": "downstream"}
_EXPRESS_PORT = re.compile(r"Express \(v\d\) (Root Port|Upstream Port|Downstream Port)")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# PCI address: VMD domains (Intel Volume Management Device) run past 4 hex digits (10000:01:00.0).
_PCI_ADDRESS = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_BDF = re.compile(r"^(" + _PCI_ADDRESS + r")\s+(.*)$")
_SYSFS_BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_DRIVER_VERSION = re.compile(r"\b(\d{2,3}\.\d{1,3}(?:\.\d{1,3})?)\b")


def unknown(reason):
    return {"unknown": str(reason)}


def is_unknown(value):
    return isinstance(value, dict) and set(value) == {"unknown"}


class Unknown(Exception):
    """Raised inside a gatherer when a value cannot be determined; carries the reason."""

    def __init__(self, reason):
        Exception.__init__(self, reason)
        self.reason = reason


class BudgetSpent(Unknown):
    """A command not run, or cut short, because total_timeout ran out: says nothing of the tool."""


# ----------------------------------------------------------------------------- parsers
# Pure functions of text: they never raise on odd or truncated input.


def parse_os_release(text):
    """/etc/os-release -> {id, id_like, version_id, codename, pretty_name}; missing keys are
    None (id_like: []). A derivative's UBUNTU_CODENAME (Mint 22: zena, noble) names the Ubuntu archive it uses,
    so it goes first; ID_LIKE lists the distributions it derives from (os-release(5))."""
    values = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, val = line.partition("=")
        val = val.strip()
        if len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'":
            val = val[1:-1]
        values[key.strip()] = val
    codename = values.get("UBUNTU_CODENAME") or values.get("VERSION_CODENAME")
    if not codename:
        m = re.search(r"\(([A-Za-z]+)", values.get("VERSION", ""))
        codename = m.group(1).lower() if m else None
    return {
        "id": values.get("ID") or None,
        "id_like": values.get("ID_LIKE", "").split(),
        "version_id": values.get("VERSION_ID") or None,
        "codename": codename or None,
        "pretty_name": values.get("PRETTY_NAME") or None,
    }


def parse_cpuinfo(text):
    """/proc/cpuinfo -> {vendor, model} of the first CPU."""
    vendor = None
    model = None
    for line in (text or "").splitlines():
        key, sep, val = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "vendor_id" and vendor is None:
            vendor = val.strip() or None
        elif key == "model name" and model is None:
            model = val.strip() or None
    return {"vendor": vendor, "model": model}


def parse_proc_driver_version(text):
    """/proc/driver/nvidia/version -> {version, flavor} or None when there is no NVRM line.

    flavor is 'open' for the open kernel modules, 'proprietary' otherwise.
    """
    for line in (text or "").splitlines():
        if not line.startswith("NVRM version:"):
            continue
        rest = line[len("NVRM version:") :]
        m = _DRIVER_VERSION.search(rest.replace("x86_64", " ").replace("aarch64", " "))
        if not m:
            return None
        flavor = "open" if "Open Kernel Module" in rest else "proprietary"
        return {"version": m.group(1), "flavor": flavor}
    return None


def parse_nvml_error(text):
    """The NVML / nvidia-smi failure line in a tool's output, or None."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("Failed to initialize NVML") or line.startswith("NVIDIA-SMI has failed"):
            return line
        if NVML_MISMATCH in line:
            return line
    return None


# nvidia-smi's line for a GPU it cannot reach while it still reports the others; seen as
# 'for GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover this GPU' and
# 'for GPU0000:65:00.0: Unknown Error'.
_GPU_HANDLE_ERROR = re.compile(
    r"Unable to determine the device handle for gpu\s*(" + _PCI_ADDRESS + r")\s*:\s*(.*)$",
    re.IGNORECASE,
)


def parse_gpu_errors(text, rc=None):
    """[{pci_bus_id, message, rc}] for each GPU nvidia-smi could not reach, in sysfs BDF form."""
    errors = []
    for line in (text or "").splitlines():
        m = _GPU_HANDLE_ERROR.search(line)
        if m:
            message = " ".join(m.group(2).split())
            errors.append({"pci_bus_id": normalise_bdf(m.group(1)), "message": message, "rc": rc})
    return errors


def _na(value):
    value = value.strip()
    if not value or value.startswith("[") or value in ("N/A", "Not Supported"):
        return None
    return value


def _int_or_none(value):
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def parse_nvidia_smi_query(text, fields=None):
    """CSV from `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` -> list of dicts.

    Keys are the field names; rows with the wrong number of columns are dropped.
    """
    fields = list(fields or GPU_QUERY_FIELDS)
    rows = []
    try:
        reader = csv.reader((text or "").splitlines(), skipinitialspace=True)
        for cols in reader:
            if len(cols) != len(fields):
                continue
            rows.append(dict(zip(fields, [_na(c) for c in cols])))  # noqa: B905 (3.6)
    except csv.Error:
        return rows
    return rows


def gpus_from_query(rows):
    """Rows of parse_nvidia_smi_query(GPU_QUERY_FIELDS) -> the snapshot's gpus list."""
    gpus = []
    for row in rows:
        index = _int_or_none(row.get("index"))
        if index is None:
            continue
        if "compute_cap" in row:
            cc = row.get("compute_cap")
        else:
            cc = unknown("nvidia-smi: compute_cap not supported by this driver")
        gpus.append(
            {
                "index": index,
                "name": row.get("name"),
                "pci_bus_id": row.get("pci.bus_id"),
                "memory_mib": _int_or_none(row.get("memory.total")),
                "compute_capability": cc,
                "uuid": row.get("uuid"),
            }
        )
    return gpus


def parse_compute_apps(text):
    """`nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory` -> list."""
    apps = []
    fields = ["pid", "process_name", "gpu_uuid", "used_memory"]
    for row in parse_nvidia_smi_query(text, fields):
        pid = _int_or_none(row.get("pid"))
        if pid is None:
            continue
        apps.append(
            {
                "pid": pid,
                "name": row.get("process_name"),
                "gpu_uuid": row.get("gpu_uuid"),
                "used_mib": _int_or_none(row.get("used_memory")),
            }
        )
    return apps


def _matrix_rows(text):
    """Header device names and {row: [cells]} from an nvidia-smi topo table."""
    lines = [_ANSI.sub("", line) for line in (text or "").splitlines()]
    header = None
    rows = {}
    for line in lines:
        tokens = line.split()
        if not tokens:
            if header is not None and rows:
                break  # blank line after the table: the legend follows
            continue
        if header is None:
            if tokens[0].startswith("GPU") and line[:1] in (" ", "\t"):
                names = []
                for tok in tokens:
                    if tok in ("CPU", "NUMA", "GPU") and names:
                        break
                    names.append(tok)
                header = names
            continue
        if tokens[0] == "Legend:":
            break
        rows[tokens[0]] = tokens[1:]
    return header or [], rows


def _square(header, rows):
    matrix = {}
    gpus = [h for h in header if re.match(r"^GPU\d+$", h)]
    for name in gpus:
        cells = rows.get(name)
        if cells is None:
            continue
        entry = {}
        for col, value in zip(header, cells):  # noqa: B905 (3.6)
            if col in gpus and col != name:
                entry[col] = value
        matrix[name] = entry
    return matrix


def topology_rank(link):
    """Rank of a topo -m cell (lower is closer); None for X or an unknown label."""
    if not link:
        return None
    if re.match(r"^NV\d+$", link):
        return TOPOLOGY_RANK["NV"]
    return TOPOLOGY_RANK.get(link)


def parse_topo_matrix(text):
    """`nvidia-smi topo -m` -> {matrix: {"GPU0": {"GPU1": "NV12"}}, worst} (GPU pairs only)."""
    header, rows = _matrix_rows(text)
    matrix = _square(header, rows)
    worst = None
    worst_rank = -1
    for row in matrix.values():
        for link in row.values():
            rank = topology_rank(link)
            if rank is not None and rank > worst_rank:
                worst, worst_rank = link, rank
    return {"matrix": matrix, "worst": worst}


def parse_topo_p2p(text):
    """`nvidia-smi topo -p2p r` -> {"GPU0": {"GPU1": "OK"}}."""
    header, rows = _matrix_rows(text)
    return _square(header, rows)


def _acs_flags(text):
    flags = {}
    for tok in text.split():
        if len(tok) > 1 and tok[-1] in "+-":
            flags[tok[:-1]] = tok[-1] == "+"
    return flags


def normalise_bdf(bdf):
    """'00000000:01:00.0' / '01:00.0' / '0000:01:00.0' -> '0000:01:00.0' (sysfs form).

    The domain keeps its value: VMD's '00010000:01:00.0' -> '10000:01:00.0', as sysfs names it.
    """
    bdf = (bdf or "").strip().lower()
    parts = bdf.split(":")
    if len(parts) == 2:
        return "0000:" + bdf
    if len(parts) == 3:
        try:
            domain = "%04x" % int(parts[0], 16)
        except ValueError:
            return bdf
        return domain + ":" + parts[1] + ":" + parts[2]
    return bdf


def split_bdf(bdf):
    """'10000:01:00.0' -> ('10000', 1): the domain and bus of a sysfs-form BDF."""
    domain, bus = bdf.split(":")[:2]
    return domain, int(bus, 16)


def parse_lspci_devices(text):
    """`lspci -D -vvv` -> [{bdf, name, secondary, subordinate, port?, acs_cap?, acs_ctl?}]."""
    devices = []
    current = None
    for raw in (text or "").splitlines():
        m = _BDF.match(raw)
        if m:
            current = {
                "bdf": normalise_bdf(m.group(1)),
                "name": m.group(2).strip(),
                "secondary": None,
                "subordinate": None,
            }
            devices.append(current)
            continue
        if current is None:
            continue
        line = raw.strip()
        port = _EXPRESS_PORT.search(line) if line.startswith("Capabilities:") else None
        if port:
            current["port"] = PORT_TYPES[port.group(1)]
        if line.startswith("ACSCap:"):
            current["acs_cap"] = _acs_flags(line[len("ACSCap:") :])
        elif line.startswith("ACSCtl:"):
            current["acs_ctl"] = _acs_flags(line[len("ACSCtl:") :])
        elif line.startswith("Bus: primary="):
            bus = dict(re.findall(r"(\w+)=([0-9a-fA-F]+)", line))
            try:
                current["secondary"] = int(bus["secondary"], 16)
                current["subordinate"] = int(bus["subordinate"], 16)
            except (KeyError, ValueError):
                pass
    return devices


def parse_lspci_acs(text):
    """`lspci -D -vvv` -> [{bdf, name, port, acs_cap, acs_ctl, acs_enabled}] for devices with ACS.

    port: root, upstream or downstream (None when lspci shows no PCI Express capability).
    """
    out = []
    for dev in parse_lspci_devices(text):
        if "acs_ctl" not in dev:
            continue
        ctl = dev["acs_ctl"]
        out.append(
            {
                "bdf": dev["bdf"],
                "name": dev["name"],
                "port": dev.get("port"),
                "acs_cap": dev.get("acs_cap", {}),
                "acs_ctl": ctl,
                "acs_enabled": any(ctl.get(bit) for bit in ACS_P2P_BITS),
            }
        )
    return out


def lspci_gpus(devices):
    """BDFs of NVIDIA display / 3D controllers in parse_lspci_devices() output."""
    return [
        d["bdf"]
        for d in devices
        if "NVIDIA" in d["name"]
        and ("VGA compatible controller" in d["name"] or "3D controller" in d["name"])
    ]


def lspci_parents(devices, bdf):
    """Bridges whose bus range holds bdf's bus (same domain), nearest the root first."""
    domain, bus = split_bdf(bdf)
    above = [
        d
        for d in devices
        if d["secondary"] is not None
        and split_bdf(d["bdf"])[0] == domain
        and d["secondary"] <= bus <= d["subordinate"]
        and d["bdf"] != bdf
    ]
    above.sort(key=lambda d: d["secondary"])
    return [d["bdf"] for d in above]


def summarise_pcie(lspci_text, gpu_bdfs=None, parents_of=None):
    """The snapshot's pcie dict from lspci text, GPU BDFs and each GPU's parent bridges.

    GPU BDFs and parents come from sysfs on a live host; when absent they are derived from
    lspci's own bus ranges, so recorded output can be summarised too.
    """
    devices = parse_lspci_devices(lspci_text)
    gpus = list(gpu_bdfs) if gpu_bdfs else lspci_gpus(devices)
    parents_of = dict(parents_of or {})
    for bdf in gpus:
        if not parents_of.get(bdf):
            parents_of[bdf] = lspci_parents(devices, bdf)
    above = set()
    for bdf in gpus:
        above.update(parents_of.get(bdf) or [])
    bridges = parse_lspci_acs(lspci_text)
    for dev in bridges:
        dev["above_gpu"] = dev["bdf"] in above
    # Root port -> switch upstream -> switch downstream -> GPU: two or more bridges above a
    # GPU mean a PCIe switch.
    behind_switch = any(len(parents_of.get(b) or []) >= 2 for b in gpus)
    if not bridges and lspci_access_denied(lspci_text):
        bridges = unknown("lspci: ACS capabilities need root")
    return {"bridges": bridges, "gpus_behind_switch": behind_switch, "gpu_bdfs": gpus}


def lspci_access_denied(text):
    return "<access denied>" in (text or "")


def parse_dkms_status(text):
    """`dkms status` (2.x 'nvidia, 470.x, kernel, arch: installed' or 3.x 'nvidia/535.x, ...')."""
    entries = []
    pattern = re.compile(
        r"^([^,/:\s]+)(?:/|,\s*)([^,:\s]+)(?:,\s*([^,:\s]+))?(?:,\s*([^,:\s]+))?:\s*(\S.*)$"
    )
    for line in (text or "").splitlines():
        m = pattern.match(line.strip())
        if not m:
            continue
        status = m.group(5).strip()
        state = status.split()[0].rstrip(",;").lower() if status.split() else status
        entries.append(
            {
                "module": m.group(1),
                "version": m.group(2),
                "kernel": m.group(3),
                "arch": m.group(4),
                "status": state,
            }
        )
    return entries


def parse_mokutil(text):
    """`mokutil --sb-state` -> {enabled, efi}: None where the output does not say."""
    text = text or ""
    if "EFI variables are not supported" in text:
        return {"enabled": False, "efi": False}
    m = re.search(r"SecureBoot\s+(enabled|disabled)", text)
    if m:
        return {"enabled": m.group(1) == "enabled", "efi": True}
    return {"enabled": None, "efi": None}


def parse_apt_policy(text):
    """`apt-cache policy PKG` -> {installed, candidate}; '(none)' reads as None."""
    out = {"installed": None, "candidate": None}
    for line in (text or "").splitlines():
        key, sep, val = line.strip().partition(":")
        if not sep:
            continue
        val = val.strip()
        if key in ("Installed", "Candidate"):
            out[key.lower()] = None if val in ("(none)", "") else val
    return out


def parse_apt_policy_table(text):
    """`apt-cache policy PKG` -> {version: [sources]} from its version table.

    A version whose only source is /var/lib/dpkg/status is installed but in no index any more:
    apt cannot install it again (one version per package per pocket).
    """
    table = {}
    current = None
    version_indent = None
    lines = (text or "").splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Version table:"), None)
    for line in lines[start + 1 :] if start is not None else []:
        if not line.strip():
            continue
        marked = line.lstrip().startswith("***")
        body = line.lstrip().lstrip("*").strip()
        indent = len(line) - len(line.lstrip())
        if version_indent is None:
            version_indent = indent
        parts = body.split()
        if not parts:  # a line of stars only
            continue
        if marked or indent <= version_indent:
            current = parts[0]
            table.setdefault(current, [])
        elif current is not None and len(parts) >= 2:
            table[current].append(" ".join(parts[1:]))
    return table


def version_installable(table, version):
    """True when `version` comes from an apt index, False when only dpkg's status has it."""
    sources = table.get(version)
    if sources is None:
        return False
    return any(not src.startswith("/var/lib/dpkg/status") for src in sources)


def parse_dpkg_query(text):
    """dpkg-query '${Package}\\t${Version}\\t${db:Status-Abbrev}' -> {name: version} installed."""
    installed = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        name, version, status = parts[0].strip(), parts[1].strip(), parts[2]
        # Status-Abbrev: want/state/error; state 'i' = installed ('ii', 'hi').
        if name and version and status[1:2] == "i":
            installed[name.split(":")[0]] = version
    return installed


def parse_showhold(text):
    return sorted(
        {line.strip().split(":")[0] for line in (text or "").splitlines() if line.strip()}
    )


def parse_kv_conf(text, prefix="NCCL_"):
    """KEY=VALUE lines (nccl.conf): comments and lines without the prefix are skipped."""
    out = {}
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        key, _, val = line.partition("=")
        key = key.strip()
        if key.startswith("export "):
            key = key[len("export ") :].strip()
        if key.startswith(prefix):
            out[key] = val.strip().strip("\"'")
    return out


def parse_kernel_log(text):
    """Counts of NVIDIA Xid, other NVRM and PCIe AER lines in dmesg / journalctl -k."""
    xid = nvrm = aer = 0
    for line in (text or "").splitlines():
        if "NVRM: Xid" in line:
            xid += 1
        elif "NVRM:" in line:
            nvrm += 1
        if "AER:" in line:
            aer += 1
    return {"xid": xid, "nvrm": nvrm, "aer": aer}


# journalctl's notes when it may not read the system journal (the kernel's messages are there).
_JOURNAL_DENIED = (
    "insufficient permissions",
    "not seeing messages from other users and the system",
)


def kernel_log_unread(out, err):
    """Why a dmesg / journalctl -k run says nothing about the kernel log, or None when it read it.

    Without root journalctl may exit 0 with no kernel lines, and dmesg may print nothing: a count
    of 0 from such output would be a guess. The kernel always logs at boot, so a log that was
    read has lines.
    """
    for line in (err or "").splitlines():
        if any(hint in line for hint in _JOURNAL_DENIED):
            return line.strip()
    lines = [line for line in (out or "").splitlines() if line.strip()]
    if not any(not line.startswith("-- ") for line in lines):  # '-- No entries --'
        return "no kernel messages in the output"
    return None


def parse_apt_config_dump(text):
    """`apt-config dump` -> {key: value or [values]}; 'Key:: "v";' appends to a list."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r'^(\S+?)\s+"(.*)";\s*$', line.strip())
        if not m:
            continue
        key, val = m.group(1), m.group(2)
        if key.endswith("::"):
            out.setdefault(key[:-2], [])
            if isinstance(out[key[:-2]], list):
                out[key[:-2]].append(val)
            else:
                out[key[:-2]] = [val]
        elif val == "" and key not in out:
            out[key] = []
        else:
            out[key] = val
    return out


def blacklist_covers(patterns, name):
    """Whether an Unattended-Upgrade::Package-Blacklist entry (a regex) matches a package."""
    for pat in patterns or []:
        try:
            if re.match(pat, name):
                return True
        except re.error:
            if name.startswith(pat.rstrip("*")):
                return True
    return False


# Branches whose package names stand in when no driver is installed yet: a blacklist that names
# one branch (nvidia-driver-535) does not keep unattended-upgrades off the next one.
SAMPLE_DRIVER_BRANCHES = ("470", "535", "550", "570", "580")


# NVIDIA's repository names 590 and later without a branch (nvidia-open, libnvidia-compute).
UNVERSIONED_DRIVER_PACKAGES = ("nvidia-driver", "nvidia-open", "libnvidia-compute")
_DRIVER_PACKAGE = re.compile(r"^(nvidia-driver-\d+|libnvidia-compute-\d+|nvidia-open-\d+)")


def driver_package_names(installed):
    """The driver packages a Package-Blacklist must cover: the installed nvidia-driver-N*,
    libnvidia-compute-N* (any branch, -server and -open too) and 590+'s unversioned names, else
    sample branches' names and the unversioned ones."""
    names = sorted(
        n for n in installed or {} if _DRIVER_PACKAGE.match(n) or n in UNVERSIONED_DRIVER_PACKAGES
    )
    if names:
        return names
    samples = [
        p + b for b in SAMPLE_DRIVER_BRANCHES for p in ("nvidia-driver-", "libnvidia-compute-")
    ]
    return samples + list(UNVERSIONED_DRIVER_PACKAGES)


def parse_cmdline(text):
    """/proc/cmdline -> {key: value} ('quiet' -> True)."""
    out = {}
    for tok in (text or "").split():
        key, sep, val = tok.partition("=")
        out[key] = val if sep else True
    return out


def parse_version_line(text):
    """First version-looking token: 'Docker version 24.0.7, build afdd53b' -> '24.0.7'."""
    m = re.search(r"\b(\d+\.\d+(?:\.\d+)*)", text or "")
    return m.group(1) if m else None


def upstream_version(deb_version):
    """'1:535.129.03-0ubuntu0.22.04.1' -> '535.129.03'."""
    v = (deb_version or "").split(":", 1)[-1]
    return v.split("-", 1)[0] or None


# ----------------------------------------------------------------------------- context


def _seconds(value):
    return "%g" % round(value, 1)


def exit_reason(argv, rc, out, err):
    """'tool: exit N: first line of its error', the reason for a failed command."""
    detail = (err.strip() or out.strip()).splitlines()
    return "%s: exit %d%s" % (argv[0], rc, (": " + detail[0]) if detail else "")


class Context:
    """Runs commands and reads files, turning failures into Unknown(reason)."""

    def __init__(self, timeout=DEFAULT_TIMEOUT, budget=None):
        self.timeout = int(timeout)
        # Seconds for all commands together (None: no limit), so slow tools don't add up.
        self.budget = budget
        self.deadline = time.monotonic() + budget if budget else None
        self.env = dict(os.environ)
        self.env["LC_ALL"] = "C"
        self.env["PATH"] = self.env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        self._cache = {}
        self._timed_out = {}
        # {path: (uid, gid)}: commands run as that account, not as the module's (see run_as)
        self.run_as = {}

    def which(self, tool):
        return shutil.which(tool, path=self.env["PATH"])

    def time_left(self):
        """Seconds left of the budget; None when there is none."""
        if self.deadline is None:
            return None
        return self.deadline - time.monotonic()

    def run(self, argv, ok_rcs=(0,), timeout=None):
        """stdout of argv; raises Unknown when the tool is missing, slow or fails."""
        key = tuple(argv)
        if key in self._cache:
            result = self._cache[key]
        else:
            result = self._run(argv, timeout)
            self._cache[key] = result
        if isinstance(result, Unknown):
            raise result
        rc, out, err = result
        if rc not in ok_rcs:
            raise Unknown(exit_reason(argv, rc, out, err))
        return out

    def run_full(self, argv, timeout=None):
        """(rc, stdout, stderr); raises Unknown only when the tool is missing or slow."""
        key = tuple(argv)
        if key not in self._cache:
            self._cache[key] = self._run(argv, timeout)
        result = self._cache[key]
        if isinstance(result, Unknown):
            raise result
        return result

    def _run(self, argv, timeout):
        # A tool that hung once (nvidia-smi on a wedged GPU) will hang again: don't wait twice.
        if argv[0] in self._timed_out:
            return self._timed_out[argv[0]]
        path = argv[0] if os.path.isabs(argv[0]) else self.which(argv[0])
        if not path or not os.path.exists(path):
            return Unknown("%s: not found" % argv[0])
        limit = timeout or self.timeout
        left = self.time_left()
        if left is not None and left <= 0:
            return BudgetSpent(
                "%s: not run, the %ss time budget is spent" % (argv[0], _seconds(self.budget))
            )
        cut = left is not None and left < limit
        limit = left if cut else limit
        ids = self.run_as.get(argv[0])
        try:
            proc = subprocess.Popen(
                [path] + list(argv[1:]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                universal_newlines=True,
                errors="replace",
                start_new_session=True,  # so a timeout can kill the tool's children too
                preexec_fn=_drop_to(ids) if ids else None,
                cwd="/" if ids else None,
            )
        except (OSError, subprocess.SubprocessError) as exc:  # the latter: a failed drop_to
            return Unknown("%s: %s" % (argv[0], getattr(exc, "strerror", None) or exc))
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            # dkms and friends are shell scripts: kill the group, or their children would
            # hold the pipes open and communicate() would wait for them.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            note = ""
            try:
                proc.communicate(timeout=KILL_GRACE)
            except subprocess.TimeoutExpired:
                # Still there after SIGKILL: stuck in the kernel (nvidia-smi on a wedged GPU sits
                # in D state) or a child outside the group holds the pipes. Don't wait for it.
                for pipe in (proc.stdout, proc.stderr):
                    with contextlib.suppress(OSError):
                        pipe.close()
                note = ", still running after SIGKILL"
            reason = "%s: timeout after %ss%s" % (argv[0], _seconds(limit), note)
            if cut:  # stopped by the budget: not evidence that the tool hangs
                return BudgetSpent(
                    reason + " (the %ss time budget ran out)" % _seconds(self.budget)
                )
            self._timed_out[argv[0]] = Unknown(reason)
            return self._timed_out[argv[0]]
        return (proc.returncode, out, err)

    def read(self, path):
        """File text; raises Unknown naming the path on any error."""
        try:
            with open(path, "r", errors="replace") as fh:
                return fh.read()
        except (IOError, OSError) as exc:
            if getattr(exc, "errno", None) == 2:
                raise Unknown("%s: not found" % path) from None
            if getattr(exc, "errno", None) == 13:
                raise Unknown("permission denied: %s" % path) from None
            raise Unknown("%s: %s" % (path, getattr(exc, "strerror", None) or exc)) from None

    def read_or_none(self, path):
        try:
            return self.read(path)
        except Unknown:
            return None

    def dpkg(self):
        """Installed packages gpufix cares about: {name: version}; cached."""
        if "dpkg" not in self._cache:
            patterns = [
                "nvidia-*",
                "libnvidia-*",
                "*fabricmanager*",
                "linux-modules-nvidia-*",
                "linux-image-*",
                "unattended-upgrades",
                "docker-ce",
                "docker.io",
                "podman",
            ]
            fmt = "${Package}\t${Version}\t${db:Status-Abbrev}\n"
            try:
                rc, out, err = self.run_full(["dpkg-query", "-W", "-f=" + fmt] + patterns)
                self._cache["dpkg"] = parse_dpkg_query(out)
            except Unknown as exc:
                self._cache["dpkg"] = exc
        result = self._cache["dpkg"]
        if isinstance(result, Unknown):
            raise result
        return result


# ----------------------------------------------------------------------------- gatherers


def g_python(ctx, opts):
    return {"executable": sys.executable, "version": platform.python_version()}


def g_os(ctx, opts):
    return parse_os_release(ctx.read("/etc/os-release"))


def g_cpu(ctx, opts):
    return parse_cpuinfo(ctx.read("/proc/cpuinfo"))


def _field(fn, *args):
    try:
        return fn(*args)
    except Unknown as exc:
        return unknown(exc.reason)


def _kernel_sort_key(release):
    return [int(p) if p.isdigit() else 0 for p in re.split(r"[.-]", release)[:4]]


def g_kernel(ctx, opts):
    running = platform.release()
    cmdline = _field(lambda: ctx.read("/proc/cmdline").strip())

    def installed():
        found = set()
        if os.path.isdir("/lib/modules"):
            found.update(d for d in os.listdir("/lib/modules") if d[:1].isdigit())
        try:
            for name in ctx.dpkg():
                m = re.match(r"^linux-image-(?:unsigned-)?(\d.*)$", name)
                if m:
                    found.add(m.group(1))
        except Unknown:
            pass
        return sorted(found, key=_kernel_sort_key)

    def hwe():
        os_info = g_os(ctx, opts)
        meta = HWE_METAPACKAGES.get(os_info.get("codename") or "")
        if os_info.get("id") != "ubuntu" or meta is None:
            return {"metapackage": None, "installed": None, "candidate": None}
        out = {"metapackage": meta, "installed": None, "candidate": None}
        try:
            out["installed"] = ctx.dpkg().get(meta)
        except Unknown as exc:
            out["installed"] = unknown(exc.reason)
        try:
            policy = parse_apt_policy(ctx.run(["apt-cache", "policy", meta]))
            out["candidate"] = policy["candidate"]
        except Unknown as exc:
            out["candidate"] = unknown(exc.reason)
        return out

    return {
        "running": running,
        "cmdline": cmdline,
        "installed": _field(installed),
        "hwe": _field(hwe),
    }


def g_glibc(ctx, opts):
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        value = None
    if value and value.startswith("glibc "):
        return value.split()[1]
    out = ctx.run(["ldd", "--version"])
    first = out.splitlines()[0] if out else ""
    m = re.search(r"(\d+\.\d+)\s*$", first)
    if not m:
        raise Unknown("ldd --version: no version in output")
    return m.group(1)


_PY_VERSION = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


def _interpreter_version(ctx, path):
    out = ctx.run([path, "-c", _PY_VERSION])
    return out.strip() or None


def g_pythons(ctx, opts):
    patterns = [
        "/usr/bin/python3*",
        "/usr/local/bin/python3*",
        "/opt/conda/bin/python3",
        "/opt/miniconda3/bin/python3",
        "/opt/anaconda3/bin/python3",
        os.path.expanduser("~/miniconda3/bin/python3"),
        os.path.expanduser("~/anaconda3/bin/python3"),
    ]
    seen = set()
    found = []
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            if not re.search(r"/python3(\.\d+)?$", path) or not os.access(path, os.X_OK):
                continue
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            found.append({"path": path, "version": _field(_interpreter_version, ctx, path)})
    return found


def _gpu_pci_devices():
    """sysfs BDFs of NVIDIA display/3D controllers (no driver needed)."""
    found = []
    for dev in sorted(glob.glob("/sys/bus/pci/devices/*")):
        try:
            with open(os.path.join(dev, "vendor")) as fh:
                vendor = fh.read().strip()
            with open(os.path.join(dev, "class")) as fh:
                cls = fh.read().strip()
        except (IOError, OSError):
            continue
        if vendor == "0x10de" and cls[:6] in ("0x0300", "0x0302"):
            found.append(os.path.basename(dev))
    return found


def _query_gpus(ctx):
    """(rc, stdout, stderr, fields) of nvidia-smi --query-gpu; older drivers (470) reject
    compute_cap and are asked again without it. Runs once: the Context caches each command."""
    fields = GPU_QUERY_FIELDS
    rc, out, err = ctx.run_full(_query_argv(fields))
    if rc != 0 and "compute_cap" in (out + err) and "valid field" in (out + err):
        fields = [f for f in GPU_QUERY_FIELDS if f != "compute_cap"]
        rc, out, err = ctx.run_full(_query_argv(fields))
    return rc, out, err, fields


def _query_argv(fields):
    return ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def _gpu_query(ctx):
    """(rc, stdout, stderr, fields) of the GPU query; None when the host has no NVIDIA GPU.
    Raises Unknown when nvidia-smi is missing, or NVML itself failed (driver.nvml_error)."""
    if not ctx.which("nvidia-smi"):
        if not _gpu_pci_devices() and not os.path.exists("/proc/driver/nvidia/version"):
            return None  # no NVIDIA GPU at all
        raise Unknown("nvidia-smi: not found")
    rc, out, err, fields = _query_gpus(ctx)
    if "No devices were found" in out + err:
        return None
    error = parse_nvml_error(out + "\n" + err)
    if error:
        raise Unknown("nvidia-smi: " + error)
    return rc, out, err, fields


def g_gpus(ctx, opts):
    query = _gpu_query(ctx)
    if query is None:
        return []
    rc, out, err, fields = query
    # A GPU that fell off the bus fails nvidia-smi (exit 15) while the other GPUs' rows are
    # still printed: keep them; driver.gpu_errors says which GPU failed.
    gpus = gpus_from_query(parse_nvidia_smi_query(out, fields))
    if rc != 0 and not gpus:
        raise Unknown(exit_reason(["nvidia-smi"], rc, out, err))
    if not gpus and out.strip():
        raise Unknown("nvidia-smi: output not understood")
    return gpus


NVML_GPU_IS_LOST = 15


def gpu_errors(rc, out, err):
    """The GPUs a --query-gpu run could not read; [] when it read them all.

    nvidia-smi's exit code is NVML's nvmlReturn_t (nvidia-smi(1), RETURN VALUE; NVML API
    reference, nvmlReturn_t): 15 = NVML_ERROR_GPU_IS_LOST, "the GPU has fallen off the bus or
    has otherwise become inaccessible".
    """
    if rc == 0:
        return []
    errors = parse_gpu_errors(out + "\n" + err, rc)
    if errors:
        return errors
    if rc != NVML_GPU_IS_LOST:  # a crash, a refused field: says nothing of a GPU
        raise Unknown(exit_reason(["nvidia-smi"], rc, out, err))
    detail = (err.strip() or out.strip()).splitlines()  # lost, but which one is not said
    return [{"pci_bus_id": None, "message": detail[0] if detail else None, "rc": rc}]


def _gpu_errors(ctx):
    query = _gpu_query(ctx)
    return [] if query is None else gpu_errors(*query[:3])


def _libnvidia_ml_version():
    """Version of the libnvidia-ml that programs load (what libnvidia-ml.so.1 points at)."""
    for libdir in (
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ):
        candidates = [os.path.realpath(os.path.join(libdir, "libnvidia-ml.so.1"))]
        candidates += sorted(glob.glob(os.path.join(libdir, "libnvidia-ml.so.*.*")), reverse=True)
        for path in candidates:
            m = re.search(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$", path)
            if m and os.path.exists(path):
                return m.group(1)
    return None


def driver_summary(proc_text, libnvidia_ml=None, smi_output=None, installed=None):
    """The snapshot's driver dict from its sources.

    proc_text: /proc/driver/nvidia/version (None when absent); libnvidia_ml: the version in the
    loaded library's file name; smi_output: `nvidia-smi --query-gpu=driver_version` stdout +
    stderr (None when not run); installed: dpkg {name: version}.
    """
    parsed = parse_proc_driver_version(proc_text) if proc_text else None
    if parsed:
        kernel_module = parsed["version"]
    elif proc_text is None:
        kernel_module = unknown("no NVIDIA kernel module loaded")
    else:
        kernel_module = unknown("/proc/driver/nvidia/version: no NVRM line")
    sources = {"libnvidia_ml": libnvidia_ml, "nvidia_smi": None, "dpkg": None}
    nvml_error = parse_nvml_error(smi_output) if smi_output else None
    if smi_output and not nvml_error:
        # A line of its own: a lost GPU's error line holds '0000:02:00.0', which reads as '00.0'.
        m = re.search(r"^\s*(\d{2,3}\.\d{1,3}(?:\.\d{1,3})?)\s*$", smi_output, re.MULTILINE)
        sources["nvidia_smi"] = m.group(1) if m else None
    for name, version in sorted((installed or {}).items()):
        if re.match(r"^(libnvidia-compute|nvidia-utils|libnvidia-gl)-\d+", name):
            sources["dpkg"] = upstream_version(version)
            break
    # The loaded libnvidia-ml is what NVML compares with the module; nvidia-smi reports the
    # module's version, so it is the last resort for userspace.
    userspace = sources["libnvidia_ml"] or sources["dpkg"] or sources["nvidia_smi"]
    if nvml_error and NVML_MISMATCH in nvml_error:
        mismatch = True
    elif isinstance(kernel_module, str) and userspace:
        mismatch = kernel_module != userspace
    else:
        mismatch = None
    return {
        "kernel_module": kernel_module,
        "flavor": parsed["flavor"] if parsed else None,
        "userspace": userspace,
        "userspace_sources": sources,
        "mismatch": mismatch,
        "nvml_error": nvml_error,
    }


def g_driver(ctx, opts):
    proc_text = ctx.read_or_none("/proc/driver/nvidia/version")
    smi_output = None
    if ctx.which("nvidia-smi"):
        try:
            rc, out, err = ctx.run_full(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            )
            smi_output = out + "\n" + err
        except BudgetSpent:
            pass  # not run, or cut short: says nothing about NVML
        except Unknown as exc:
            smi_output = "NVIDIA-SMI has failed: " + exc.reason  # a hanging nvidia-smi is news
    try:
        installed = ctx.dpkg()
    except Unknown:
        installed = {}
    summary = driver_summary(proc_text, _libnvidia_ml_version(), smi_output, installed)
    summary["gpu_errors"] = _field(_gpu_errors, ctx)
    summary["modprobe_blacklist"] = _field(modprobe_blacklist, ctx)
    return summary


# modprobe.d(5): a file in an earlier directory hides a file of the same name in a later one.
MODPROBE_DIRS = (
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/usr/local/lib/modprobe.d",
    "/lib/modprobe.d",
    "/usr/lib/modprobe.d",
)
# nvidia, nvidia-drm, nvidia_uvm, nvidia-current, nvidia-550...; not nvidiafb (framebuffer).
_NVIDIA_MODULE = re.compile(r"^nvidia(?:[-_][A-Za-z0-9_-]{1,56})?$")  # as the facts schema takes it


def parse_modprobe_blacklist(text):
    """NVIDIA module names a modprobe.d file blacklists ('blacklist nvidia')."""
    modules = []
    for line in (text or "").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2 and words[0] == "blacklist" and _NVIDIA_MODULE.match(words[1]):
            modules.append(words[1])
    return modules


def modprobe_blacklist(ctx, dirs=MODPROBE_DIRS):
    """[{module, path}] for each NVIDIA module blacklisted in modprobe.d (nvidia-prime,
    bumblebee or a hand-written file, whatever the driver branch); [] when none is."""
    found, seen = [], set()
    for directory in dirs:
        for path in sorted(glob.glob(os.path.join(directory, "*.conf"))):
            name = os.path.basename(path)
            if name in seen:
                continue
            seen.add(name)
            for module in parse_modprobe_blacklist(ctx.read(path)):
                found.append({"module": module, "path": path})
    return found


def _nvidia_smi_table(ctx, argv):
    if not ctx.which("nvidia-smi"):
        if not _gpu_pci_devices():
            return None
        raise Unknown("nvidia-smi: not found")
    rc, out, err = ctx.run_full(argv)
    error = parse_nvml_error(out + "\n" + err)
    if error:
        raise Unknown("nvidia-smi: " + error)
    if rc != 0:
        raise Unknown("%s: exit %d" % (" ".join(argv[:3]), rc))
    return out


def g_topology(ctx, opts):
    out = _nvidia_smi_table(ctx, ["nvidia-smi", "topo", "-m"])
    if out is None:
        return {"matrix": {}, "worst": None, "raw": None}
    parsed = parse_topo_matrix(out)
    parsed["raw"] = out[:20000]
    return parsed


def g_p2p(ctx, opts):
    out = _nvidia_smi_table(ctx, ["nvidia-smi", "topo", "-p2p", "r"])
    return {"read": parse_topo_p2p(out) if out else {}}


def parents_in_sysfs_path(path, bdf):
    """BDFs above bdf in its /sys/devices path, nearest the root first, in bdf's domain only:
    a VMD controller (0000:00:0e.0 above domain 10000) is no bridge on the GPU's link."""
    domain = split_bdf(bdf)[0]
    bdfs = [p for p in path.split("/") if _SYSFS_BDF.match(p) and split_bdf(p)[0] == domain]
    return bdfs[:-1] if bdfs and bdfs[-1] == bdf else bdfs


def _parent_bridges(bdf):
    """BDFs between the root complex and a device, nearest the root first (from sysfs)."""
    real = os.path.realpath(os.path.join("/sys/bus/pci/devices", bdf))
    return parents_in_sysfs_path(real, bdf)


def g_pcie(ctx, opts):
    gpu_bdfs = _gpu_pci_devices()
    parents_of = dict((bdf, _parent_bridges(bdf)) for bdf in gpu_bdfs)
    try:
        out = ctx.run(["lspci", "-D", "-vvv"])
    except Unknown as exc:
        return {
            "bridges": unknown(exc.reason),
            "gpus_behind_switch": any(len(p) >= 2 for p in parents_of.values()),
            "gpu_bdfs": gpu_bdfs,
        }
    return summarise_pcie(out, gpu_bdfs, parents_of)


def g_iommu(ctx, opts):
    cmd = parse_cmdline(ctx.read_or_none("/proc/cmdline") or "")
    cmdline = {
        "intel_iommu": cmd.get("intel_iommu"),
        "amd_iommu": cmd.get("amd_iommu"),
        "iommu": cmd.get("iommu"),
    }
    groups_dir = "/sys/kernel/iommu_groups"
    groups = len(os.listdir(groups_dir)) if os.path.isdir(groups_dir) else 0
    units = os.listdir("/sys/class/iommu") if os.path.isdir("/sys/class/iommu") else []
    types = set()
    for path in glob.glob(os.path.join(groups_dir, "*", "type")):
        text = (ctx.read_or_none(path) or "").strip()
        if text:
            types.add(text)
    passthrough = cmd.get("iommu") == "pt" or cmd.get("iommu.passthrough") in ("1", "on")
    if groups == 0 and not units:
        mode = "off"
    elif types:
        mode = "pt" if types == {"identity"} else "translated"
    elif passthrough:
        mode = "pt"
    elif groups:
        mode = "translated"
    else:
        mode = "unknown"
    return {"cmdline": cmdline, "groups": groups, "units": len(units), "mode": mode}


def g_shm(ctx, opts):
    try:
        st = os.statvfs("/dev/shm")
    except OSError as exc:
        raise Unknown("/dev/shm: %s" % (exc.strerror or exc)) from None
    return {"size_bytes": st.f_blocks * st.f_frsize, "path": "/dev/shm"}


def _toolkit_version(path):
    try:
        with open(os.path.join(path, "version.json")) as fh:
            return json.load(fh)["cuda"]["version"]
    except (IOError, OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(os.path.join(path, "version.txt")) as fh:
            version = parse_version_line(fh.read())
            if version:
                return version
    except (IOError, OSError):
        pass
    m = re.search(r"cuda-(\d+\.\d+)$", path)
    return m.group(1) if m else None


def g_cuda_toolkits(ctx, opts):
    return [
        {"version": _toolkit_version(p), "path": p}
        for p in sorted(glob.glob("/usr/local/cuda-*"))
        if os.path.isdir(p) and not os.path.islink(p)
    ]


def g_cuda_default(ctx, opts):
    if not os.path.exists("/usr/local/cuda"):
        return None
    real = os.path.realpath("/usr/local/cuda")
    return {"version": _toolkit_version(real), "path": real}


_ENV_SCRIPT = "import json, sys; print(json.dumps(['%d.%d.%d' % sys.version_info[:3]] + sys.path))"


def _dist_version(site, entry):
    full = os.path.join(site, entry)
    candidates = [os.path.join(full, "METADATA"), os.path.join(full, "PKG-INFO"), full]
    for path in candidates:
        if not os.path.isfile(path):
            continue
        try:
            with open(path, "r", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break
        except (IOError, OSError):
            continue
    return None


def read_packages(paths, wanted=None):
    """{name: version or None} for the wanted distributions, first on sys.path wins."""
    wanted = list(wanted or TRACKED_PACKAGES)
    found = dict((name, None) for name in wanted)
    for site in paths:
        if not site or not os.path.isdir(site):
            continue
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in entries:
            if not (entry.endswith(".dist-info") or entry.endswith(".egg-info")):
                continue
            base = entry.rsplit(".", 1)[0]
            name = re.sub(r"[-_.]+", "-", base.split("-", 1)[0]).lower()
            if name in found and found[name] is None:
                found[name] = _dist_version(site, entry)
    return found


def _default_envs(ctx):
    """The python3 on PATH (often a training venv or conda) and the system one, deduplicated."""
    out, seen = [], set()
    for python in (ctx.which("python3"), "/usr/bin/python3"):
        if python and os.access(python, os.X_OK):
            real = os.path.realpath(python)
            if real not in seen:
                seen.add(real)
                out.append(python)
    return out


def _drop_to(ids):
    uid, gid = ids

    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return drop


_NOBODY = 65534


def _with_parents(path, out):
    while path not in out:
        out.append(path)
        if path == os.path.dirname(path):
            break
        path = os.path.dirname(path)


def _venv_home(cfg):
    """pyvenv.cfg's `home` (the base interpreter's directory), or None."""
    try:
        with open(cfg, "r", errors="replace") as fh:
            for line in fh.read(65536).splitlines():
                key, sep, value = line.partition("=")
                if sep and key.strip() == "home" and os.path.isabs(value.strip()):
                    return value.strip()
    except (IOError, OSError):
        pass
    return None


def _trust_paths(python):
    """What decides the code an interpreter runs at start-up: each hop of its link chain and
    the directories above each, its venv's and its base's pyvenv.cfg, lib/, site directories,
    their .pth files (site runs their import lines) and sitecustomize/usercustomize."""
    paths = []
    hop, hops = os.path.abspath(python), 0
    while hops < 40:
        _with_parents(hop, paths)
        if not os.path.islink(hop):
            break
        hop = os.path.normpath(os.path.join(os.path.dirname(hop), os.readlink(hop)))
        hops += 1
    real = os.path.realpath(python)
    _with_parents(real, paths)
    prefixes = [os.path.dirname(os.path.dirname(p)) for p in (os.path.abspath(python), real)]
    home = _venv_home(os.path.join(prefixes[0], "pyvenv.cfg"))
    if home:
        _with_parents(home, paths)
        prefixes.append(os.path.dirname(home))
    for prefix in prefixes:
        paths += [os.path.join(prefix, "pyvenv.cfg"), os.path.join(prefix, "lib")]
        for pattern in (
            "lib/python3*/site-packages",
            "lib/python3*/dist-packages",
            "lib/python3/dist-packages",
            "local/lib/python3*/dist-packages",
        ):
            for site in glob.glob(os.path.join(prefix, pattern)):
                paths.append(site)
                paths += glob.glob(os.path.join(site, "*.pth"))
                paths += [os.path.join(site, n) for n in ("sitecustomize.py", "usercustomize.py")]
    return paths


def interpreter_account(python):
    """(uid, gid) to run an interpreter as, or None for this process's own account. Run as
    root, an interpreter that another account owns or can change (what _trust_paths names:
    owned by it, or writable by a group or everyone without the sticky bit) would run that
    account's code as root (a plan file names its interpreters; a training venv is its
    user's): it runs as that one owner, or as nobody when several accounts or loose modes are
    involved. Only its version and sys.path are read, as any account may."""
    if os.geteuid() != 0:
        return None
    try:
        paths = _trust_paths(python)
    except (OSError, ValueError):
        return (_NOBODY, _NOBODY)
    owners, loose = set(), False
    for path in paths:
        try:
            st = os.lstat(path)  # a link's owner counts; its mode bits mean nothing
        except (OSError, ValueError):
            continue
        if st.st_uid != 0:
            owners.add(st.st_uid)
        if stat.S_ISLNK(st.st_mode):
            continue
        sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & 0o1000
        if st.st_mode & 0o022 and not sticky_dir:
            loose = True
    if len(owners) == 1 and not loose:
        uid = owners.pop()
        try:
            import pwd

            gid = pwd.getpwuid(uid).pw_gid
        except (ImportError, KeyError):
            gid = _NOBODY
        return (uid, gid or _NOBODY)
    return (_NOBODY, _NOBODY) if owners or loose else None


def g_python_envs(ctx, opts):
    envs = []
    for python in opts.get("python_envs") or _default_envs(ctx):
        entry = {"python": python}
        account = interpreter_account(python)
        if account is not None:
            ctx.run_as[python] = account
        try:
            data = json.loads(ctx.run([python, "-c", _ENV_SCRIPT]))
            entry["version"] = data[0]
            entry["packages"] = read_packages(data[1:])
        except Unknown as exc:
            entry["version"] = unknown(exc.reason)
            entry["packages"] = unknown(exc.reason)
        except (ValueError, IndexError, TypeError):
            entry["version"] = unknown("%s: output not understood" % python)
            entry["packages"] = unknown("%s: output not understood" % python)
        envs.append(entry)
    return envs


def g_secure_boot(ctx, opts):
    if ctx.which("mokutil"):
        rc, out, err = ctx.run_full(["mokutil", "--sb-state"])
        parsed = parse_mokutil(out + "\n" + err)
        if parsed["enabled"] is not None:
            return parsed
    if not os.path.isdir("/sys/firmware/efi"):
        return {"enabled": False, "efi": False}
    for path in glob.glob("/sys/firmware/efi/efivars/SecureBoot-*"):
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            # 4 bytes of attributes, then one byte: 1 = enabled.
            return {"enabled": len(data) >= 5 and data[4:5] == b"\x01", "efi": True}
        except (IOError, OSError):
            raise Unknown("permission denied: %s" % path) from None
    raise Unknown("mokutil: not found and no SecureBoot EFI variable")


def g_dkms(ctx, opts):
    if not ctx.which("dkms"):
        return []
    return parse_dkms_status(ctx.run(["dkms", "status"]))


def driver_package(installed):
    """The package a rollback would reinstall: the driver metapackage, else its compute library."""
    for pattern in (r"^nvidia-driver-\d+", r"^cuda-drivers-\d+", r"^libnvidia-compute-\d+"):
        for name in sorted(installed):
            if re.match(pattern, name):
                return name
    return None


NVIDIA_REPO = "developer.download.nvidia.com/compute/cuda/repos"
UBUNTU_ARCHIVE = re.compile(r"//([a-z0-9-]+\.)*(archive|security|ports)\.ubuntu\.com/")
PPA = "ppa.launchpadcontent.net/graphics-drivers"


def driver_origin(version, sources, installed):
    """Where the installed driver came from: 'ubuntu', 'nvidia' (CUDA repository), 'ppa'
    (graphics-drivers) or None. An index that still lists the version says it outright; else
    the Debian revision: Ubuntu's updates are 0ubuntu0.22.04.N, the PPA's 0ubuntu0~gpu22.04.N,
    while NVIDIA's repository ships nvidia-driver-N at 0ubuntu1 (as Ubuntu's release pocket
    may) and cuda-drivers-N, which only it has."""
    for src in sources:
        if NVIDIA_REPO in src:
            return "nvidia"
        if PPA in src:
            return "ppa"
        if UBUNTU_ARCHIVE.search(src):
            return "ubuntu"
    revision = version.rsplit("-", 1)[-1] if "-" in version else ""
    if "~gpu" in revision:
        return "ppa"
    if re.match(r"^0ubuntu0\.\d+\.\d+", revision):
        return "ubuntu"
    if any(n == "cuda-drivers" or n.startswith("cuda-drivers-") for n in installed):
        return "nvidia"
    return None


def g_driver_rollback(ctx, installed):
    """Whether the installed driver version can still be installed from an apt index, and
    which source it came from (a driver kept in place is resolved from that source)."""
    name = driver_package(installed)
    if name is None:
        return {"package": None, "version": None, "installable": None, "origin": None}
    version = installed[name]
    sources = []
    try:
        table = parse_apt_policy_table(ctx.run(["apt-cache", "policy", name]))
        installable = version_installable(table, version)
        sources = table.get(version) or []
    except Unknown as exc:
        installable = unknown(exc.reason)
    origin = driver_origin(version, sources, installed)
    return {"package": name, "version": version, "installable": installable, "origin": origin}


def g_packages(ctx, opts):
    installed = ctx.dpkg()
    nvidia = dict(
        (n, v)
        for n, v in installed.items()
        if n.startswith("nvidia-") or n.startswith("libnvidia-") or "fabricmanager" in n
    )
    held = _field(lambda: parse_showhold(ctx.run(["apt-mark", "showhold"])))
    modules = sorted(n for n in installed if n.startswith("linux-modules-nvidia-"))
    return {
        "nvidia": nvidia,
        "held": held,
        "kernel_nvidia_modules": modules,
        "driver_rollback": _field(g_driver_rollback, ctx, installed),
    }


def g_unattended(ctx, opts):
    packages = ctx.dpkg()
    installed = packages.get("unattended-upgrades") is not None
    config = parse_apt_config_dump(ctx.run(["apt-config", "dump"]))
    enabled = str(config.get("APT::Periodic::Unattended-Upgrade", "0")).strip() not in ("0", "")
    patterns = config.get("Unattended-Upgrade::Package-Blacklist") or []
    if isinstance(patterns, str):
        patterns = [patterns] if patterns else []
    covered = all(blacklist_covers(patterns, n) for n in driver_package_names(packages))
    # Unattended-Upgrade::Automatic-Reboot: the host reboots by itself when an upgrade (a new
    # kernel) asks for it, outside any check gpufix makes. apt's true words (apt-pkg StringToBool).
    reboot = str(config.get("Unattended-Upgrade::Automatic-Reboot", "false")).strip().lower()
    reboots = reboot in ("1", "yes", "true", "with", "on", "enable")
    return {
        "installed": installed,
        "enabled": installed and enabled,
        "nvidia_blacklisted": covered,
        "automatic_reboot": installed and enabled and reboots,
    }


def _ns(pid, kind):
    try:
        return os.readlink("/proc/%s/ns/%s" % (pid, kind))
    except OSError:
        return None


def container_evidence(ctx):
    """What says this process runs in a container (None: nothing does). A Kubernetes pod is
    named first: its runtime may leave /.dockerenv, and under cgroup v2 /proc/1/cgroup is "0::/".
    The kubelet gives every container KUBERNETES_SERVICE_HOST (client-go's InClusterConfig); the
    module's own environment is asked only where PID 1's cannot be read (not root), since a
    shell on a plain host may carry the variable too."""
    pid1 = ctx.read_or_none("/proc/1/environ")
    env = pid1 or ""
    if "\x00KUBERNETES_SERVICE_HOST=" in "\x00" + env:
        return "/proc/1/environ: KUBERNETES_SERVICE_HOST"
    if pid1 is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "environment: KUBERNETES_SERVICE_HOST"
    cgroup = ctx.read_or_none("/proc/1/cgroup") or ""
    if "kubepods" in cgroup:
        return "/proc/1/cgroup: kubepods"
    for marker in ("/.dockerenv", "/run/.containerenv"):
        if os.path.exists(marker):
            return marker
    m = re.search(r"docker|containerd|libpod|lxc", cgroup)
    if m:
        return "/proc/1/cgroup: " + m.group(0)
    if "container=" in env:
        return "/proc/1/environ: container="
    return None


def g_gathered_in(ctx, opts):
    """Where these facts come from: a host, or a container on some host. In a container the
    kernel, driver module and PCIe facts are the host's; packages, services and files are the
    container's own, and changes to the kernel, driver or PCIe belong on the host."""
    evidence = container_evidence(ctx)
    return {"where": "container" if evidence else "host", "evidence": evidence}


def g_containers(ctx, opts):
    in_container = container_evidence(ctx) is not None

    def version(argv):
        if not ctx.which(argv[0]):
            return None
        return parse_version_line(ctx.run(argv))

    docker = _field(version, ["docker", "--version"])
    podman = _field(version, ["podman", "--version"])
    toolkit = _field(version, ["nvidia-ctk", "--version"])
    if toolkit is None:
        try:
            deb = ctx.dpkg().get("nvidia-container-toolkit")
            toolkit = upstream_version(deb) if deb else None
        except Unknown:
            pass

    runtime = None
    if docker is not None or podman is not None:
        runtime = bool(glob.glob("/etc/cdi/nvidia*.yaml") or glob.glob("/var/run/cdi/nvidia*.yaml"))
        text = ctx.read_or_none("/etc/docker/daemon.json")
        if text:
            try:
                daemon = json.loads(text)
                runtimes = daemon.get("runtimes") or {}
                if "nvidia" in runtimes or daemon.get("default-runtime") == "nvidia":
                    runtime = True
            except (ValueError, AttributeError):
                runtime = unknown("/etc/docker/daemon.json: not valid JSON")

    ipc_host = net_host = None
    if in_container:
        # Differs from PID 1 -> our own namespace (PID 1 is the host's init when --pid=host).
        # Same as PID 1 tells nothing when PID 1 is the container's own init.
        ipc_self, ipc_one = _ns("self", "ipc"), _ns("1", "ipc")
        if ipc_self and ipc_one and ipc_self != ipc_one:
            ipc_host = False
        else:
            ipc_host = unknown("cannot tell from inside the container")
        physical = [
            n for n in _listdir("/sys/class/net") if os.path.exists("/sys/class/net/%s/device" % n)
        ]
        net_host = bool(physical) or "docker0" in _listdir("/sys/class/net")
    return {
        "in_container": in_container,
        "docker": docker,
        "podman": podman,
        "nvidia_container_toolkit": toolkit,
        "nvidia_runtime_configured": runtime,
        "ipc_host": ipc_host,
        "net_host": net_host,
        "kubelet": None if in_container else kubelet_node(ctx),
    }


def kubelet_node(ctx):
    """A Kubernetes node: the kubelet's root directory (its --root-dir default) or its binary.
    Pods get /dev/shm from the runtime (64 MiB) or their spec, not from Docker's default."""
    return bool(os.path.isdir("/var/lib/kubelet") or ctx.which("kubelet"))


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def g_fabricmanager(ctx, opts):
    installed = None
    for name, version in sorted(ctx.dpkg().items()):
        if "fabricmanager" in name and not name.startswith("libnvidia"):
            installed = upstream_version(version)
            break
    if installed is None:
        return {"installed": None, "running": False}
    try:
        rc, out, err = ctx.run_full(["systemctl", "is-active", "nvidia-fabricmanager"])
    except Unknown as exc:
        return {"installed": installed, "running": unknown(exc.reason)}
    return {"installed": installed, "running": out.strip() == "active"}


# roles/nccl_profile writes this in the header of every file it writes (templates/nccl.conf.j2)
NCCL_PROFILE_MARKER = "# gpufix nccl_profile:"


def g_nccl(ctx, opts):
    files = {}
    written = []
    for path in ("/etc/nccl.conf", os.path.expanduser("~/.nccl.conf")):
        if os.path.exists(path):
            files[path] = _field(lambda p=path: parse_kv_conf(ctx.read(p)))
            if NCCL_PROFILE_MARKER in (ctx.read_or_none(path) or ""):
                written.append(path)
    env = dict((k, v) for k, v in os.environ.items() if k.startswith("NCCL_"))
    return {"files": files, "env": env, "gpufix_written": written}


def g_gpu_processes(ctx, opts):
    argv = [
        "nvidia-smi",
        "--query-compute-apps=pid,process_name,gpu_uuid,used_memory",
        "--format=csv,noheader,nounits",
    ]
    out = _nvidia_smi_table(ctx, argv)
    return parse_compute_apps(out) if out else []


# No -q for journalctl: it would hide the note that says the system journal was not readable.
KERNEL_LOG_SOURCES = (
    (["dmesg"], "dmesg"),
    (["journalctl", "-k", "-b", "--no-pager"], "journalctl"),
)


def g_kernel_log(ctx, opts):
    reasons = []
    for argv, source in KERNEL_LOG_SOURCES:
        try:
            rc, out, err = ctx.run_full(argv)
        except Unknown as exc:
            reasons.append(exc.reason)
            continue
        if rc != 0:
            reasons.append(exit_reason(argv, rc, out, err))
            continue
        why = kernel_log_unread(out, err)
        if why:
            reasons.append("%s: %s" % (source, why))
            continue
        counts = parse_kernel_log(out)
        counts["source"] = source
        return counts
    raise Unknown("; ".join(reasons))


def g_network(ctx, opts):
    addrs = {}
    try:
        for line in ctx.run(["ip", "-o", "-4", "addr", "show"]).splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[2] == "inet":
                addrs.setdefault(parts[1], []).append(parts[3])
        have_ip = True
    except Unknown:
        have_ip = False
    interfaces = []
    for name in _listdir("/sys/class/net"):
        flags = (ctx.read_or_none("/sys/class/net/%s/flags" % name) or "").strip()
        try:
            up = bool(int(flags, 16) & 1)
        except ValueError:
            up = None
        interfaces.append(
            {"name": name, "up": up, "ipv4": addrs.get(name, []) if have_ip else None}
        )
    return {"interfaces": interfaces, "infiniband": _listdir("/sys/class/infiniband")}


def g_env(ctx, opts):
    return {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}


GATHERERS = (
    ("gathered_in", g_gathered_in),
    ("python", g_python),
    ("os", g_os),
    ("cpu", g_cpu),
    ("kernel", g_kernel),
    ("glibc", g_glibc),
    ("pythons", g_pythons),
    ("gpus", g_gpus),
    ("driver", g_driver),
    ("topology", g_topology),
    ("p2p", g_p2p),
    ("pcie", g_pcie),
    ("iommu", g_iommu),
    ("shm", g_shm),
    ("cuda_toolkits", g_cuda_toolkits),
    ("cuda_default", g_cuda_default),
    ("python_envs", g_python_envs),
    ("secure_boot", g_secure_boot),
    ("dkms", g_dkms),
    ("packages", g_packages),
    ("unattended_upgrades", g_unattended),
    ("containers", g_containers),
    ("fabricmanager", g_fabricmanager),
    ("nccl", g_nccl),
    ("gpu_processes", g_gpu_processes),
    ("kernel_log", g_kernel_log),
    ("network", g_network),
    ("env", g_env),
)

FACT_KEYS = ("module_version",) + tuple(name for name, _ in GATHERERS)


def gather(options=None):
    """All facts as a dict; every key in FACT_KEYS is present, failures read as unknown."""
    opts = dict(options or {})
    ctx = Context(
        timeout=opts.get("timeout") or DEFAULT_TIMEOUT,
        budget=opts.get("total_timeout") or DEFAULT_TOTAL_TIMEOUT,
    )
    facts = {"module_version": MODULE_VERSION}
    for name, fn in GATHERERS:
        try:
            facts[name] = fn(ctx, opts)
        except Unknown as exc:
            facts[name] = unknown(exc.reason)
        except Exception as exc:  # a bug in one gatherer must not lose the others
            facts[name] = unknown("error: %s: %s" % (type(exc).__name__, exc))
    return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python_envs=dict(type="list", elements="path", default=[]),
            timeout=dict(type="int", default=DEFAULT_TIMEOUT),
            total_timeout=dict(type="int", default=DEFAULT_TOTAL_TIMEOUT),
        ),
        supports_check_mode=True,
    )
    for name in ("timeout", "total_timeout"):
        if module.params[name] < 1:
            module.fail_json(msg="%s must be at least 1 second" % name)
    facts = gather(module.params)
    module.exit_json(changed=False, ansible_facts={"gpufix": facts})


if __name__ == "__main__":
    if AnsibleModule is None or (len(sys.argv) > 1 and sys.argv[1] == "--local"):
        print(json.dumps(gather({}), indent=2, sort_keys=True))
    else:
        main()
