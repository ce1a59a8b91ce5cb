#!/usr/bin/env python3
"""gpufix multi-GPU probe: a verdict on torch.distributed start-up in seconds, never a hang.

Runs on the target with only the standard library and the host's torch (Python 3.6+). A
supervisor spawns one fresh worker process per rank, each in its own session; workers append
every phase they enter and leave to a per-rank JSON-lines file, which the supervisor reads
even when a worker is wedged inside a C call. On a stall the supervisor kills the workers'
process groups and names the phase and the ranks. See docs/probe.md.

This file must not import gpufix: it is shipped alone to the host by roles/probe.
"""

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from typing import Any, Dict, List, Optional, Tuple

FORMAT = "gpufix-probe"
VERSION = 1
EXIT_OK = 0
EXIT_NOT_HEALTHY = 1
EXIT_INVALID = 3

PHASES = (
    "import_torch",
    "cuda_init",
    "alloc",
    "p2p_matrix",
    "p2p_copy",
    "pg_init",
    "barrier",
    "allreduce",
    "destroy",
)
# In these phases every rank waits for the others: a rank that reached the collective call is
# waiting, not stuck, until all ranks have reached it.
COLLECTIVE = ("pg_init", "barrier", "allreduce")
# Phases whose stall or slowness is worth a second run with NCCL_P2P_DISABLE=1.
P2P_SENSITIVE = ("p2p_copy", "pg_init", "barrier", "allreduce")

# Seconds after which a phase that finished counts as slow (capped at half the phase deadline).
# cuda_init/alloc: field notes say torch.randn(100, device="cuda:1") takes under 2 s; 5x that
# is far over. import_torch is never "slow": a cold page cache after reboot is not the fault.
SLOW_AFTER_S = {
    "import_torch": None,
    "cuda_init": 10.0,
    "alloc": 10.0,
    "p2p_matrix": 5.0,
    "p2p_copy": 10.0,
    "pg_init": 10.0,
    "barrier": 5.0,
    "allreduce": 20.0,
    "destroy": 10.0,
}
SINGLE_GPU_SLOW_INIT_S = 10.0

# Floors below which a finished GPU run is degraded, by the worst link class between GPUs
# (nvidia-smi topo -m). Deliberately low: they flag "a tiny fraction of the link rate" (the
# PCIe ACS redirect signature: peer traffic bounced through the root complex), not tuning.
# NVLink pairs copy at 100+ GB/s, PCIe 4.0 x16 pairs at ~20 GB/s, PCIe 3.0 at ~10 GB/s.
LINK_FLOORS = {
    "nvlink": {"copy_gbps": 10.0, "busbw_gbps": 20.0},
    "pcie": {"copy_gbps": 1.5, "busbw_gbps": 1.0},
    "sys": {"copy_gbps": 1.0, "busbw_gbps": 0.5},
}

# The cause table: evidence id -> (strategy for the decision engine, why).
CAUSES = {
    "driver-mismatch": (
        "driver-pin",
        "NVML/CUDA reports a driver/library version mismatch: the kernel module and the "
        "user-space libraries differ (an unattended upgrade without reboot); pin every "
        "nvidia-*/libnvidia-* package at one version",
    ),
    "driver-too-old": (
        "cuda-downgrade",
        "the CUDA runtime in torch needs a newer driver than the one loaded "
        "(NVIDIA CUDA release notes, Table 3): use a torch/CUDA build the driver supports",
    ),
    "shm": (
        "container-fix",
        "shared memory ran out (/dev/shm too small, typical in containers): give the "
        "container --ipc=host or --shm-size",
    ),
    "p2p-path": (
        "pcie-acs",
        "the multi-GPU run stalled or crawled in a peer-to-peer phase and the rerun with "
        "NCCL_P2P_DISABLE=1 was healthy: the PCIe peer path is broken (ACS redirect or IOMMU "
        "translation); disable ACS on the bridges above the GPUs / use iommu=pt",
    ),
    "p2p-path-workaround": (
        "nccl-profile",
        "fallback: an NCCL profile with NCCL_P2P_DISABLE=1 avoids the broken peer path at a "
        "bandwidth cost and hides the cause",
    ),
    "p2p-slow-copy": (
        "pcie-acs",
        "GPU-to-GPU copies ran at a tiny fraction of the link rate, the ACS redirect signature",
    ),
    "nccl-transport": (
        "nccl-profile",
        "NCCL set-up or collectives stalled with peer-to-peer off too: transport or interface "
        "choice (NCCL_SOCKET_IFNAME, IB, SHM); try an NCCL profile",
    ),
    "gpu-init": (
        "driver-pin",
        "CUDA initialisation stalled, failed or crawled: driver state (persistence daemon, "
        "Xid errors, a half-upgraded driver); reinstall and pin one driver branch",
    ),
    "single-gpu-fallback": (
        "single-gpu",
        "one GPU works on its own: train on one GPU until the multi-GPU path is fixed",
    ),
}
# Text signatures in worker errors, stderr and the NCCL log -> cause id.
TEXT_SIGNS = (
    (re.compile(r"driver/library version mismatch", re.I), "driver-mismatch"),
    (
        re.compile(r"driver version is insufficient|CUDA driver is too old|too old", re.I),
        "driver-too-old",
    ),
    (
        re.compile(r"No space left on device|/dev/shm|shm_open|unable to allocate shared", re.I),
        "shm",
    ),
    (
        re.compile(r"ncclSystemError|unhandled system error|ncclInternalError", re.I),
        "nccl-transport",
    ),
)

