"""What the probe measured where training runs (its verdict's `facts`): the torch and NCCL the
training interpreter loaded, and the kernel module's driver version.

The facts module guesses the training environment (the first Python with torch); the probe ran in
the one the user named, so its torch and NCCL win. Its driver and kernel only fill what the facts
lack. Every value is data from a file: it is taken only when it reads as a version.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, TypeGuard

from gpufix import versions
from gpufix.facts.host import Host, PyEnv
from gpufix.probe.merge import PHASES

# torch.__version__: "2.1.2+cu121", "2.1.0a0+32f93b1" (NVIDIA containers' source builds).
_TORCH = re.compile(r"\d+\.\d+(?:\.\d+)?(?:(?:a|b|rc)\d+)?(?:\+[0-9A-Za-z.]+)?")
# ".".join(torch.cuda.nccl.version()): "2.18.6"; a build suffix ("2.18.6+cuda12.1", "2.18.6-1")
# is dropped.
_NCCL = re.compile(r"(\d+\.\d+\.\d+)(?:[+-][0-9A-Za-z.+-]{1,40})?")
_DRIVER = re.compile(r"\d{3}\.\d{1,3}(?:\.\d{1,3})?")
_PYTHON = re.compile(r"\d+\.\d+(?:\.\d+)?")
# /proc/driver/nvidia/version's first line: "NVRM version: NVIDIA UNIX x86_64 Kernel Module
# 535.104.05  Sat Aug 19 01:15:15 UTC 2023" (the open modules say "Open Kernel Module").
_NVRM = re.compile(r"NVRM version: .*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)\s")
_KERNEL = re.compile(r"\d+\.\d+\.\d+[0-9A-Za-z.+_~-]*")
# torch.cuda.get_device_name(): "NVIDIA GeForce RTX 3090", "Tesla V100-SXM2-32GB".
_GPU_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ()._/-]{0,79}")
_MAX_GPUS = 64  # above any one host (DGX-2 and HGX-2 hold 16): a larger count is not a reading


def _read(v: Any, pattern: re.Pattern[str]) -> str | None:
    """The value (or its first group) when all of it matches the pattern."""
    if not isinstance(v, str) or len(v) > 200:
        return None
    m = pattern.fullmatch(v.strip())
    return (m.group(1) if m.groups() else m.group(0)) if m else None


# How people copy an NCCL version into a verdict by hand: "NCCL version 2.19.3+cuda12.2" (NCCL's
# own INFO line), torch's tuple printed "(2, 19, 3)" or as a JSON list.
_NCCL_WORDS = re.compile(r"(?i)nccl(?:\s+version)?\s*:?\s*")
# NCCL's INFO line as a log prints it: "host:123:123 [0] NCCL INFO NCCL version 2.18.6+cuda12.1".
_NCCL_LINE = re.compile(r"(?i)\bNCCL version (\d+\.\d+\.\d+)(?:[+-][0-9A-Za-z.+-]{1,40})?\s*$")
_NCCL_TUPLE = re.compile(r"[(\[]\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*(?:,[^()\[\]]{0,40})?[)\]]")


def _nccl(v: Any) -> str | None:
    """The NCCL version in any form it is printed in: "2.19.3", NCCL's own log line, torch's tuple
    (a list in JSON, or its text), or a version code: NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z up
    to 2.8 and X*10000+Y*100+Z from 2.9 (NVIDIA/nccl src/nccl.h.in; torch before 1.10 returned
    the first form). Only major version 2 exists: anything else is no reading."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        base = 10000 if v >= 10000 else 1000
        parts = (v // base, v % base // 100, v % 100)
    elif isinstance(v, list) and len(v) >= 3 and all(type(x) is int for x in v[:3]):
        parts = (v[0], v[1], v[2])
    elif isinstance(v, str) and len(v) <= 200:
        line = _NCCL_LINE.search(v.strip())
        if line:
            return line.group(1)
        text = _NCCL_WORDS.sub("", v.strip(), count=1)
        m = _NCCL_TUPLE.fullmatch(text)
        if not m:
            return _read(text, _NCCL)
        parts = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    else:
        return None
    if parts[0] != 2 or not all(0 <= p <= 99 for p in parts[1:]):
        return None  # NCCL_VERSION packs minor and patch in two digits each
    return ".".join(map(str, parts))


def measured(verdict: dict[str, Any] | None) -> dict[str, str]:
    """The probe's readings that read as versions: torch, nccl, python, driver, kernel. Only from
    a run on the GPUs (backend nccl): a --cpu or gloo run did not use the GPU stack, and its
    torch may be a CPU build."""
    v = verdict or {}
    f = v.get("facts")
    if not isinstance(f, dict) or v.get("backend") != "nccl":
        return {}
    out = {
        "torch": _read(f.get("torch"), _TORCH),
        "nccl": _nccl(f.get("nccl")),
        "python": _read(f.get("python"), _PYTHON),
        "kernel": _read(f.get("kernel"), _KERNEL),
    }
    # The probe writes /proc/driver/nvidia/version's line; a bare version is taken too.
    line = f.get("driver")
    m = _NVRM.match(line) if isinstance(line, str) and len(line) <= 300 else None
    driver = m.group(1) if m else _read(line, _DRIVER)
    out["driver"] = driver if driver and versions.driver(driver) else None
    return {k: v for k, v in out.items() if v}


def probe_gpus(verdict: dict[str, Any] | None) -> tuple[int, tuple[str, ...]] | None:
    """How many GPUs the probe's own run on this host used, and their names as torch gave them:
    its ranks' CUDA device count (`facts.gpu_count`), else, from a verdict that lacks it, one GPU
    per rank of an NCCL run whose CUDA start ended (the probe gives each rank its own GPU, and
    NCCL refuses two ranks on one). None for a --cpu/gloo or multi-node run, or no count."""
    v = verdict or {}
    if v.get("backend") != "nccl" or v.get("scope") == "multi-node":
        return None
    f = v.get("facts")
    f = f if isinstance(f, dict) else {}
    count = f.get("gpu_count")
    if not _count(count):
        count = v.get("world_size") if _cuda_started(v) else None
        if not _count(count) or count < 2:
            return None
    raw = f.get("gpu_names")
    names = raw if isinstance(raw, dict) else {}
    read = [_read(names.get(str(i)), _GPU_NAME) for i in range(count)]
    return count, tuple(n for n in read if n) if all(read) else ()


_AFTER_CUDA = frozenset(PHASES[PHASES.index("cuda_init") + 1 :])  # in the order ranks run them


def _cuda_started(v: dict[str, Any]) -> bool:
    """The ranks' CUDA start ended: the `cuda_init` phases recorded passed, or, where none is
    recorded, the run was in a later phase (the verdict's phases, or where it failed or stalled:
    a hand-written verdict may name only that, `failed_in: pg_init` with no phases)."""
    phases = [p for p in v.get("phases") or [] if isinstance(p, dict)]
    starts = [p.get("ok") for p in phases if p.get("phase") == "cuda_init"]
    if starts:
        return all(ok is True for ok in starts)  # a rank whose CUDA start failed: no count
    wheres = [p.get("phase") for p in phases]
    for key in ("failed_in", "stalled"):
        where = v.get(key)
        wheres.append(where.get("phase") if isinstance(where, dict) else None)
    return any(w in _AFTER_CUDA for w in wheres)


def _count(n: Any) -> TypeGuard[int]:
    return isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= _MAX_GPUS


def with_probe_facts(h: Host, verdict: dict[str, Any] | None) -> Host:
    """The host with the probe's torch and NCCL as its training environment's, its driver and
    kernel where the facts have none, and its GPUs where the facts could not list them;
    `probe_measured` names what was taken."""
    m = measured(verdict)
    taken: list[str] = []
    gpus = probe_gpus(verdict) if h.gpu_count is None else None
    if gpus is not None:
        h = replace(h, gpu_count=gpus[0], gpu_names=gpus[1])
        taken.append("gpus")
    env = h.env
    if "torch" in m or "nccl" in m:
        base = env or PyEnv(
            python="", version=m.get("python"), torch=None, transformers=None, accelerate=None
        )
        changes: dict[str, Any] = {}
        for key in ("torch", "nccl"):
            if key in m and m[key] != getattr(base, key):
                changes[key] = m[key]
                taken.append(key)
        if "torch" in changes and "nccl" not in m:
            changes["nccl"] = None  # the facts' NCCL wheel went with the torch it replaced
        env = replace(base, **changes) if changes else env
    counts = {"xid": h.xid, "aer": h.aer}
    for key, have in list(counts.items()):
        seen = kernel_log_count(verdict, key)
        if seen is not None and (have is None or seen > have):
            # The probe read the kernel log later, where the run failed: a higher count since
            # boot is the newer reading (expert review, 2026-12-06: Xid/AER went unread).
            counts[key] = seen
            taken.append(f"kernel_log.{key}")
    driver, kernel = h.driver, h.kernel
    if driver is None and "driver" in m:
        driver = m["driver"]
        taken.append("driver")
    if kernel is None and "kernel" in m:
        kernel = m["kernel"]
        taken.append("kernel")
    if not taken:
        return h
    return replace(
        h,
        env=env,
        driver=driver,
        kernel=kernel,
        xid=counts["xid"],
        aer=counts["aer"],
        probe_measured=tuple(taken),
    )


def kernel_log_count(verdict: dict[str, Any] | None, key: str) -> int | None:
    """The probe's count of Xid or AER lines since boot (`facts.kernel_log`), from a run on the
    GPUs; None when it has none or it is not a count."""
    v = verdict or {}
    f = v.get("facts")
    log = f.get("kernel_log") if isinstance(f, dict) and v.get("backend") == "nccl" else None
    n = log.get(key) if isinstance(log, dict) else None
    ok = isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 10**9
    return n if ok else None