FAULT_ENV = "GPUFIX_PROBE_FAULT"
FAULT_RUN_ENV = "GPUFIX_PROBE_FAULT_RUN"
FAULT_ACTIONS = ("stall", "crash", "slow")
KILL_GRACE_S = 0.5
POLL_S = 0.05


# --------------------------------------------------------------------------- worker side


def phases_for(kind: str, cpu: bool) -> List[str]:
    """The phases a worker of this run kind goes through, in order."""
    if kind == "single":
        names = ["import_torch", "cuda_init", "alloc"]
    else:
        names = list(PHASES)
        if kind == "nop2p":
            # Direct peer copies ignore NCCL_P2P_DISABLE; skipping them is what isolates NCCL.
            names.remove("p2p_copy")
    if cpu:
        # No CUDA: the p2p_copy phase copies between host buffers (a stand-in that keeps the
        # same supervision path testable on CPU).
        names = [p for p in names if p not in ("cuda_init", "p2p_matrix")]
    return names


def parse_fault(spec: str) -> Tuple[str, str, Optional[int], Optional[float]]:
    """Parse GPUFIX_PROBE_FAULT="<action>:<phase>:<rank|*>[:<seconds>]" (test-only switch)."""
    bad = ValueError(
        "bad %s=%r: want <stall|crash|slow>:<phase>:<rank|*>[:<seconds>]" % (FAULT_ENV, spec)
    )
    parts = spec.split(":")
    if len(parts) not in (3, 4) or parts[0] not in FAULT_ACTIONS or parts[1] not in PHASES:
        raise bad
    try:
        rank = None if parts[2] == "*" else int(parts[2])
        seconds = float(parts[3]) if len(parts) == 4 else None
    except ValueError:
        raise bad from None
    return parts[0], parts[1], rank, seconds


class Reporter(object):
    """Appends phase events to this rank's JSON-lines file, flushed line by line."""

    def __init__(self, path: str) -> None:
        # Held open for the worker's life: one line per event, flushed at once.
        self._f = open(path, "a", buffering=1)  # noqa: SIM115

    def emit(self, event: str, phase: Optional[str], **fields: Any) -> None:
        rec = {"e": event, "p": phase, "t": time.monotonic()}
        rec.update(fields)
        self._f.write(json.dumps(rec) + "\n")
        self._f.flush()


class Worker(object):
    def __init__(self, ns: argparse.Namespace) -> None:
        self.ns = ns
        self.rank = ns.rank
        self.world = ns.world_size
        self.cpu = ns.cpu
        self.kind = ns.kind
        self.quick = ns.quick
        self.rep = Reporter(os.path.join(ns.run_dir, "rank%d.jsonl" % ns.rank))
        self.fault: Optional[Tuple[str, str, Optional[int], Optional[float]]] = None
        self.torch: Any = None
        self.dist: Any = None
        self.device: Any = None
        self.backend = ns.backend
        self.devices: List[int] = []

    def maybe_fault(self, phase: str) -> None:
        if self.fault is None:
            return
        action, fphase, frank, seconds = self.fault
        if fphase != phase or (frank is not None and frank != self.rank):
            return
        if action == "crash":
            raise RuntimeError("%s: injected crash in %s" % (FAULT_ENV, phase))
        if action == "slow":
            time.sleep(5.0 if seconds is None else seconds)
            return
        # stall: ignore SIGTERM like a process wedged in a driver call, so the supervisor's
        # SIGKILL path is exercised too.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600.0 if seconds is None else seconds)

    def run(self) -> int:
        spec = os.environ.get(FAULT_ENV)
        only = os.environ.get(FAULT_RUN_ENV, "all")
        phase = "import_torch"
        try:
            if spec and (only == "all" or only == self.kind):
                self.fault = parse_fault(spec)
            for phase in phases_for(self.kind, self.cpu):
                self.rep.emit("enter", phase)
                self.maybe_fault(phase)
                data = getattr(self, "phase_" + phase)()
                self.rep.emit("leave", phase, data=data or {})
        except BaseException as exc:  # report anything, even SystemExit, before dying
            tb = traceback.format_exc().strip().splitlines()[-6:]
            self.rep.emit("error", phase, msg="%s: %s" % (type(exc).__name__, exc), tb=tb)
            return 1
        self.rep.emit("done", None)
        return 0

    def called(self, phase: str) -> None:
        self.rep.emit("call", phase)

    def sync(self) -> None:
        if not self.cpu:
            for d in self.devices:
                self.torch.cuda.synchronize(d)

    # Phases. Each returns a small dict of results for the supervisor.

    def phase_import_torch(self) -> Dict[str, Any]:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        return {"torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None)}

    def phase_cuda_init(self) -> Dict[str, Any]:
        torch = self.torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False (torch %s)" % torch.__version__)
        count = torch.cuda.device_count()
        if self.kind == "single":
            self.devices = [0]
        else:
            # Ranks beyond the GPU count share GPUs (NCCL may refuse that; the verdict says so).
            self.devices = sorted(set(r % count for r in range(self.world)))
        dev = self.rank % count
        torch.cuda.set_device(dev)
        torch.cuda.init()
        self.device = torch.device("cuda", dev)
        nccl = None
        with contextlib.suppress(Exception):
            nccl = ".".join(str(x) for x in torch.cuda.nccl.version())
        return {"device_count": count, "name": torch.cuda.get_device_name(dev), "nccl": nccl}

    def phase_alloc(self) -> Dict[str, Any]:
        torch = self.torch
        if self.device is None:
            self.device = torch.device("cpu")
        x = torch.randn(100, device=self.device)
        self.sync()
        return {"sum": float(x.sum().item())}

    def phase_p2p_matrix(self) -> Dict[str, Any]:
        me = self.device.index
        row = {}
        for j in self.devices:
            if j != me:
                row[str(j)] = bool(self.torch.cuda.can_device_access_peer(me, j))
        return {"row": row}

    def phase_p2p_copy(self) -> Dict[str, Any]:
        torch = self.torch
        nbytes = (1 if self.quick else 16) << 20
        reps = 2 if self.quick else 5
        if self.cpu:
            peers = [("host", torch.device("cpu"))]
            src = torch.empty(nbytes, dtype=torch.uint8)
        else:
            me = self.device.index
            peers = [(str(j), torch.device("cuda", j)) for j in self.devices if j != me]
            src = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        gbps = {}
        for name, dev in peers:
            dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
            dst.copy_(src)
            self.sync()
            t0 = time.monotonic()
            for _ in range(reps):
                dst.copy_(src)
            self.sync()
            dt = max(time.monotonic() - t0, 1e-9)
            gbps[name] = round(nbytes * reps / dt / 1e9, 3)
        return {"gbps": gbps}

    def phase_pg_init(self) -> Dict[str, Any]:
        import datetime

        dist = self.dist
        backend = self.backend
        if backend == "auto":
            backend = "gloo" if self.cpu or not dist.is_nccl_available() else "nccl"
        self.backend = backend
        self.called("pg_init")
        dist.init_process_group(
            backend,
            init_method="file://" + os.path.join(self.ns.run_dir, "store"),
            rank=self.rank,
            world_size=self.world,
            timeout=datetime.timedelta(seconds=max(self.ns.phase_deadline * 4, 60)),
        )
        # NCCL builds its communicator lazily at the first collective: do it here so that a
        # set-up hang is reported as pg_init, not as the barrier.
        t = self.torch.ones(1, device=self.device)
        dist.all_reduce(t)
        self.sync()
        return {"backend": backend}

    def phase_barrier(self) -> Dict[str, Any]:
        self.called("barrier")
        if self.backend == "nccl":
            try:
                self.dist.barrier(device_ids=[self.device.index])
            except TypeError:  # torch < 1.8 has no device_ids
                self.dist.barrier()
        else:
            self.dist.barrier()
        self.sync()
        return {}

    def phase_allreduce(self) -> Dict[str, Any]:
        torch, dist = self.torch, self.dist
        if self.quick:
            sizes = [1 << 20]
        elif self.cpu:
            sizes = [1 << 16, 1 << 20, 1 << 23]
        else:
            sizes = [1 << 20, 1 << 24, 1 << 27]
        reps = 2 if self.quick else 5
        self.called("allreduce")
        out = []
        for nbytes in sizes:
            t = torch.ones(nbytes // 4, dtype=torch.float32, device=self.device)
            dist.all_reduce(t)  # warm-up
            self.sync()
            t0 = time.monotonic()
            for _ in range(reps):
                dist.all_reduce(t)
            self.sync()
            out.append([nbytes, (time.monotonic() - t0) / reps])
        return {"sizes": out}

    def phase_destroy(self) -> Dict[str, Any]:
        self.dist.destroy_process_group()
        return {}


# --------------------------------------------------------------------------- supervisor side


class RankState(object):
    def __init__(self, rank: int, proc: subprocess.Popen, path: str, spawned: float) -> None:
        self.rank = rank
        self.proc = proc
        self.path = path
        self.spawned = spawned
        self.offset = 0
        self.buf = ""
        self.enter: Dict[str, float] = {}
        self.call: Dict[str, float] = {}
        self.leave: Dict[str, float] = {}
        self.data: Dict[str, Dict[str, Any]] = {}
        self.error: Optional[Dict[str, Any]] = None
        self.done = False
        self.last_t = spawned

    def read(self) -> None:
        try:
            with open(self.path, "r") as f:
                f.seek(self.offset)
                chunk = f.read()
                self.offset = f.tell()
        except IOError:
            return
        self.buf += chunk
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.apply(rec)

    def apply(self, rec: Dict[str, Any]) -> None:
        e, p, t = rec.get("e"), str(rec.get("p")), rec.get("t", time.monotonic())
        self.last_t = t
        if e == "enter":
            self.enter[p] = t
        elif e == "call":
            self.call[p] = t
        elif e == "leave":
            self.leave[p] = t
            self.data[p] = rec.get("data") or {}
        elif e == "error":
            self.error = {"phase": p, "t": t, "msg": rec.get("msg"), "tb": rec.get("tb") or []}
        elif e == "done":
            self.done = True

    def position(self, phases: List[str]) -> int:
        """Index of the phase this rank is in or about to enter."""
        for i, p in enumerate(phases):
            if p not in self.leave:
                return i
        return len(phases)


class RunResult(object):
    def __init__(self, kind: str, phases: List[str]) -> None:
        self.kind = kind
        self.phases = phases
        self.status = "ok"  # ok | hung | failed
        self.stalled: Optional[Dict[str, Any]] = None
        self.failed_in: Optional[Dict[str, Any]] = None
        self.error: Optional[str] = None
        self.ranks: List[RankState] = []
        self.unkillable: List[int] = []
        self.texts: List[str] = []


def kill_groups(states: List[RankState]) -> List[int]:
    """SIGTERM every worker's process group, then SIGKILL; returns ranks that would not die."""
    alive = [s for s in states if s.proc.poll() is None]
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 2.0)):
        for s in alive:
            with contextlib.suppress(OSError):
                os.killpg(s.proc.pid, sig)
        end = time.monotonic() + grace
        while alive and time.monotonic() < end:
            alive = [s for s in alive if s.proc.poll() is None]
            if alive:
                time.sleep(0.02)
        if not alive:
            break
    # Reap the rest of each group too (children a worker started: compile workers, ...).
    for s in states:
        with contextlib.suppress(OSError):
            os.killpg(s.proc.pid, signal.SIGKILL)
    return [s.rank for s in alive]  # stuck in uninterruptible sleep (D state), if any


def tail_file(path: str, n: int) -> List[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except (IOError, OSError):
        return []
    return [ln for ln in lines if ln.strip()][-n:]


class Supervisor(object):
    def __init__(
        self, ns: argparse.Namespace, run_root: str, nccl_dir: str, t0: float, deadline_at: float
    ) -> None:
        self.ns = ns
        self.run_root = run_root
        self.nccl_dir = nccl_dir
        self.t0 = t0
        self.deadline_at = deadline_at
        self.live: List[RankState] = []

    def worker_env(self, kind: str) -> Dict[str, str]:
        env = dict(os.environ)
        env["NCCL_DEBUG"] = "INFO"
        env["NCCL_DEBUG_FILE"] = os.path.join(self.nccl_dir, kind + ".%h.%p.log")
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one host: keep gloo off odd interfaces
        env["PYTHONUNBUFFERED"] = "1"
        if kind == "nop2p":
            env["NCCL_P2P_DISABLE"] = "1"
        if kind == "single" and not self.ns.cpu:
            env["CUDA_VISIBLE_DEVICES"] = "0"  # set before torch is imported: the point
        return env

    def phase_deadline(self, phase: str) -> float:
        # import torch after a reboot reads a cold page cache: give it twice the time.
        return self.ns.phase_deadline * (2 if phase == "import_torch" else 1)

    def run(self, kind: str, world: int) -> RunResult:
        ns = self.ns
        run_dir = os.path.join(self.run_root, kind)
        os.mkdir(run_dir)
        res = RunResult(kind, phases_for(kind, ns.cpu))
        env = self.worker_env(kind)
        me = os.path.abspath(__file__)
        for r in range(world):
            cmd = [sys.executable, me, "--worker", "--run-id", ns.run_id, "--kind", kind]
            cmd += ["--rank", str(r), "--world-size", str(world), "--backend", ns.backend]
            cmd += ["--run-dir", run_dir, "--phase-deadline", str(ns.phase_deadline)]
            cmd += ["--cpu"] if ns.cpu else []
            cmd += ["--quick"] if ns.quick or kind == "nop2p" else []
            with open(os.path.join(run_dir, "rank%d.out" % r), "wb") as out:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # own process group: killable as a whole
                    close_fds=True,
                )
            st = RankState(r, proc, os.path.join(run_dir, "rank%d.jsonl" % r), time.monotonic())
            res.ranks.append(st)
            self.live.append(st)
        try:
            self.watch(res)
        finally:
            res.unkillable = kill_groups(res.ranks)
            self.live = []
        for st in res.ranks:
            st.read()
            res.texts += tail_file(os.path.join(run_dir, "rank%d.out" % st.rank), 30)
        return res

    def watch(self, res: RunResult) -> None:
        phases = res.phases
        while True:
            now = time.monotonic()
            for st in res.ranks:
                st.read()
            if self.check_failed(res, now):
                return
            if all(st.done for st in res.ranks):
                return
            stall = self.find_stall(res, now)
            if stall is not None or now >= self.deadline_at:
                res.status = "hung"
                res.stalled = self.describe_stall(res, phases)
                if now >= self.deadline_at:
                    res.stalled["by"] = "probe deadline"
                return
            time.sleep(POLL_S)

    def check_failed(self, res: RunResult, now: float) -> bool:
        for st in res.ranks:
            if st.proc.poll() is not None:
                st.read()  # it may have written its last events just before exiting
        errs = [st for st in res.ranks if st.error is not None]
        exited = [
            st
            for st in res.ranks
            if st.proc.poll() is not None and st.error is None and not st.done
        ]
        if not errs and not exited:
            return False
        res.status = "failed"
        # A rank that died without a word (a signal) is the origin; its peers' errors
        # ("connection closed") follow from it. Else the earliest reported error.
        if errs and not exited:
            first = min(errs, key=lambda s: (s.error or {})["t"])
            err = first.error or {}
            res.failed_in = {"phase": err["phase"], "ranks": [first.rank]}
            res.error = "rank %d in %s: %s" % (first.rank, err["phase"], err["msg"])
            res.texts += err["tb"]
        else:
            st = exited[0]
            phase = res.phases[min(st.position(res.phases), len(res.phases) - 1)]
            rc = st.proc.returncode
            how = "signal %d" % -rc if rc < 0 else "code %d" % rc
            res.failed_in = {"phase": phase, "ranks": [st.rank]}
            res.error = "rank %d exited with %s in %s" % (st.rank, how, phase)
        return True

    def find_stall(self, res: RunResult, now: float) -> Optional[int]:
        phases = res.phases
        for st in res.ranks:
            if st.done:
                continue
            i = st.position(phases)
            if i >= len(phases):
                continue  # between the last phase and "done"
            phase = phases[i]
            # Between phases, or not started yet: count from the last event (or the spawn).
            since = st.enter.get(phase, st.last_t)
            if phase in COLLECTIVE and phase in st.call:
                # Waiting for the others: judge from when the last rank arrived.
                calls = [o.call.get(phase) for o in res.ranks if o.position(phases) <= i]
                if any(c is None for c in calls):
                    continue
                since = max(c for c in calls if c is not None)
            if now - since > self.phase_deadline(phase):
                return st.rank
        return None

    def describe_stall(self, res: RunResult, phases: List[str]) -> Dict[str, Any]:
        unfinished = [st for st in res.ranks if not st.done]
        i = min(st.position(phases) for st in unfinished)
        phase = phases[min(i, len(phases) - 1)]
        at = [st for st in unfinished if st.position(phases) == i]
        culprits = at
        if phase in COLLECTIVE:
            not_called = [st for st in at if phase not in st.call]
            if not_called:
                culprits = not_called
        ranks = sorted(st.rank for st in culprits)
        waiting = sorted(st.rank for st in unfinished if st.rank not in ranks)
        return {"phase": phase, "ranks": ranks, "waiting": waiting}


# --------------------------------------------------------------------------- evidence


def rel(t: Optional[float], t0: float) -> Optional[float]:
    return None if t is None else round(t - t0, 3)


def phase_records(res: RunResult, t0: float) -> List[Dict[str, Any]]:
    out = []
    for p in res.phases:
        for st in res.ranks:
            if p in st.enter:
                end = st.leave.get(p)
                out.append(
                    {
                        "phase": p,
                        "rank": st.rank,
                        "start": rel(st.enter[p], t0),
                        "end": rel(end, t0),
                        "ok": end is not None,
                    }
                )
    return out


def slow_phases(res: RunResult, cap: float) -> List[Dict[str, Any]]:
    """Finished phases over their slow threshold, naming the ranks that made them slow."""
    out = []
    for p in res.phases:
        limit = SLOW_AFTER_S.get(p)
        if limit is None:
            continue
        limit = min(limit, cap)
        ranks = [st for st in res.ranks if p in st.leave and p in st.enter]
        if len(ranks) != len(res.ranks) or not ranks:
            continue
        own = {}
        for st in ranks:
            # Time a rank spent before the collective call is its own; after it, shared.
            stop = st.call.get(p, st.leave[p]) if p in COLLECTIVE else st.leave[p]
            own[st.rank] = stop - st.enter[p]
        culprits = sorted(r for r, s in own.items() if s > limit)
        seconds = max(own.values()) if culprits else 0.0
        if not culprits and p in COLLECTIVE:
            shared = max(st.leave[p] for st in ranks) - max(st.call.get(p, 0.0) for st in ranks)
            if shared > limit:
                culprits, seconds = sorted(own), shared
        if culprits:
            out.append(
                {"phase": p, "ranks": culprits, "seconds": round(seconds, 3), "threshold": limit}
            )
    return out


def p2p_evidence(res: RunResult) -> Dict[str, Any]:
    matrix: Dict[str, Dict[str, bool]] = {}
    copy: Dict[str, float] = {}
    for st in res.ranks:
        me = st.data.get("cuda_init", {})
        src = str(st.rank % me["device_count"]) if me.get("device_count") else str(st.rank)
        row = st.data.get("p2p_matrix", {}).get("row")
        if row:
            matrix[src] = row
        for dst, g in sorted(st.data.get("p2p_copy", {}).get("gbps", {}).items()):
            copy["%s-%s" % (src, dst)] = g
    return {"matrix": matrix, "copy_gbps": copy}


def allreduce_evidence(res: RunResult) -> List[Dict[str, Any]]:
    n = len(res.ranks)
    per_size: Dict[int, float] = {}
    for st in res.ranks:
        for nbytes, secs in st.data.get("allreduce", {}).get("sizes", []):
            # As nccl-tests: the slowest rank's time sets the bandwidth.
            per_size[nbytes] = max(per_size.get(nbytes, 0.0), secs)
    out = []
    for nbytes in sorted(per_size):
        algbw = nbytes / max(per_size[nbytes], 1e-12) / 1e9
        busbw = algbw * 2.0 * (n - 1) / n
        out.append(
            {
                "bytes": nbytes,
                "seconds": round(per_size[nbytes], 9),
                "algbw_gbps": round(algbw, 6),
                "busbw_gbps": round(busbw, 6),
            }
        )
    return out


def link_class(topo_worst: Optional[str]) -> str:
    if topo_worst and topo_worst.startswith("NV"):
        return "nvlink"
    if topo_worst == "SYS":
        return "sys"
    return "pcie"  # PIX/PXB/PHB/NODE, or unknown: the conservative middle


def run_summary(res: Optional[RunResult]) -> Optional[Dict[str, Any]]:
    if res is None:
        return None
    return {
        "verdict": {"ok": "healthy", "hung": "hung", "failed": "failed"}[res.status],
        "stalled": res.stalled,
        "failed_in": res.failed_in,
        "error": res.error,
    }


def find_causes(ev: Dict[str, Any]) -> List[Dict[str, str]]:
    """Map the evidence of one probe to likely causes, most specific first."""
    ids: List[str] = []
    text = "\n".join(ev.get("texts") or [])
    for rx, cid in TEXT_SIGNS:
        if rx.search(text) and cid not in ids:
            ids.append(cid)
    main = ev.get("main") or {}
    rerun = ev.get("rerun") or {}
    single = ev.get("single") or {}
    where = (main.get("stalled") or main.get("failed_in") or {}).get("phase")
    slow = [s["phase"] for s in ev.get("slow") or []]
    trouble_p2p = main.get("verdict") == "hung" and where in P2P_SENSITIVE
    trouble_p2p = trouble_p2p or any(p in P2P_SENSITIVE for p in slow) or ev.get("low_bw")
    if trouble_p2p and rerun.get("verdict") == "healthy":
        ids += ["p2p-path", "p2p-path-workaround"]
    if ev.get("low_copy") and "p2p-path" not in ids:
        ids.append("p2p-slow-copy")
    hung_in = main.get("stalled", {}).get("phase") if main.get("stalled") else None
    nccl_phase = hung_in in COLLECTIVE or any(p in COLLECTIVE for p in slow)
    if nccl_phase and rerun.get("verdict") != "healthy" and not ids:
        ids.append("nccl-transport")
    init_trouble = where in ("cuda_init", "alloc") or single.get("verdict") in ("hung", "failed")
    init_trouble = init_trouble or any(p in ("cuda_init", "alloc") for p in slow)
    if (init_trouble or ev.get("slow_single")) and not ids:
        ids.append("gpu-init")
    if single.get("verdict") == "healthy" and main.get("verdict") in ("hung", "failed"):
        ids.append("single-gpu-fallback")
    out = []
    for cid in ids:
        strategy, why = CAUSES[cid]
        out.append({"id": cid, "strategy": strategy, "why": why})
    return out


# --------------------------------------------------------------------------- cheap facts


def count_gpus() -> Tuple[int, str]:
    """GPUs this process may use, without importing torch, and how that was decided."""
    n = 0
    how = ""
    gdir = "/proc/driver/nvidia/gpus"
    if os.path.isdir(gdir):
        n, how = len(os.listdir(gdir)), gdir
    if n == 0:
        out = run_cmd(["nvidia-smi", "-L"], 10)
        if out is not None:
            n, how = len([ln for ln in out.splitlines() if ln.startswith("GPU ")]), "nvidia-smi -L"
    if n == 0 and os.path.isdir("/dev"):
        n = len([d for d in os.listdir("/dev") if re.match(r"^nvidia\d+$", d)])
        how = "/dev/nvidia*" if n else ""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if n and cvd is not None:
        visible = [x for x in cvd.split(",") if x.strip() and x.strip() != "-1"]
        n, how = min(n, len(visible)), how + " and CUDA_VISIBLE_DEVICES"
    return n, how or "no /proc/driver/nvidia/gpus, nvidia-smi or /dev/nvidia*"


def run_cmd(cmd: List[str], timeout: float) -> Optional[str]:
    try:
        p = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            universal_newlines=True,
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None
    return out if p.returncode == 0 else None


def topo_worst(raw: Optional[str]) -> Optional[str]:
    """Worst link class between GPU pairs in `nvidia-smi topo -m` output."""
    if not raw:
        return None
    order = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}

    def badness(cell: str) -> int:
        return order.get("NV" if cell.startswith("NV") else cell, -1)

    lines = [ln for ln in raw.splitlines() if ln.strip()]
    if not lines:
        return None
    header = lines[0].split()
    gpu_cols = [i for i, h in enumerate(header) if re.match(r"^GPU\d+$", h)]
    worst: Optional[str] = None
    for ln in lines[1:]:
        cells = ln.split()
        if not cells or not re.match(r"^GPU\d+$", cells[0]):
            continue
        for i in gpu_cols:
            if i + 1 >= len(cells):
                continue
            c = cells[i + 1]
            if badness(c) >= 0 and (worst is None or badness(c) > badness(worst)):
                worst = c
    return worst


def cheap_facts(gpu: bool, timeout: float) -> Dict[str, Any]:
    facts: Dict[str, Any] = {
        "kernel": os.uname()[2],
        "python": sys.version.split()[0],
        "driver": None,
        "topology": None,
        "topology_worst": None,
    }
    try:
        with open("/proc/driver/nvidia/version") as f:
            facts["driver"] = f.readline().strip()
    except (IOError, OSError):
        pass
    if gpu and timeout > 0:
        raw = run_cmd(["nvidia-smi", "topo", "-m"], timeout)
        if raw:
            facts["topology"] = raw.strip().splitlines()[:20]
            facts["topology_worst"] = topo_worst(raw)
    return facts


# --------------------------------------------------------------------------- output


def write_atomic(path: str, text: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".gpufix-probe.", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)  # same directory: atomic for the textfile collector
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def prom_escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prometheus(verdict: Dict[str, Any]) -> str:
    lines = []

    def metric(name: str, help_: str, samples: List[Tuple[Dict[str, str], float]]) -> None:
        lines.append("# HELP %s %s" % (name, help_))
        lines.append("# TYPE %s gauge" % name)
        for labels, value in samples:
            lab = ",".join('%s="%s"' % (k, prom_escape(str(v))) for k, v in sorted(labels.items()))
            lines.append("%s%s %s" % (name, "{%s}" % lab if lab else "", repr(round(value, 6))))

    verdicts = ("healthy", "degraded", "hung", "failed", "not-applicable")
    metric(
        "gpufix_probe_verdict",
        "1 for the verdict of the last probe run, 0 for the others.",
        [({"verdict": v}, 1.0 if verdict["verdict"] == v else 0.0) for v in verdicts],
    )
    metric(
        "gpufix_probe_phase_seconds",
        "Seconds each rank spent in each finished probe phase.",
        [
            ({"phase": p["phase"], "rank": str(p["rank"])}, p["end"] - p["start"])
            for p in verdict["phases"]
            if p["end"] is not None
        ],
    )
    metric(
        "gpufix_probe_allreduce_busbw_gbps",
        "All-reduce bus bandwidth in GB/s (nccl-tests definition) by message size.",
        [({"bytes": str(a["bytes"])}, a["busbw_gbps"]) for a in verdict["allreduce"]],
    )
    metric(
        "gpufix_probe_p2p_copy_gbps",
        "Peer copy bandwidth in GB/s between GPU pairs (source-destination).",
        [({"pair": k}, v) for k, v in sorted(verdict["p2p"]["copy_gbps"].items())],
    )
    metric(
        "gpufix_probe_duration_seconds", "Wall time of the probe.", [({}, verdict["duration_s"])]
    )
    metric(
        "gpufix_probe_last_run_timestamp_seconds",
        "Unix time the probe finished.",
        [({}, time.time())],
    )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


class ArgError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ArgError(message)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="gpufix_probe.py", description="Multi-GPU start-up probe (never hangs).")
    p.add_argument("--world-size", type=int, default=None, help="ranks (default: one per GPU)")
    p.add_argument("--backend", choices=("nccl", "gloo", "auto"), default="auto")
    p.add_argument("--cpu", action="store_true", help="gloo on CPU (testing without a GPU)")
    p.add_argument("--deadline", type=float, default=120.0, help="whole probe, seconds")
    p.add_argument("--phase-deadline", type=float, default=30.0, help="each phase, seconds")
    p.add_argument("--quick", action="store_true", help="smaller copies, one all-reduce size")
    p.add_argument("--no-single-gpu", action="store_true", help="skip the single-GPU baseline")
    p.add_argument("--no-p2p-rerun", action="store_true", help="skip the NCCL_P2P_DISABLE rerun")
    p.add_argument("--json-out", metavar="FILE", help="also write the verdict here (atomic)")
    p.add_argument("--prom-out", metavar="FILE", help="Prometheus textfile (atomic)")
    p.add_argument("--nccl-log", metavar="DIR", help="keep NCCL debug logs in DIR")
    # Worker mode: started by the supervisor only.
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--kind", default="main", help=argparse.SUPPRESS)
    p.add_argument("--run-dir", help=argparse.SUPPRESS)
    p.add_argument("--run-id", default="", help=argparse.SUPPRESS)
    return p


def check_args(ns: argparse.Namespace) -> None:
    if ns.world_size is not None and not 1 <= ns.world_size <= 256:
        raise ArgError("--world-size must be between 1 and 256")
    if not ns.deadline > 0 or not ns.phase_deadline > 0:
        raise ArgError("--deadline and --phase-deadline must be positive")
    if ns.cpu and ns.backend == "nccl":
        raise ArgError("--cpu runs gloo; --backend nccl needs GPUs")
    if ns.worker and (not ns.run_dir or ns.kind not in ("main", "nop2p", "single")):
        raise ArgError("worker mode needs --run-dir and --kind main|nop2p|single")
    for opt in ("json_out", "prom_out"):
        path = getattr(ns, opt)
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise ArgError("--%s: directory of %s does not exist" % (opt.replace("_", "-"), path))


def base_verdict(ns: argparse.Namespace, host: str, world: int, backend: str) -> Dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "host": host,
        "run_id": ns.run_id,
        "verdict": "not-applicable",
        "backend": backend,
        "world_size": world,
        "deadline_s": ns.deadline,
        "phase_deadline_s": ns.phase_deadline,
        "duration_s": 0.0,
        "stalled": None,
        "failed_in": None,
        "error": None,
        "phases": [],
        "slow": [],
        "single_gpu": None,
        "p2p": {"matrix": {}, "copy_gbps": {}},
        "no_p2p_rerun": None,
        "allreduce": [],
        "causes": [],
        "notes": [],
        "facts": {},
        "nccl_log_tail": [],
        "unkillable_ranks": [],
    }


def supervise(ns: argparse.Namespace) -> Dict[str, Any]:
    t0 = time.monotonic()
    deadline_at = t0 + ns.deadline
    ns.run_id = uuid.uuid4().hex[:12]
    host = socket.gethostname()
    if ns.cpu:
        ngpu, how = 0, "--cpu"
    else:
        ngpu, how = count_gpus()
    world = ns.world_size or max(ngpu, 1)
    backend = "gloo" if ns.cpu or ns.backend == "gloo" else "nccl"
    v = base_verdict(ns, host, world, backend)
    v["facts"] = cheap_facts(not ns.cpu and ngpu > 1, min(10.0, ns.deadline / 10))
    if not ns.cpu and ngpu == 0:
        v["notes"].append("no NVIDIA GPU visible (%s); use --cpu to test with gloo" % how)
        v["duration_s"] = round(time.monotonic() - t0, 3)
        return v

    run_root = tempfile.mkdtemp(prefix="gpufix-probe-%s-" % ns.run_id)
    if ns.nccl_log:
        nccl_dir = os.path.abspath(ns.nccl_log)
        if not os.path.isdir(nccl_dir):
            os.makedirs(nccl_dir)
    else:
        nccl_dir = os.path.join(run_root, "nccl")
        os.mkdir(nccl_dir)
    sup = Supervisor(ns, run_root, nccl_dir, t0, deadline_at)

    def on_signal(signum: int, frame: Any) -> None:
        # Killed from outside (ansible timeout, Ctrl-C): take the workers down with us.
        kill_groups(sup.live)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        fill_verdict(v, sup, ns, world, t0)
    finally:
        kill_groups(sup.live)
        v["nccl_log_tail"] = nccl_tail(nccl_dir, 40)
        shutil.rmtree(run_root, ignore_errors=True)
    v["duration_s"] = round(time.monotonic() - t0, 3)
    return v


def nccl_tail(nccl_dir: str, n: int) -> List[str]:
    try:
        names = [os.path.join(nccl_dir, x) for x in os.listdir(nccl_dir)]
    except OSError:
        return []
    names.sort(key=lambda p: os.path.getmtime(p))
    lines: List[str] = []
    for path in names:
        lines += tail_file(path, 400)
    # WARN lines say what went wrong; the plain tail says where it stopped.
    warns = [ln for ln in lines if "NCCL WARN" in ln][-(n // 2) :]
    rest = [ln for ln in lines if ln not in warns][-(n - len(warns)) :]
    return warns + rest


def fill_verdict(
    v: Dict[str, Any], sup: Supervisor, ns: argparse.Namespace, world: int, t0: float
) -> None:
    ev: Dict[str, Any] = {"texts": []}
    single: Optional[RunResult] = None
    if not ns.no_single_gpu:
        single = sup.run("single", 1)
        ev["texts"] += single.texts
        s = run_summary(single) or {}
        r0 = single.ranks[0]
        start, imp = r0.enter.get("import_torch"), r0.leave.get("import_torch")
        end = r0.leave.get("alloc")
        # init_s = CUDA init + a small alloc: the figure the field notes put under 2 s.
        s["import_s"] = round(imp - start, 3) if imp and start else None
        s["init_s"] = round(end - imp, 3) if end and imp else None
        s["device"] = "cpu" if ns.cpu else "cuda:0"
        v["single_gpu"] = s
        ev["single"] = s
        if s["init_s"] is not None and s["init_s"] > SINGLE_GPU_SLOW_INIT_S and not ns.cpu:
            ev["slow_single"] = True
            v["notes"].append("single GPU init took %.1f s (field notes: under 2 s)" % s["init_s"])
        if single.status != "ok":
            # One GPU alone does not come up: several will not either. Report that.
            v["verdict"] = s["verdict"]
            v["stalled"], v["failed_in"], v["error"] = (
                single.stalled,
                single.failed_in,
                single.error,
            )
            v["phases"] = phase_records(single, t0)
            v["notes"].append("single-GPU baseline did not pass; multi-GPU run skipped")
            v["unkillable_ranks"] = single.unkillable
            ev["main"] = run_summary(single)
            v["causes"] = find_causes(ev)
            return

    main = sup.run("main", world)
    ev["texts"] += main.texts
    v["phases"] = phase_records(main, t0)
    v["stalled"], v["failed_in"], v["error"] = main.stalled, main.failed_in, main.error
    v["unkillable_ranks"] = main.unkillable
    for st in main.ranks:
        b = st.data.get("pg_init", {}).get("backend")
        if b:
            v["backend"] = b
        info = st.data.get("import_torch")
        if info and "torch" not in v["facts"]:
            v["facts"]["torch"] = info.get("torch")
            v["facts"]["torch_cuda"] = info.get("cuda")
        cinfo = st.data.get("cuda_init")
        if cinfo and "nccl" not in v["facts"]:
            v["facts"]["nccl"] = cinfo.get("nccl")
    v["p2p"] = p2p_evidence(main)
    v["allreduce"] = allreduce_evidence(main)
    v["slow"] = slow_phases(main, ns.phase_deadline / 2.0)
    ev["main"] = run_summary(main)
    ev["slow"] = v["slow"]

    degraded = list(v["slow"])
    if main.status == "ok" and not ns.cpu and v["backend"] == "nccl" and world > 1:
        cls = link_class(v["facts"].get("topology_worst"))
        floors = LINK_FLOORS[cls]
        low = [k for k, g in v["p2p"]["copy_gbps"].items() if g < floors["copy_gbps"]]
        if low:
            ev["low_copy"] = True
            degraded.append("p2p_copy")
            v["notes"].append(
                "P2P copy under %.1f GB/s (%s links) for %s" % (floors["copy_gbps"], cls, low)
            )
        big = v["allreduce"][-1] if v["allreduce"] else None
        if big and big["busbw_gbps"] < floors["busbw_gbps"]:
            ev["low_bw"] = True
            degraded.append("allreduce")
            v["notes"].append(
                "all-reduce busbw %.2f GB/s at %d bytes, under %.1f GB/s for %s links"
                % (big["busbw_gbps"], big["bytes"], floors["busbw_gbps"], cls)
            )
    if ev.get("slow_single"):
        degraded.append("single")
    v["verdict"] = {
        "ok": "degraded" if degraded else "healthy",
        "hung": "hung",
        "failed": "failed",
    }[main.status]

    where = (main.stalled or main.failed_in or {}).get("phase")
    wants_rerun = (main.status == "hung" and where in P2P_SENSITIVE) or ev.get("low_bw")
    wants_rerun = wants_rerun or any(s["phase"] in P2P_SENSITIVE for s in v["slow"])
    if wants_rerun and not ns.no_p2p_rerun and world > 1:
        left = sup.deadline_at - time.monotonic()
        if left < min(ns.phase_deadline, 5.0):
            v["no_p2p_rerun"] = {"verdict": "skipped", "why": "%.1f s left of the deadline" % left}
        else:
            rerun = sup.run("nop2p", world)
            ev["texts"] += rerun.texts
            r = run_summary(rerun) or {}
            ar = allreduce_evidence(rerun)
            r["busbw_gbps"] = ar[-1]["busbw_gbps"] if ar else None
            v["no_p2p_rerun"] = r
            ev["rerun"] = r
    v["causes"] = find_causes(ev)


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
        check_args(ns)
    except ArgError as exc:
        sys.stderr.write("gpufix_probe: %s (see --help)\n" % exc)
        return EXIT_INVALID
    if ns.worker:
        return Worker(ns).run()
    v = supervise(ns)
    text = json.dumps(v, indent=2, sort_keys=True) + "\n"
    if ns.json_out:
        write_atomic(ns.json_out, text)
    if ns.prom_out:
        write_atomic(ns.prom_out, prometheus(v))
    sys.stdout.write(text)
    sys.stdout.flush()
    return EXIT_OK if v["verdict"] in ("healthy", "not-applicable") else EXIT_NOT_HEALTHY


if __name__ == "__main__":
    sys.exit(main())
