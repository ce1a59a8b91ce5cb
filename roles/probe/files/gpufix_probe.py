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
import errno
import json
import math
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

FORMAT = "gpufix-probe"
VERSION = 1
EXIT_OK = 0
EXIT_NOT_HEALTHY = 1
EXIT_WRITE_FAILED = 1  # --prom-from: its one output could not be written
EXIT_INVALID = 3

PHASES = (
    "import_torch",
    "cuda_init",
    "alloc",
    "p2p_matrix",
    "p2p_copy",
    "rendezvous",  # multi-node only: every rank reaches the TCP store on the first host
    "pg_init",
    "barrier",
    "allreduce",
    "soak",  # --soak only: the all-reduce size sweep
    "destroy",
)
# In these phases every rank waits for the others: a rank that reached the collective call is
# waiting, not stuck, until all ranks have reached it.
COLLECTIVE = ("rendezvous", "pg_init", "barrier", "allreduce", "soak")
# Phases whose stall, failure or slowness is worth experiments (one mechanism changed at a time).
P2P_SENSITIVE = ("p2p_copy", "rendezvous", "pg_init", "barrier", "allreduce", "soak")

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
    "rendezvous": None,  # waits for other hosts' imports: not a measure of this host
    "soak": None,  # a sweep takes as long as its sizes and iterations make it
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
        "the multi-GPU run stalled or crawled in a peer-to-peer phase and a rerun with P2P "
        "off (NCCL_P2P_DISABLE=1) or kept under PCIe switches (NCCL_P2P_LEVEL=PXB) was "
        "healthy: the PCIe peer path is broken (ACS redirect or IOMMU translation); disable "
        "ACS on the bridges above the GPUs / use iommu=pt",
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
        "NCCL set-up or a collective stalled and no one-mechanism experiment made it healthy "
        "(or none ran): transport or interface choice (NCCL_SOCKET_IFNAME, IB, SHM) or an NCCL "
        "bug; try an NCCL profile or another NCCL version",
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
    # The Python environment, not the host: no strategy changes the machine for these.
    "torch-missing": (
        "none",
        "torch is not installed in the interpreter the probe ran with: run it with the "
        "training environment's python (facts: python_envs; gpufix --python-env)",
    ),
    "torch-import": (
        "none",
        "`import torch` stalled or failed: the Python environment (a broken or partial "
        "install, site-packages on a slow or unreachable file system), not the GPU driver",
    ),
}
CAUSES.update(
    {
        "shm-transport": (
            "nccl-profile",
            "the run was healthy with NCCL_SHM_DISABLE=1: NCCL's shared-memory transport fails "
            "here (in a container: a small /dev/shm or a private IPC namespace); a profile with "
            "it off is the interim fix",
        ),
        "cumem": (
            "nccl-profile",
            "the run was healthy with NCCL_CUMEM_ENABLE=0: NCCL's cuMem allocations fail here "
            "(driver, container or NCCL version); a profile with it off is the interim fix",
        ),
        "ib-path": (
            "nccl-profile",
            "the run was healthy with NCCL_IB_DISABLE=1: the InfiniBand/RoCE path fails "
            "(HCA, GID, firewall, or GPUDirect RDMA); sockets are the interim fix",
        ),
        "gpu-direct-rdma": (
            "nccl-profile",
            "the run was healthy with NCCL_NET_GDR_LEVEL=LOC: the NIC cannot reach GPU memory "
            "directly (GPU Direct RDMA), most often ACS redirecting PCIe peer traffic (NCCL's "
            "own hint for IB local protection errors); GDR off is the interim fix",
        ),
        "nccl-protocol": (
            "nccl-profile",
            "the run was healthy with NCCL_PROTO=Simple: a low-latency protocol (LL/LL128) "
            "fails on this path; often an NCCL bug fixed in a later release",
        ),
        "nccl-algorithm": (
            "nccl-profile",
            "the run was healthy with NCCL_ALGO=Ring: the tree/NVLS algorithm fails here; "
            "often an NCCL bug fixed in a later release",
        ),
        "nvls": (
            "nccl-profile",
            "the run was healthy with NCCL_NVLS_ENABLE=0: NVLink SHARP fails (fabric manager, "
            "driver or NCCL version)",
        ),
        "mnnvl": (
            "nccl-profile",
            "the run was healthy with NCCL_MNNVL_ENABLE=0: NCCL's multi-node NVLink between the "
            "hosts fails (the IMEX domain, the NVLink fabric, driver or NCCL version); traffic "
            "between the hosts goes over the network without it",
        ),
        "socket-interface": (
            "nccl-profile",
            "the run was healthy with NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME set to another "
            "interface: the default choice is one the peers cannot reach",
        ),
        "gpu-path": (
            "pcie-acs",
            "every GPU pair that includes one GPU hangs and the pairs without it pass: the path "
            "to that GPU (its PCIe bridge, ACS) or the GPU itself",
        ),
        "link-path": (
            "pcie-acs",
            "one GPU pair hangs while every other pair passes: the peer link between those two",
        ),
        # Multi-node (gpufix probe GROUP --multi-node names these from every host's part).
        "store-port-busy": (
            "none",
            "the first host could not serve the rendezvous store: its port is in use there (an "
            "earlier probe or job that has not ended, or another service); wait for it to end, "
            "or give another port (--master-port)",
        ),
        "rendezvous-unreachable": (
            "none",
            "ranks on some hosts never reached the rendezvous store on the first host: a "
            "firewall or route between the hosts blocks MASTER_ADDR:MASTER_PORT; open it, or "
            "give an address the others can reach",
        ),
        "bootstrap-blocked": (
            "none",
            "every rank reached the store but the process group did not form: the ranks' own "
            "connections between the hosts are blocked (a firewall on their ports) or they "
            "advertise an address the others cannot reach",
        ),
        "container-network": (
            "container-fix",
            "the hosts are containers on private networks and the ranks could not connect "
            "across them: run the containers with host networking (--network=host)",
        ),
        "job-setting": (
            "none",
            "the run was healthy without the job's own settings (--job-env) and not with them: "
            "one of those settings causes the failure on this host (job_env_culprit names the "
            "one the failure needs, when the runs could tell); take it out of the job",
        ),
    }
)
# The causes an experiment that turned the run healthy points at ("ifname" for any ifname-*).
DECIDED_CAUSES = {
    "p2p-off": ("p2p-path", "p2p-path-workaround"),
    "p2p-level-pxb": ("p2p-path", "p2p-path-workaround"),
    "shm-off": ("shm-transport",),
    "cumem-off": ("cumem",),
    "ib-off": ("ib-path",),
    "gdr-off": ("gpu-direct-rdma",),
    "proto-simple": ("nccl-protocol",),
    "algo-ring": ("nccl-algorithm",),
    "nvls-off": ("nvls",),
    "mnnvl-off": ("mnnvl",),
    "ifname": ("socket-interface",),
    "job-env-off": ("job-setting",),
}
# Text signatures in worker errors, stderr and the NCCL log -> cause id.
TEXT_SIGNS = (
    (re.compile(r"No module named '?torch'?($|[^.\w])", re.M), "torch-missing"),
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
    # torch 2.x names the errno, 1.x prints strerror; store_port_free() words it the same
    (re.compile(r"EADDRINUSE|address already in use", re.I), "store-port-busy"),
)

FAULT_ENV = "GPUFIX_PROBE_FAULT"
FAULT_RUN_ENV = "GPUFIX_PROBE_FAULT_RUN"
FAULT_RUNS = ("all", "main", "exp", "pair", "single")
FAULT_ACTIONS = ("stall", "crash", "slow", "corrupt")
KILL_GRACE_S = 0.5
CMD_REAP_S = 2.0  # how long a command killed at its timeout may take to die before we give up
# A worker ends itself this long after its run's deadline, should the supervisor be gone.
WORKER_GRACE_S = 10.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
MAX_SECONDS = 86400.0  # the longest deadline or budget the program accepts
MAX_VERDICT_BYTES = 16 << 20  # --prom-from: a verdict is kilobytes; more is not one
# A run's files (events, rank logs, NCCL logs, the file store) take kilobytes to a few MiB.
RUN_DIR_FREE_BYTES = 16 << 20
SOAK_PROGRESS_S = 1.0  # how often a long soak size reports a finished collective
POLL_S = 0.05


# --------------------------------------------------------------------------- worker side


def phases_for(kind: str, cpu: bool, soak: bool = False, multinode: bool = False) -> List[str]:
    """The phases a worker of this run kind (single, main, exp, pair) goes through, in order."""
    if kind == "single":
        names = ["import_torch", "cuda_init", "alloc"]
    else:
        names = [p for p in PHASES if p not in ("rendezvous", "soak")]
        if multinode:
            # Peer copies are the host probe's business; the store on the first host is new.
            names = [p for p in names if p not in ("p2p_matrix", "p2p_copy")]
            names.insert(names.index("pg_init"), "rendezvous")
        if kind == "exp" and "p2p_copy" in names:
            # Direct peer copies ignore NCCL's environment; skipping them isolates NCCL.
            names.remove("p2p_copy")
        if soak:
            names.insert(names.index("destroy"), "soak")
    if cpu:
        # No CUDA: the p2p_copy phase copies between host buffers (a stand-in that keeps the
        # same supervision path testable on CPU).
        names = [p for p in names if p not in ("cuda_init", "p2p_matrix")]
    return names


FAULT_GRAMMAR = (
    "<stall|crash|slow|corrupt>:<phase>:<rank|*>[:<seconds>]"
    "[;unless=VAR=VALUE]...[;if=VAR=VALUE]...[;gpus=I+J...][;at-bytes=N]"
)


def parse_fault(spec: str) -> Dict[str, Any]:
    """Parse the test-only switch GPUFIX_PROBE_FAULT (grammar: FAULT_GRAMMAR, docs/probe.md)."""
    bad = ValueError("bad %s=%r: want %s" % (FAULT_ENV, spec, FAULT_GRAMMAR))
    head, clauses = spec.split(";")[0], spec.split(";")[1:]
    parts = head.split(":")
    if len(parts) not in (3, 4) or parts[0] not in FAULT_ACTIONS or parts[1] not in PHASES:
        raise bad
    fault: Dict[str, Any] = {"action": parts[0], "phase": parts[1], "unless": [], "if": []}
    fault.update({"gpus": [], "at_bytes": None})
    try:
        fault["rank"] = None if parts[2] == "*" else _at_least(int(parts[2]), 0)
        fault["seconds"] = _seconds(parts[3]) if len(parts) == 4 else None
        for clause in clauses:
            key, _, value = clause.partition("=")
            if key in ("unless", "if") and "=" in value:
                fault[key].append(tuple(value.split("=", 1)))
            elif key == "gpus":
                fault["gpus"] = [_at_least(int(x), 0) for x in value.split("+")]
            elif key == "at-bytes":
                fault["at_bytes"] = _at_least(int(value), 1)
            else:
                raise ValueError(clause)
    except ValueError:
        raise bad from None
    return fault


def _at_least(n: int, low: int) -> int:
    if n < low:
        raise ValueError(n)
    return n


def _seconds(text: str) -> float:
    """A finite, non-negative number of seconds (not nan, inf or -3)."""
    value = float(text)
    if not 0 <= value <= 86400:  # nan compares false
        raise ValueError(text)
    return value


def fault_fires(
    fault: Dict[str, Any], phase: str, rank: int, gpus: List[int], nbytes: Optional[int]
) -> bool:
    """Whether a parsed fault hits this rank now: only while all of its `if` settings hold,
    and it clears under any of its `unless` knobs."""
    if fault["phase"] != phase or fault["rank"] not in (None, rank):
        return False
    if not set(fault["gpus"]) <= set(gpus) or fault["at_bytes"] != nbytes:
        return False
    if not all(os.environ.get(var) == value for var, value in fault["if"]):
        return False
    return not any(os.environ.get(var) == value for var, value in fault["unless"])


def parse_sizes(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x]


def tie_to_supervisor(parent_pid: int, exit_after: float) -> None:
    """A worker must not outlive its supervisor (SIGKILLed, OOM-killed) nor its run's deadline."""
    if exit_after > 0:
        # SIGALRM's default action ends the process in the kernel, even while this thread is
        # wedged in a C call that never returns to Python.
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(math.ceil(exit_after))
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the alarm above is the backstop
    if parent_pid and os.getppid() != parent_pid:
        os._exit(1)  # the supervisor died before prctl took effect


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT held back (delivered, and handled, when the block ends)."""
    held = {signal.SIGTERM, signal.SIGINT}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


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
        self.fault: Optional[Dict[str, Any]] = None
        self.corrupting = False  # the test-only fault "corrupt" fired in this phase
        self.torch: Any = None
        self.dist: Any = None
        self.device: Any = None
        self.store: Any = None
        self.backend = ns.backend
        self.devices: List[int] = []
        # The GPUs of this run in the probe's numbering (ranks stand in for them on --cpu).
        self.gpus = parse_sizes(ns.gpus) if ns.gpus else list(range(self.world))
        self.soak_sizes = parse_sizes(ns.soak_sizes or "")

    def maybe_fault(self, phase: str, nbytes: Optional[int] = None) -> None:
        f = self.fault
        if f is None or not fault_fires(f, phase, self.rank, self.gpus, nbytes):
            return
        action, seconds = f["action"], f["seconds"]
        if action == "corrupt":
            # the phase's result on this rank is altered before it is checked (p2p_copy,
            # allreduce): silent corruption, as a faulty peer path would give
            self.corrupting = True
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
            multinode = (self.ns.nnodes or 1) > 1
            for phase in phases_for(self.kind, self.cpu, bool(self.soak_sizes), multinode):
                self.rep.emit("enter", phase)
                self.corrupting = False
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
            nccl = nccl_text(torch.cuda.nccl.version())
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
        # known bytes, so that a copy that arrives changed is caught, not only timed
        src.copy_(torch.randint(0, 256, (nbytes,), dtype=torch.uint8))
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
            if self.corrupting:
                dst[0] = (int(dst[0].item()) + 1) % 256
            same_bytes(torch, src, dst, "the P2P copy to %s" % name)
        return {"gbps": gbps}

    def timeout(self) -> Any:
        import datetime

        # Longer than any deadline of ours (the rendezvous wait is phase + import deadline):
        # the supervisor, not a torch timeout, decides that a rank hung.
        pd = self.ns.phase_deadline
        longest = pd + (self.ns.import_deadline or 2 * pd)
        return datetime.timedelta(seconds=max(60.0, 4 * pd, 2 * longest))

    def phase_rendezvous(self) -> Dict[str, Any]:
        addr, port = self.ns.master_addr, self.ns.master_port
        if self.rank == 0:
            store_port_free(port)
        server = tcp_store(self.dist, addr, port, self.world, self.rank == 0, self.timeout())
        # This run's keys only: ranks of another run that reach the same store (one that has
        # not ended yet) count for theirs, never for this one.
        self.store = self.dist.PrefixStore(store_prefix(self.ns.store_key), server)
        # Connected: from here this rank waits for the others, as in a collective.
        self.called("rendezvous")
        meet(self.store, self.world, self.rank == 0)
        return {"store": "%s:%d" % (addr, port)}

    def phase_pg_init(self) -> Dict[str, Any]:
        dist = self.dist
        backend = self.backend
        if backend == "auto":
            backend = "gloo" if self.cpu or not dist.is_nccl_available() else "nccl"
        self.backend = backend
        self.called("pg_init")
        if self.store is not None:
            where = {"store": dist.PrefixStore("pg", self.store)}
        else:
            where = {"init_method": "file://" + os.path.join(self.ns.run_dir, "store")}
        dist.init_process_group(
            backend, rank=self.rank, world_size=self.world, timeout=self.timeout(), **where
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
            if self.corrupting:
                t[0] += 1
            # every element is the rank count: a sum that arrives wrong is caught, not timed
            lo, hi = float(t.min().item()), float(t.max().item())
            if lo != self.world or hi != self.world:
                raise RuntimeError(
                    "data mismatch: an all-reduce of ones over %d ranks gave values from %g to "
                    "%g on rank %d (%d bytes): the collective returned wrong data"
                    % (self.world, lo, hi, self.rank, nbytes)
                )
            t0 = time.monotonic()
            for _ in range(reps):
                dist.all_reduce(t)
            self.sync()
            out.append([nbytes, (time.monotonic() - t0) / reps])
        return {"sizes": out}

    def phase_soak(self) -> Dict[str, Any]:
        torch, dist = self.torch, self.dist
        self.called("soak")
        out = []
        for nbytes in self.soak_sizes:
            self.maybe_fault("soak", nbytes)
            # A step event per size: the supervisor's clock restarts, and a stall names it.
            self.rep.emit("step", "soak", bytes=nbytes)
            t = torch.ones(nbytes // 4, dtype=torch.float32, device=self.device)
            dist.all_reduce(t)  # warm-up
            self.sync()
            t0 = shown = time.monotonic()
            for _ in range(self.ns.soak_iters):
                dist.all_reduce(t)
                if time.monotonic() - shown >= SOAK_PROGRESS_S:
                    # Many iterations at one size can outlast the phase deadline: a finished
                    # collective (synced, not just queued) restarts the supervisor's clock.
                    self.sync()
                    self.rep.emit("step", "soak", bytes=nbytes)
                    shown = time.monotonic()
            self.sync()
            out.append([nbytes, (time.monotonic() - t0) / self.ns.soak_iters])
        return {"sizes": out}

    def phase_destroy(self) -> Dict[str, Any]:
        self.dist.destroy_process_group()
        return {}


def same_bytes(torch: Any, src: Any, dst: Any, what: str) -> None:
    """Raise when dst does not hold src's bytes: the sums (each computed where its tensor is)
    and every 4093rd byte, read back to the host."""
    a, b = int(src.sum().item()), int(dst.sum().item())
    sa, sb = src[::4093].cpu(), dst[::4093].cpu()
    if a != b or not bool(torch.equal(sa, sb)):
        raise RuntimeError(
            "data mismatch: %s changed the data (byte sums %d and %d): the copy completed "
            "with wrong bytes" % (what, a, b)
        )


def store_prefix(key: str) -> str:
    """The run's keys in the store: gpufix/KEY/ (the controller gives each run its own key)."""
    return "gpufix/%s" % key if key else "gpufix"


def store_port_free(port: int) -> None:
    """Refuse to serve the store on a port something else listens on. Left to TCPStore, the
    error text varies by torch version."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed run's TIME_WAIT is fine
        s.bind(("", port))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise RuntimeError(
            "store port %d is in use on this host (EADDRINUSE, address already in use): an "
            "earlier probe or job has not ended, or another service listens there" % port
        ) from None
    finally:
        s.close()


def meet(store: Any, world: int, serving: bool) -> None:
    """Every rank arrives, then leaves; the rank that serves the store leaves last. Its process
    holds the store: had it moved on and failed in the next phase, a rank still reading "all"
    would read a closed connection and be blamed for the rendezvous (a CI run, two hosts)."""
    if store.add("arrived", 1) == world:
        store.set("all", "1")
    store.wait(["all"])
    if store.add("left", 1) == world:
        store.set("out", "1")
    if serving:
        store.wait(["out"])


def tcp_store(dist: Any, addr: str, port: int, world: int, master: bool, timeout: Any) -> Any:
    """The rendezvous store; rank 0 serves it on the first host and does not wait for peers."""
    try:
        return dist.TCPStore(addr, port, world, master, timeout, wait_for_workers=False)
    except TypeError:  # torch < 1.10 has no wait_for_workers
        return dist.TCPStore(addr, port, world, master, timeout)


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
        self.step: Optional[Tuple[float, int]] = None  # (time, bytes) of the last soak size

    def read(self) -> None:
        # SIGTERM/SIGINT wait until the events read are applied: raised in between, the offset
        # would have moved past lines never applied (the stall then blamed on the wrong rank).
        with signals_held():
            self.read_events()

    def read_events(self) -> None:
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
        elif e == "step":
            self.step = (t, int(rec.get("bytes") or 0))

    def position(self, phases: List[str]) -> int:
        """Index of the phase this rank is in or about to enter."""
        for i, p in enumerate(phases):
            if p not in self.leave:
                return i
        return len(phases)


class RunResult(object):
    def __init__(self, kind: str, phases: List[str], deadline_at: float) -> None:
        self.kind = kind
        self.name = kind  # the RunSpec's: "single", "main", "exp-ID"
        self.spawned = False  # every rank was started (a signal may come while they start)
        self.phases = phases
        self.deadline_at = deadline_at
        self.deadline_label = "probe deadline"
        self.world = 0  # all ranks of the run, on every host
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
        # the run in flight or not yet judged, for an interrupted verdict
        self.current: Optional[RunResult] = None

    def worker_env(
        self, name: str, kind: str, extra: Dict[str, str], gpus: List[int], host: Tuple[str, ...]
    ) -> Dict[str, str]:
        ns = self.ns
        env = dict(os.environ)
        # job-env-off and job-env-without-VAR: these of the job's settings get the host's own
        # values back, as before --job-env (unset where the host had none).
        for var in host:
            old = ns.job_env_saved.get(var)
            if old is None:
                env.pop(var, None)
            else:
                env[var] = old
        env["NCCL_DEBUG"] = "INFO"
        env["NCCL_DEBUG_FILE"] = os.path.join(self.nccl_dir, name + ".%h.%p.log")
        if (ns.nnodes or 1) == 1:
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one host: keep gloo off odd interfaces
        if ns.ifname:
            env["NCCL_SOCKET_IFNAME"] = env["GLOO_SOCKET_IFNAME"] = ns.ifname
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        if kind in ("single", "pair") and not ns.cpu:
            # Set before torch is imported: the point. Indices are the probe's, mapped onto
            # what CUDA_VISIBLE_DEVICES already allowed.
            visible = visible_devices(max(gpus) + 1)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(visible[g] for g in gpus)
        return env

    def phase_deadline(self, phase: str) -> float:
        if phase == "import_torch":
            # import torch after a reboot reads a cold page cache: twice the time by default.
            return self.ns.import_deadline or self.ns.phase_deadline * 2
        if phase == "rendezvous":
            # Other hosts' imports count: before connecting, the store is not up until the
            # first host has imported torch (a cold import after a reboot takes a while);
            # once connected, this rank waits for the other hosts' ranks.
            return self.ns.phase_deadline + (self.ns.import_deadline or self.ns.phase_deadline * 2)
        return self.ns.phase_deadline

    def worker_cmd(self, spec: "RunSpec", rank: int, run_dir: str) -> List[str]:
        ns = self.ns
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--run-id", ns.run_id]
        cmd += ["--kind", spec.kind, "--rank", str(rank), "--world-size", str(spec.world)]
        cmd += ["--backend", ns.backend, "--run-dir", run_dir]
        cmd += ["--phase-deadline", str(ns.phase_deadline)]
        cmd += ["--parent-pid", str(os.getpid())]
        left = spec.deadline_at - time.monotonic()
        cmd += ["--exit-after", str(max(1, math.ceil(left + WORKER_GRACE_S)))]
        if ns.import_deadline:
            cmd += ["--import-deadline", str(ns.import_deadline)]
        cmd += ["--gpus", ",".join(str(g) for g in spec.gpus)]
        cmd += ["--cpu"] if ns.cpu else []
        quick = spec.quick if spec.quick is not None else ns.quick or spec.kind in ("exp", "pair")
        cmd += ["--quick"] if quick else []
        if spec.soak:
            cmd += ["--soak-sizes", ",".join(str(b) for b in soak_sizes(ns))]
            cmd += ["--soak-iters", str(ns.soak_iters)]
        if (ns.nnodes or 1) > 1:
            cmd += ["--nnodes", str(ns.nnodes), "--master-addr", ns.master_addr]
            cmd += ["--master-port", str(ns.master_port)]
            cmd += ["--store-key", ns.store_key] if ns.store_key else []
        return cmd

    def run(self, spec: "RunSpec") -> RunResult:
        ns = self.ns
        run_dir = os.path.join(self.run_root, spec.name)
        os.mkdir(run_dir)
        multinode = (ns.nnodes or 1) > 1
        phases = phases_for(spec.kind, ns.cpu, spec.soak, multinode)
        res = RunResult(spec.kind, phases, spec.deadline_at)
        res.name = spec.name
        res.world = spec.world
        res.deadline_label = spec.deadline_label
        self.current = res
        env = self.worker_env(spec.name, spec.kind, spec.env, spec.gpus, spec.host_vars)
        for r in spec.ranks:
            with open(os.path.join(run_dir, "rank%d.out" % r), "wb") as out:
                proc = subprocess.Popen(
                    self.worker_cmd(spec, r, run_dir),
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
        res.spawned = True
        try:
            self.watch(res)
        finally:
            res.unkillable = kill_groups(res.ranks)
            self.live = []
        self.collect(res)
        # Stays current until its caller has judged it: a signal before that still finds it.
        return res

    def collect(self, res: RunResult) -> None:
        """What the stopped ranks reported and printed last."""
        run_dir = os.path.join(self.run_root, res.name)
        for st in res.ranks:
            st.read()
            res.texts += tail_file(os.path.join(run_dir, "rank%d.out" % st.rank), 30)

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
            if stall is not None or now >= res.deadline_at:
                res.status = "hung"
                res.stalled = self.describe_stall(res, phases)
                if now >= res.deadline_at:
                    res.stalled["by"] = res.deadline_label
                st = res.stalled
                res.error = stall_text(st, self.phase_deadline(st["phase"]))
                return
            time.sleep(POLL_S)

    def check_failed(self, res: RunResult, now: float) -> bool:
        # One look at each process: a rank that wrote its error and exited between two looks
        # was counted as exiting without a word, and its message was lost (a review).
        ended = [st for st in res.ranks if st.proc.poll() is not None]
        for st in ended:
            st.read()  # it may have written its last events just before exiting
        errs = [st for st in res.ranks if st.error is not None]
        exited = [st for st in ended if st.error is None and not st.done]
        if not errs and not exited:
            return False
        res.status = "failed"
        # A rank that died without a word (a signal) is the origin; its peers' errors
        # ("connection closed") follow from it. Else the earliest reported error.
        if errs and not exited:
            first = min(errs, key=lambda s: (s.error or {})["t"])
            err = first.error or {}
            res.failed_in = {"phase": err["phase"], "ranks": [first.rank]}
            # failed after its collective call (its peer or the store went away): it was
            # waiting; a multi-node merge blames the hosts that never made the call
            res.failed_in["called"] = [first.rank] if err["phase"] in first.call else []
            res.error = "rank %d in %s: %s" % (first.rank, err["phase"], err["msg"])
            res.texts += err["tb"]
        else:
            st = exited[0]
            phase = res.phases[min(st.position(res.phases), len(res.phases) - 1)]
            rc = st.proc.returncode
            how = "signal %d" % -rc if rc < 0 else "code %d" % rc
            res.failed_in = {"phase": phase, "ranks": [st.rank]}
            res.failed_in["called"] = [st.rank] if phase in st.call else []
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
                # Waiting for the others: judge from when the last rank arrived (or, in the
                # soak, from the last size any rank started).
                peers = [o for o in res.ranks if o.position(phases) <= i]
                calls = [o.call.get(phase) for o in peers]
                if any(c is None for c in calls):
                    continue
                steps = [o.step[0] for o in peers if o.step is not None]
                since = max([c for c in calls if c is not None] + steps)
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
            elif phase == "soak":
                culprits = behind_in_soak(at)
        ranks = sorted(st.rank for st in culprits)
        waiting = sorted(st.rank for st in unfinished if st.rank not in ranks)
        stalled: Dict[str, Any] = {"phase": phase, "ranks": ranks, "waiting": waiting}
        # Ranks that reached the collective call: the multi-node merge tells hosts apart by it.
        stalled["called"] = sorted(st.rank for st in at if phase in st.call)
        steps = [st.step[1] for st in at if st.step is not None]
        if phase == "soak" and steps:
            stalled["at_bytes"] = max(steps)  # the size in flight
        return stalled


def behind_in_soak(at: List[RankState]) -> List[RankState]:
    """The ranks that did not start the size the others are in (all of them if none lags)."""
    done = dict((st.rank, st.step[1] if st.step else 0) for st in at)
    least = min(done.values())
    behind = [st for st in at if done[st.rank] == least]
    return behind if len(behind) < len(at) else at


class RunSpec(object):
    """One supervised run: which ranks, which GPUs, which environment, until when."""

    def __init__(self, name: str, kind: str, world: int, deadline_at: float, **kw: Any) -> None:
        self.name = name
        self.kind = kind
        self.world = world
        self.deadline_at = deadline_at
        self.ranks: List[int] = kw.get("ranks") or list(range(world))
        self.gpus: List[int] = kw.get("gpus") or list(range(world))
        self.env: Dict[str, str] = kw.get("env") or {}
        self.soak: bool = bool(kw.get("soak"))
        # the --job-env settings this run has without (their host values back)
        self.host_vars: Tuple[str, ...] = tuple(kw.get("host_vars") or ())
        self.quick: Optional[bool] = kw.get("quick")  # None: --quick, and always for experiments
        self.deadline_label = "experiment deadline" if kind in ("exp", "pair") else "probe deadline"


def visible_devices(n: int) -> List[str]:
    """CUDA device ids for the probe's GPU indices 0..n-1, under CUDA_VISIBLE_DEVICES."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return [str(i) for i in range(n)]
    return [x.strip() for x in cvd.split(",") if x.strip()][:n]


def stall_text(stalled: Dict[str, Any], phase_deadline: float) -> str:
    """One line for a hung run: who stalled where, and which deadline ran out."""
    text = "ranks %s made no progress in %s" % (stalled["ranks"], stalled["phase"])
    if stalled.get("by"):
        text += " when the %s ran out" % stalled["by"]
    else:
        text += " for %.1f s (phase deadline)" % phase_deadline
    if stalled.get("waiting"):
        text += "; ranks %s were waiting for them" % stalled["waiting"]
    return text


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


def allreduce_evidence(res: RunResult, phase: str = "allreduce") -> List[Dict[str, Any]]:
    n = res.world or len(res.ranks)
    per_size: Dict[int, float] = {}
    for st in res.ranks:
        for nbytes, secs in st.data.get(phase, {}).get("sizes", []):
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


# Causes that name the GPUs, their PCIe/NVLink path or CUDA: never read from a --cpu run.
GPU_CAUSES = ("gpu-path", "link-path", "p2p-slow-copy", "gpu-init", "single-gpu-fallback")


def find_causes(ev: Dict[str, Any]) -> List[Dict[str, str]]:
    """Map the evidence of one probe to likely causes, most specific first."""
    ids = text_causes(ev)
    main = ev.get("main") or {}
    single = ev.get("single") or {}
    where = (main.get("stalled") or main.get("failed_in") or {}).get("phase")
    if where == "import_torch":
        if (main.get("stalled") or {}).get("by") == "probe deadline":
            # The whole run's --deadline ran out first, not the import's own deadline: too
            # short a run to judge the import by (a stall note says which deadline).
            return cause_records(ids)
        # The interpreter, not the GPU: say so, and blame nothing on the driver.
        if "torch-missing" not in ids:
            ids.append("torch-import")
        return cause_records(ids)
    ids += [c for c in path_causes(ev, where) if c not in ids]
    if ev.get("backend") == "gloo":
        # NCCL took no part and read none of its settings: no NCCL mechanism is to blame.
        ids = [c for c in ids if c not in NCCL_CAUSES]
    if ev.get("cpu"):
        # CPU ranks stood in for the GPUs: no GPU, PCIe path or CUDA init is to blame. A rank
        # set whose runs fail (the pairs) names ranks, not hardware (verdict `suspects`).
        return cause_records([c for c in ids if c not in GPU_CAUSES])
    slow = [s["phase"] for s in ev.get("slow") or []]
    init_trouble = where in ("cuda_init", "alloc") or single.get("verdict") in ("hung", "failed")
    init_trouble = init_trouble or any(p in ("cuda_init", "alloc") for p in slow)
    if (init_trouble or ev.get("slow_single")) and not ids:
        ids.append("gpu-init")
    on_gpu = single.get("device") != "cpu"  # --cpu: one CPU rank stood in for the GPU
    if single.get("verdict") == "healthy" and main.get("verdict") in ("hung", "failed") and on_gpu:
        ids.append("single-gpu-fallback")
    return cause_records(ids)


def text_causes(ev: Dict[str, Any]) -> List[str]:
    ids: List[str] = []
    text = "\n".join(ev.get("texts") or [])
    for rx, cid in TEXT_SIGNS:
        if rx.search(text) and cid not in ids:
            ids.append(cid)
    return ids


def decided_experiment(ev: Dict[str, Any], where: Optional[str]) -> Optional[str]:
    """The experiment that turned the run healthy; from an old-style rerun too."""
    if "decided" in ev:
        return ev["decided"]
    main = ev.get("main") or {}
    slow = [s["phase"] for s in ev.get("slow") or []]
    trouble = main.get("verdict") == "hung" and where in P2P_SENSITIVE
    trouble = trouble or any(p in P2P_SENSITIVE for p in slow) or bool(ev.get("low_bw"))
    healthy = (ev.get("rerun") or {}).get("verdict") == "healthy"
    return "p2p-off" if trouble and healthy else None


def path_causes(ev: Dict[str, Any], where: Optional[str]) -> List[str]:
    """Causes on the path between GPUs: from the experiments, the pairs, or the phase."""
    decided = decided_experiment(ev, where)
    if decided:
        key = "ifname" if decided.startswith("ifname-") else decided
        key = "job-env-off" if key.startswith(WITHOUT) else key
        return list(DECIDED_CAUSES.get(key, ()))
    suspects = ev.get("suspects") or {}
    ids = ["gpu-path"] if suspects.get("gpus") else ["link-path"] if suspects.get("links") else []
    if ev.get("low_copy") and not ids:
        ids.append("p2p-slow-copy")
    main = ev.get("main") or {}
    hung_in = (main.get("stalled") or {}).get("phase")
    slow = [s["phase"] for s in ev.get("slow") or []]
    if (hung_in in COLLECTIVE or any(p in COLLECTIVE for p in slow)) and not ids:
        ids.append("nccl-transport")
    return ids


def cause_records(ids: List[str]) -> List[Dict[str, str]]:
    out = []
    for cid in ids:
        strategy, why = CAUSES[cid]
        out.append({"id": cid, "strategy": strategy, "why": why})
    return out


# --------------------------------------------------------------------------- cheap facts


def count_gpus(until: Optional[float] = None) -> Tuple[int, str]:
    """GPUs this process may use, without importing torch, and how that was decided."""
    n = 0
    how = ""
    gdir = "/proc/driver/nvidia/gpus"
    if os.path.isdir(gdir):
        n, how = len(os.listdir(gdir)), gdir
    if n == 0:
        out = run_cmd(["nvidia-smi", "-L"], 10, until=until)
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


def run_cmd(
    cmd: List[str], timeout: float, any_rc: bool = False, until: Optional[float] = None
) -> Optional[str]:
    """stdout of cmd (exit 0 only); any_rc: stdout + stderr whatever the exit status. until:
    the time.monotonic() by which it must end (the probe deadline); past it, None."""
    if until is not None:
        timeout = min(timeout, until - time.monotonic())
        if timeout <= 0:
            return None
    try:
        p = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if any_rc else subprocess.DEVNULL,
            universal_newlines=True,
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        give_up(p)
        return None
    except BaseException:  # SIGTERM/SIGINT (Interrupted): the command goes too
        give_up(p)
        raise
    return out if p.returncode == 0 or any_rc else None


def give_up(p: subprocess.Popen) -> None:
    """Kill a command's process group and wait a little, never forever: a child in
    uninterruptible sleep (nvidia-smi wedged in the driver) outlives SIGKILL."""
    with contextlib.suppress(OSError):
        os.killpg(p.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(CMD_REAP_S)
    if p.stdout is not None:
        p.stdout.close()  # a grandchild may hold the pipe's other end: never read it again


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


def cheap_facts(gpu: bool, timeout: float, until: Optional[float] = None) -> Dict[str, Any]:
    facts: Dict[str, Any] = {
        "kernel": os.uname()[2],
        "infiniband": sorted(os.listdir("/sys/class/infiniband"))
        if os.path.isdir("/sys/class/infiniband")
        else [],
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "driver": None,
        "topology": None,
        "topology_worst": None,
    }
    try:
        with open("/proc/driver/nvidia/version") as f:
            facts["driver"] = f.readline().strip()
    except (IOError, OSError):
        pass
    facts["cpu"] = {"arch": os.uname()[4], "vendor": cpu_vendor()}
    if gpu and timeout > 0:
        raw = run_cmd(["nvidia-smi", "topo", "-m"], timeout, until=until)
        if raw:
            facts["topology"] = raw.strip().splitlines()[:20]
            facts["topology_worst"] = topo_worst(raw)
    facts["kernel_log"] = kernel_log_counts(timeout, until) if timeout > 0 else None
    return facts


def cpu_vendor() -> Optional[str]:
    """/proc/cpuinfo's vendor_id (GenuineIntel, AuthenticAMD, ...), as NCCL's topology reads it."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()[:40] or None
    except (IOError, OSError):
        pass
    return None


# NCCL's default P2P level (src/graph/paths.cc ncclTopoCheckP2p): PXB on ARM from 2.7.3 and on
# Intel (and Zhaoxin) from 2.9.6 (before: PXB on Broadwell, PHB on other Intel), SYS elsewhere;
# from 2.23.4 PXB everywhere but x86 AMD with two GPUs or fewer (SYS).
def pxb_is_default(facts: Dict[str, Any], ngpu: int) -> bool:
    """True where NCCL_P2P_LEVEL=PXB is what this NCCL does anyway: the experiment would be a
    rerun of the main run (expert review, 2026-12-06)."""
    key = version_key(facts.get("nccl"))
    cpu = facts.get("cpu") or {}
    arch, vendor = str(cpu.get("arch") or ""), str(cpu.get("vendor") or "")
    if not key or not arch:
        return False
    if arch.startswith(("aarch64", "arm")):
        return key >= (2, 7, 3)
    if key >= (2, 23, 4):
        return not (vendor == "AuthenticAMD" and 0 < ngpu <= 2)
    return key >= (2, 9, 6) and vendor in ("GenuineIntel", "CentaurHauls", "Shanghai")


def nccl_text(v: Any) -> Optional[str]:
    """torch.cuda.nccl.version() as "2.19.3": a tuple since torch 1.10 (its NCCL suffix, where
    there is one, fourth since 2.2), before that NCCL_MAJOR * 1000 + NCCL_MINOR * 100 +
    NCCL_PATCH (torch/csrc/cuda/nccl.cpp; pytorch#62916), which a minor of 10 or more overflows:
    such a number is no reading."""
    if isinstance(v, int) and not isinstance(v, bool):
        major, minor, patch = v // 1000, v % 1000 // 100, v % 100
        return "%d.%d.%d" % (major, minor, patch) if major == 2 else None
    ints = isinstance(v, (tuple, list)) and len(v) >= 3
    if ints and all(isinstance(x, int) and not isinstance(x, bool) for x in v[:3]):
        return ".".join(str(x) for x in v[:3])
    return None


def version_key(text: Any) -> Optional[Tuple[int, ...]]:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", str(text or ""))
    return tuple(int(x) for x in m.groups()) if m else None


def parse_kernel_log(text: str) -> Dict[str, int]:
    """Counts of NVIDIA Xid, other NVRM and PCIe AER lines (as the facts module counts them)."""
    xid = nvrm = aer = 0
    for line in text.splitlines():
        if "NVRM: Xid" in line:
            xid += 1
        elif "NVRM:" in line:
            nvrm += 1
        if "AER:" in line:
            aer += 1
    return {"xid": xid, "nvrm": nvrm, "aer": aer}


def kernel_log_counts(timeout: float, until: Optional[float] = None) -> Optional[Dict[str, Any]]:
    """The kernel log's counts since boot, from dmesg or journalctl -k; None when unreadable.
    An empty log is unreadable too (journalctl -k for a user outside systemd-journal prints
    nothing): a booted kernel always logs, and zero counts would read as "no Xid errors"."""
    for cmd in (["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-q"]):
        out = run_cmd(cmd, timeout, until=until)
        if out is not None and out.strip() and out.strip() != "-- No entries --":
            counts: Dict[str, Any] = dict(parse_kernel_log(out))
            counts["source"] = cmd[0]
            return counts
    return None


def nvml_error_line(text: Optional[str]) -> Optional[str]:
    """NVML's failure line in nvidia-smi output ("Failed to initialize NVML: ..."), or None."""
    for line in (text or "").splitlines():
        if line.strip().startswith("Failed to initialize NVML"):
            return line.strip()
    return None


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


VERDICTS = ("healthy", "degraded", "hung", "failed", "not-applicable")
KERNEL_LOG_KINDS = ("xid", "nvrm", "aer")


def prometheus(verdict: Dict[str, Any], now: Optional[float] = None) -> str:
    """The verdict as node_exporter textfile-collector text; now: the run's Unix time."""
    lines = []

    def metric(name: str, help_: str, samples: List[Tuple[Dict[str, str], float]]) -> None:
        lines.append("# HELP %s %s" % (name, help_))
        lines.append("# TYPE %s gauge" % name)
        for labels, value in samples:
            lab = ",".join('%s="%s"' % (k, prom_escape(str(v))) for k, v in sorted(labels.items()))
            lines.append("%s%s %s" % (name, "{%s}" % lab if lab else "", repr(round(value, 6))))

    metric(
        "gpufix_probe_verdict",
        "1 for the verdict of the last probe run, 0 for the others.",
        [({"verdict": v}, 1.0 if verdict["verdict"] == v else 0.0) for v in VERDICTS],
    )
    found = [c["id"] for c in verdict.get("causes") or []]
    metric(
        "gpufix_probe_cause",
        "1 for each cause the last probe run named, 0 for the other known causes.",
        [({"cause": c}, 1.0 if c in found else 0.0) for c in sorted(set(CAUSES) | set(found))],
    )
    klog = (verdict.get("facts") or {}).get("kernel_log")
    if isinstance(klog, dict):
        metric(
            "gpufix_kernel_log_lines",
            "NVIDIA Xid, other NVRM and PCIe AER lines in the kernel log since boot.",
            [({"kind": k}, float(klog[k])) for k in KERNEL_LOG_KINDS if k in klog],
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
        [({}, time.time() if now is None else now)],
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
    p.add_argument(
        "--import-deadline", type=float, default=None, help="import torch, seconds (2x phase)"
    )
    p.add_argument("--quick", action="store_true", help="smaller copies, one all-reduce size")
    p.add_argument("--no-single-gpu", action="store_true", help="skip the single-GPU baseline")
    p.add_argument("--json-out", metavar="FILE", help="also write the verdict here (atomic)")
    p.add_argument("--prom-out", metavar="FILE", help="Prometheus textfile (atomic)")
    p.add_argument(
        "--prom-from", metavar="VERDICT", help="only write --prom-out from this verdict file"
    )
    p.add_argument("--nccl-log", metavar="DIR", help="keep NCCL debug logs in DIR")
    p.add_argument("--ifname", help="NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME for the ranks")
    p.add_argument(
        "--job-env",
        metavar="VAR=VALUE",
        action="append",
        default=[],
        help="a setting the training job runs with, for every run (repeatable; %s)" % JOB_ENV_HELP,
    )
    add_experiment_args(p)
    add_soak_args(p)
    add_multinode_args(p)
    add_worker_args(p)
    return p


def add_experiment_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("experiments (after a run that is not healthy)")
    g.add_argument("--no-experiments", action="store_true", help="run none")
    g.add_argument("--experiment-budget", type=float, default=180.0, help="seconds, all together")
    g.add_argument("--no-p2p-rerun", action="store_true", help="leave out p2p-off")
    g.add_argument("--experiments", metavar="ID,...", help="these, in this order, not the plan")
    g.add_argument("--experiment", metavar="ID", help="run the main run with this one change")
    g.add_argument(
        "--nccl-default",
        metavar="VAR",
        action="append",
        default=[],
        help="run with VAR at NCCL's default over any NCCL config file (repeatable; %s)"
        % ", ".join(sorted(NCCL_DEFAULTS)),
    )


def add_soak_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("soak (an all-reduce size sweep after the main phases)")
    g.add_argument("--soak", action="store_true", help="run the sweep (off by default)")
    g.add_argument("--soak-min-bytes", default="1K", metavar="SIZE", help="like nccl-tests -b")
    g.add_argument("--soak-max-bytes", default="64M", metavar="SIZE", help="like nccl-tests -e")
    g.add_argument("--soak-factor", type=int, default=4, help="like nccl-tests -f")
    g.add_argument("--soak-iters", type=int, default=20, help="like nccl-tests -n")


def add_multinode_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("one host of a multi-node probe (the controller starts every host)")
    g.add_argument("--nnodes", type=int, default=1, help="hosts in the run")
    g.add_argument("--node-rank", type=int, default=0, help="this host's place, 0 = the first")
    g.add_argument("--master-addr", help="address of the first host (the rendezvous store)")
    g.add_argument("--master-port", type=int, default=29500, help="port of the store")
    g.add_argument(
        "--store-key", default="", help="this run's keys in the store (the same on every host)"
    )


def add_worker_args(p: argparse.ArgumentParser) -> None:
    # Worker mode: started by the supervisor only.
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--kind", default="main", help=argparse.SUPPRESS)
    p.add_argument("--run-dir", help=argparse.SUPPRESS)
    p.add_argument(
        "--run-id", default="", help="this run's id (default: a new one); its workers carry it"
    )
    p.add_argument("--gpus", default="", help=argparse.SUPPRESS)
    p.add_argument("--soak-sizes", default="", help=argparse.SUPPRESS)
    p.add_argument("--parent-pid", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--exit-after", type=float, default=0.0, help=argparse.SUPPRESS)


HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
STORE_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
KEY_WORDS = "a letter or digit, then up to 63 letters, digits, '-' or '_'"


def check_args(ns: argparse.Namespace) -> None:
    if ns.world_size is not None and not 1 <= ns.world_size <= 256:
        raise ArgError("--world-size must be between 1 and 256")
    # Finite and at most a day: inf or 1e300 would overflow a timeout and read as a failing host.
    if not 0 < ns.deadline <= MAX_SECONDS or not 0 < ns.phase_deadline <= MAX_SECONDS:
        raise ArgError("--deadline and --phase-deadline must be between 0 and 86400 seconds")
    if ns.import_deadline is not None and not 0 < ns.import_deadline <= MAX_SECONDS:
        raise ArgError("--import-deadline must be between 0 and 86400 seconds")
    if ns.cpu and ns.backend == "nccl":
        raise ArgError("--cpu runs gloo; --backend nccl needs GPUs")
    if ns.worker and (not ns.run_dir or ns.kind not in ("main", "exp", "pair", "single")):
        raise ArgError("worker mode needs --run-dir and --kind main|exp|pair|single")
    for opt in ("json_out", "prom_out", "nccl_log"):
        path = getattr(ns, opt)
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise ArgError("--%s: directory of %s does not exist" % (opt.replace("_", "-"), path))
    for opt in ("json_out", "prom_out"):
        path = getattr(ns, opt)
        if path and os.path.isdir(path):
            raise ArgError("--%s: %s is a directory, not a file" % (opt.replace("_", "-"), path))
        # written by rename: a device (/dev/null), a FIFO or a link there would be replaced by
        # a regular file, as root on the host
        if path and os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
            raise ArgError(
                "--%s: %s exists and is not a regular file (a link, device or FIFO)"
                % (opt.replace("_", "-"), path)
            )
    if ns.nccl_log and os.path.lexists(ns.nccl_log) and not os.path.isdir(ns.nccl_log):
        raise ArgError("--nccl-log: %s exists and is not a directory" % ns.nccl_log)
    if ns.nccl_log and not ns.worker:
        nccl_dir = os.path.abspath(ns.nccl_log)
        try:
            if not os.path.isdir(nccl_dir):
                os.mkdir(nccl_dir)  # made here, not mid-run: a traceback lost the verdict
        except (IOError, OSError) as exc:
            raise ArgError("--nccl-log: cannot make %s: %s" % (nccl_dir, exc.strerror)) from None
        if not os.access(nccl_dir, os.W_OK | os.X_OK):
            raise ArgError("--nccl-log: cannot write in %s" % nccl_dir)
    check_experiment_args(ns)
    check_soak_args(ns)
    check_multinode_args(ns)
    if os.environ.get(FAULT_ENV):
        try:
            parse_fault(os.environ[FAULT_ENV])  # a test's typo is bad input, not a verdict
        except ValueError as exc:
            raise ArgError(str(exc)) from None
    run = os.environ.get(FAULT_RUN_ENV, "all")
    if run not in FAULT_RUNS:
        raise ArgError("bad %s=%r: want one of %s" % (FAULT_RUN_ENV, run, "|".join(FAULT_RUNS)))


def check_experiment_args(ns: argparse.Namespace) -> None:
    if not 0 <= ns.experiment_budget <= 86400:
        raise ArgError("--experiment-budget must be between 0 and 86400 seconds")
    if ns.ifname is not None and not IFNAME_RE.fullmatch(ns.ifname):
        raise ArgError("--ifname %r is not an interface name" % ns.ifname)
    for var in ns.nccl_default:
        if var not in NCCL_DEFAULTS:
            raise ArgError("--nccl-default %r: one of %s" % (var, ", ".join(sorted(NCCL_DEFAULTS))))
    ns.job_env = parse_job_env(ns.job_env)
    if ns.experiments is not None and "" in ns.experiments.split(","):
        # '' was read as "no list" (the plan), ',,' as a name given twice
        raise ArgError(
            "--experiments %r: a comma-separated list of experiment ids" % ns.experiments
        )
    if ns.experiment == "job-env-off" or (ns.experiment or "").startswith(WITHOUT):
        raise ArgError(
            "--experiment %s: the main run is the one with the job's settings" % ns.experiment
        )
    for exp_id in ns.experiments.split(",") if ns.experiments else []:
        if exp_id == "job-env-off" and not ns.job_env:
            raise ArgError("--experiments job-env-off needs the job's settings (--job-env)")
        if exp_id.startswith(WITHOUT) and exp_id[len(WITHOUT) :] not in ns.job_env:
            raise ArgError("--experiments %s: not one of the job's settings (--job-env)" % exp_id)
    if ns.experiment is not None and ns.experiments:
        raise ArgError(
            "--experiment (the main run's change) and --experiments (runs after it) "
            "exclude each other"
        )
    ids = [ns.experiment] if ns.experiment is not None else []
    listed = ns.experiments.split(",") if ns.experiments else []
    twice = sorted(set(x for x in listed if listed.count(x) > 1))
    if twice:
        raise ArgError("--experiments names %s more than once" % ", ".join(twice))
    try:
        for exp_id in ids + listed:
            experiment_env(exp_id)
    except ValueError as exc:
        raise ArgError(str(exc)) from None


def check_soak_args(ns: argparse.Namespace) -> None:
    try:
        lo, hi = parse_size(ns.soak_min_bytes), parse_size(ns.soak_max_bytes)
    except ValueError as exc:
        raise ArgError("--soak-min-bytes/--soak-max-bytes: %s" % exc) from None
    if not 0 < lo <= hi <= 1 << 34:
        raise ArgError("soak sizes need 0 < --soak-min-bytes <= --soak-max-bytes <= 16G")
    if not 1 <= ns.soak_factor <= 1024 or not 1 <= ns.soak_iters <= 100000:
        raise ArgError("--soak-factor must be 1..1024 and --soak-iters 1..100000")
    if ns.soak_factor <= 1 and lo < hi:
        raise ArgError("--soak-factor 1 never reaches --soak-max-bytes: use a factor above 1")
    if ns.worker and ns.soak_sizes and not re.fullmatch(r"[0-9]+(,[0-9]+)*", ns.soak_sizes):
        raise ArgError("--soak-sizes must be a comma-separated list of byte counts")


def check_multinode_args(ns: argparse.Namespace) -> None:
    if not 1 <= ns.nnodes <= 4096 or not 0 <= ns.node_rank < ns.nnodes:
        raise ArgError("--nnodes must be 1..4096 and --node-rank 0..nnodes-1")
    if not 1 <= ns.master_port <= 65535:
        raise ArgError("--master-port must be 1..65535")
    if ns.nnodes > 1 and not (ns.master_addr and HOST_RE.fullmatch(ns.master_addr)):
        raise ArgError("--nnodes > 1 needs --master-addr (the first host's address)")
    if ns.store_key and not STORE_KEY_RE.fullmatch(ns.store_key):
        raise ArgError("--store-key must be %s" % KEY_WORDS)
    if ns.run_id and not STORE_KEY_RE.fullmatch(ns.run_id):
        raise ArgError("--run-id must be %s" % KEY_WORDS)
    if ns.gpus and not re.fullmatch(r"[0-9]+(,[0-9]+)*", ns.gpus):
        raise ArgError("--gpus must be a comma-separated list of GPU indices")


def base_verdict(ns: argparse.Namespace, host: str, world: int, backend: str) -> Dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "host": host,
        "run_id": ns.run_id,
        "scope": "host",
        "verdict": "not-applicable",
        "backend": backend,
        "world_size": world,
        "deadline_s": ns.deadline,
        "phase_deadline_s": ns.phase_deadline,
        # the total the experiments may take (0 when none run), so a reader can tell
        # "skipped: budget spent" from "not tried"
        "experiment_budget_s": (
            0.0 if ns.no_experiments or ns.experiment else float(ns.experiment_budget)
        ),
        "duration_s": 0.0,
        "stalled": None,
        "failed_in": None,
        "error": None,
        "phases": [],
        "slow": [],
        "single_gpu": None,
        "p2p": {"matrix": {}, "copy_gbps": {}},
        "no_p2p_rerun": None,
        "experiments": [],
        "decided_by": None,
        "suspects": None,
        "soak": None,
        "allreduce": [],
        "causes": [],
        "notes": [],
        "facts": {},
        "nccl_log_tail": [],
        "unkillable_ranks": [],
    }


def nccl_conf_note() -> Optional[str]:
    """Which NCCL config files the ranks will read (NCCL_CONF_FILE or $HOME/.nccl.conf, then
    /etc/nccl.conf; src/misc/param.cc initEnv), or None when there is none."""
    home = os.environ.get("HOME", "")
    user = os.environ.get("NCCL_CONF_FILE") or (os.path.join(home, ".nccl.conf") if home else "")
    found = [p for p in (user, "/etc/nccl.conf") if p and os.path.isfile(p)]
    if not found:
        return None
    return "NCCL config files the ranks read (HOME=%s): %s" % (home or "unset", ", ".join(found))


class Interrupted(BaseException):
    """SIGTERM or SIGINT reached the supervisor: stop, and report what is known so far."""

    def __init__(self, signum: int) -> None:
        BaseException.__init__(self, signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class Signals(object):
    """SIGTERM and SIGINT to the supervisor, from the start until its verdict is printed. Only
    the first counts: while armed it raises Interrupted (the verdict so far is printed); once
    the verdict is complete (disarmed) it is only recorded, and the verdict stands."""

    def __init__(self) -> None:
        self.got = 0  # the first signal, or 0
        self.armed = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.handle)

    def handle(self, signum: int, frame: Any) -> None:
        if self.got:
            return  # the clean-up that writes the verdict must not be interrupted in turn
        self.got = signum
        if self.armed:
            raise Interrupted(signum)

    def arm(self) -> None:
        self.armed = True
        if self.got:  # came before: now there is a verdict to fill
            raise Interrupted(self.got)

    def disarm(self) -> None:
        self.armed = False


def supervise(ns: argparse.Namespace, sigs: Signals) -> Dict[str, Any]:
    """The verdict; on SIGTERM/SIGINT the one known so far, with ns.interrupted = the signal."""
    t0 = time.monotonic()
    ns.run_id = ns.run_id or uuid.uuid4().hex[:12]
    ns.interrupted = 0
    backend = "gloo" if ns.cpu or ns.backend == "gloo" else "nccl"
    v = base_verdict(ns, socket.gethostname(), (ns.world_size or 1) * ns.nnodes, backend)
    try:
        sigs.arm()
        supervise_into(v, ns, t0, sigs)
        sigs.disarm()
    except Interrupted as exc:
        ns.interrupted = exc.signum
        if v["verdict"] == "not-applicable":
            v["verdict"] = "failed"
            v["error"] = "interrupted by %s before the workers started" % exc.name
        v["notes"].append("interrupted by %s: the verdict holds what was known then" % exc.name)
    if sigs.got and not ns.interrupted:
        v["notes"].append(
            "%s came after the verdict was complete: it stands" % signal.Signals(sigs.got).name
        )
    v["duration_s"] = round(time.monotonic() - t0, 3)
    return v


def supervise_into(v: Dict[str, Any], ns: argparse.Namespace, t0: float, sigs: Signals) -> None:
    until = t0 + ns.deadline
    # The job's settings first: GPUs are counted as the job sees them (CUDA_VISIBLE_DEVICES).
    set_job_env(ns)
    if ns.cpu:
        ngpu, how = 0, "--cpu"
    else:
        ngpu, how = count_gpus(until)
    world = ns.world_size or max(ngpu, 1)
    v["world_size"] = world * ns.nnodes
    for var in ns.nccl_default:  # the ranks inherit this environment
        os.environ[var] = NCCL_DEFAULTS[var]
        v["notes"].append(
            "ran with %s=%s in the environment, over any NCCL config file (--nccl-default)"
            % (var, NCCL_DEFAULTS[var])
        )
    record_job_env(v, ns)
    conf = nccl_conf_note()
    if conf:
        v["notes"].append(conf)
    # Commands before the workers take their time out of --deadline: a wedged nvidia-smi
    # must not hold the verdict past it.
    v["facts"] = cheap_facts(not ns.cpu and ngpu > 1, min(10.0, ns.deadline / 10), until)
    if not ns.cpu and ngpu > 0:
        # A driver/library mismatch shows in NVML's words, not in torch's (facts module: same).
        smi = run_cmd(["nvidia-smi", "-L"], 10, any_rc=True, until=until)
        v["facts"]["nvml_error"] = nvml_error_line(smi)
    if ns.nnodes > 1:
        ns.no_single_gpu = True  # each host's own probe has the baseline
        v["node"] = node_record(ns, world)
    elif ns.experiment or ns.ifname:
        # The main run is not the host's default: say so where a reader and gpufix look.
        v["node"] = node_record(ns, world)
        if ns.experiment:
            v["notes"].append(
                "the main run ran with %s (--experiment %s): this verdict shows that setting, "
                "not the host's default"
                % (
                    " ".join(
                        "%s=%s" % kv for kv in sorted(experiment_env(ns.experiment)[0].items())
                    ),
                    ns.experiment,
                )
            )
        if ns.ifname:
            v["notes"].append(
                "every run ran with NCCL_SOCKET_IFNAME=%s GLOO_SOCKET_IFNAME=%s (--ifname): "
                "this verdict shows that interface, not the host's default choice"
                % (ns.ifname, ns.ifname)
            )
    hidden = 0
    if not ns.cpu and ngpu == 0 and "CUDA_VISIBLE_DEVICES" in ns.job_env:
        # the job's own setting hides what the host has: the job would see no GPU, which is
        # a failure of the job's start-up, not a host without GPUs
        job_cvd = os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        try:
            hidden, _ = count_gpus(until)
        finally:
            if job_cvd is not None:
                os.environ["CUDA_VISIBLE_DEVICES"] = job_cvd
    if hidden:
        v["verdict"] = "failed"
        v["error"] = (
            "the job's CUDA_VISIBLE_DEVICES=%s (--job-env) hides all %d GPUs of this host: the "
            "job would see no GPU" % (ns.job_env["CUDA_VISIBLE_DEVICES"], hidden)
        )
    elif not ns.cpu and ngpu == 0:
        v["notes"].append("no NVIDIA GPU visible (%s); use --cpu to test with gloo" % how)
    elif not torch_installed():
        no_torch_verdict(v, world)
    elif time.monotonic() >= until:
        # Not a hung import_torch: no worker ran.
        v["verdict"] = "failed"
        slow = "the cheap facts (nvidia-smi, the kernel log) took" if not ns.cpu else "it took"
        v["error"] = "the probe deadline (%g s) ran out before any worker started: %s %.3g s" % (
            ns.deadline,
            slow,
            time.monotonic() - t0,
        )
    else:
        supervised(v, ns, world, ngpu, t0, sigs)


def node_record(ns: argparse.Namespace, world: int) -> Dict[str, Any]:
    first = ns.node_rank * world
    return {
        "rank": ns.node_rank,
        "nnodes": ns.nnodes,
        "ranks": list(range(first, first + world)),
        "master": "%s:%d" % (ns.master_addr, ns.master_port) if ns.master_addr else None,
        "store_key": ns.store_key or None,
        "ifname": ns.ifname,
        "experiment": ns.experiment,
    }


def supervised(
    v: Dict[str, Any], ns: argparse.Namespace, world: int, ngpu: int, t0: float, sigs: Signals
) -> None:
    """Run the workers under a supervisor that kills them on any exit, and fill the verdict."""
    run_root = tempfile.mkdtemp(
        prefix="gpufix-probe-%s-" % ns.run_id, dir=getattr(ns, "run_parent", None)
    )
    try:  # a signal from here on still removes run_root
        if ns.nccl_log:
            nccl_dir = os.path.abspath(ns.nccl_log)
            if not os.path.isdir(nccl_dir):
                os.mkdir(nccl_dir)  # its parent exists (check_args), as --json-out's must
        else:
            nccl_dir = os.path.join(run_root, "nccl")
            os.mkdir(nccl_dir)
        sup = Supervisor(ns, run_root, nccl_dir, t0, t0 + ns.deadline)
        try:
            fill_verdict(v, sup, ns, world, ngpu)
            sigs.disarm()  # complete: a signal now must not cut the clean-up short
        finally:
            kill_groups(sup.live)
            v["nccl_log_tail"] = nccl_tail(nccl_dir, 40)
    finally:
        shutil.rmtree(run_root, ignore_errors=True)


def run_parent() -> Tuple[Optional[str], List[str]]:
    """Where the run's files go: TMPDIR (tempfile's choice), then /var/tmp, /tmp and the working
    directory; the first that is writable, has RUN_DIR_FREE_BYTES free and has no '?' or '#' in
    its path (the file:// store URL would end there). A rank that cannot write its events looked
    like a Python that cannot import torch. Returns (directory or None, what was passed over)."""
    tried: List[str] = []
    seen = set()  # type: set
    try:
        first = [tempfile.gettempdir()]
    except (IOError, OSError):
        first = []
    try:
        cwd = [os.getcwd()]
    except (IOError, OSError):  # removed from under us: not a place for the run's files
        cwd = []
    for d in [*first, "/var/tmp", "/tmp", *cwd]:
        d = os.path.abspath(d)
        if d in seen:
            continue
        seen.add(d)
        if "?" in d or "#" in d:
            tried.append("%s (a '?' or '#' in the path)" % d)
            continue
        try:
            st = os.statvfs(d)
        except (IOError, OSError) as exc:
            tried.append("%s (%s)" % (d, exc.strerror))
            continue
        free = st.f_bavail * st.f_frsize
        if not os.access(d, os.W_OK | os.X_OK):
            tried.append("%s (not writable)" % d)
        elif free < RUN_DIR_FREE_BYTES:
            tried.append("%s (%d KiB free)" % (d, free >> 10))
        else:
            return d, tried
    return None, tried


def torch_installed() -> bool:
    """Whether this interpreter (the workers' too: same executable, same environment) finds
    torch, without importing it: an import that hangs is the workers' to report."""
    import importlib.util

    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def no_torch_verdict(v: Dict[str, Any], world: int) -> None:
    v["verdict"] = "failed"
    v["failed_in"] = {"phase": "import_torch", "ranks": list(range(world))}
    v["error"] = "No module named 'torch': torch is not installed in %s" % sys.executable
    v["notes"].append("no worker started: torch is not installed in %s" % sys.executable)
    v["causes"] = cause_records(["torch-missing"])


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
    v: Dict[str, Any], sup: Supervisor, ns: argparse.Namespace, world: int, ngpu: int
) -> None:
    ev: Dict[str, Any] = {"texts": [(v.get("facts") or {}).get("nvml_error") or ""]}
    ev["backend"] = v["backend"]
    ev["cpu"] = bool(ns.cpu)
    try:
        run_all(v, sup, ns, world, ngpu, ev)
    except Interrupted as exc:
        record_interrupt(v, sup, ev, world, exc.name)
        raise


def run_all(
    v: Dict[str, Any],
    sup: Supervisor,
    ns: argparse.Namespace,
    world: int,
    ngpu: int,
    ev: Dict[str, Any],
) -> None:
    """The baseline, the main run and the experiments; the verdict and its causes."""
    if not ns.no_single_gpu and not run_baseline(v, sup, ns, ev):
        v["causes"] = find_causes(ev)
        return
    main = sup.run(main_spec(ns, world, ngpu, sup.deadline_at))
    take_main(v, main, ns, ev, world, sup.t0)
    sup.current = None  # judged
    trouble = trouble_of(v, ev)
    # One rank has no transport between GPUs to change; the job's settings still matter.
    if trouble and (world > 1 or ns.job_env):
        peers = (v.get("p2p") or {}).get("matrix")
        plan = plan_experiments(ns, v["facts"], world, ngpu, peers, v["backend"])
        if v["backend"] == "gloo":
            note_gloo(v, ns, plan, world)
        n = world if ns.cpu or not ngpu else ngpu  # on --cpu, ranks stand in for GPUs
        absent = [x for x in plan if x.startswith("gpus-") and max(experiment_env(x)[1]) >= n]
        why = "names a GPU past the %d this run has (0-%d)" % (n, n - 1)
        v["experiments"] += [skipped(x, why) for x in absent]  # a hand list's typo
        run_experiments(v, sup, ns, ev, [x for x in plan if x not in absent], trouble)
    v["causes"] = find_causes(ev)


def take_main(
    v: Dict[str, Any],
    main: RunResult,
    ns: argparse.Namespace,
    ev: Dict[str, Any],
    world: int,
    t0: float,
) -> None:
    """The main run into the verdict and the evidence."""
    ev["texts"] += main.texts
    record_main(v, main, ns, t0)
    ev["backend"] = v["backend"]  # as the ranks read it (auto: gloo where torch has no NCCL)
    ev["main"] = run_summary(main)
    ev["slow"] = v["slow"]
    judge_main(v, main, ns, ev, world)
    if ns.soak:
        v["soak"] = soak_record(ns, main)


RUN_LABELS = {"single": "the single-GPU baseline", "main": "the main run"}


def record_interrupt(
    v: Dict[str, Any], sup: Supervisor, ev: Dict[str, Any], world: int, name: str
) -> None:
    """The verdict when a signal stopped the probe: where the run in flight was. An interrupted
    run is evidence of nothing, so no causes from it; a run that had hung or failed before the
    signal (which came while its workers were being stopped) is, and is recorded as such."""
    res = sup.current
    if res is not None:
        if sup.live:  # the signal cut the stop of the workers short
            res.unkillable = kill_groups(res.ranks)
            sup.live = []
        sup.collect(res)
    if v["verdict"] != "not-applicable":  # the main run was judged; an experiment was cut short
        what = "during experiment %s" % res.name[len("exp-") :] if res else "after the main run"
        v["notes"].append("interrupted by %s %s; no experiment after it ran" % (name, what))
        v["causes"] = find_causes(ev)
        return
    if res is not None and record_ended(v, res, sup, ev, world, name):
        return
    v["verdict"], v["causes"] = "failed", []
    v["error"] = "interrupted by %s between runs" % name
    if res is None:
        return
    if not res.spawned:
        v["error"] = "interrupted by %s while the ranks of %s were starting" % (
            name,
            RUN_LABELS.get(res.name, res.name),
        )
        return
    v["phases"] = phase_records(res, sup.t0)
    v["unkillable_ranks"] = res.unkillable
    if res.name == "main":  # the baseline's and experiments' ranks see fewer GPUs
        record_readings(v, res)
    if all(st.done for st in res.ranks):
        return
    stalled = sup.describe_stall(res, res.phases)
    stalled["by"] = name
    v["verdict"], v["stalled"], v["failed_in"] = "hung", stalled, None
    v["error"] = "interrupted by %s during %s: ranks %s had not finished %s" % (
        name,
        RUN_LABELS.get(res.name, res.name),
        stalled["ranks"],
        stalled["phase"],
    )
    if stalled["waiting"]:
        v["error"] += "; ranks %s were waiting for them" % stalled["waiting"]


def record_ended(
    v: Dict[str, Any], res: RunResult, sup: Supervisor, ev: Dict[str, Any], world: int, name: str
) -> bool:
    """A baseline or main run that had ended (hung, failed, finished) before the signal, which
    came while its workers were being stopped, is evidence: recorded as usual. False when it
    had not ended, or was a baseline that passed."""
    if not (res.spawned and res.ranks):  # stopped while its ranks were starting
        return False
    if res.status == "ok" and not all(st.done for st in res.ranks):
        return False
    if res.name == "main":
        take_main(v, res, sup.ns, ev, world, sup.t0)
    elif judge_baseline(v, res, sup.ns, ev, sup.t0):
        return False
    v["causes"] = find_causes(ev)
    v["notes"].append(
        "interrupted by %s after %s had %s, while its workers were being stopped: nothing ran "
        "after it" % (name, RUN_LABELS[res.name], "finished" if res.status == "ok" else res.status)
    )
    return True


def main_spec(ns: argparse.Namespace, world: int, ngpu: int, deadline_at: float) -> RunSpec:
    if (ns.nnodes or 1) > 1:
        # world is this node's share; ranks are global, node by node.
        first = ns.node_rank * world
        ranks = list(range(first, first + world))
        env = experiment_env(ns.experiment)[0] if ns.experiment else {}
        return RunSpec(
            "main", "main", world * ns.nnodes, deadline_at, ranks=ranks, env=env, soak=ns.soak
        )
    gpus = list(range(min(world, ngpu))) if ngpu else list(range(world))
    env = experiment_env(ns.experiment)[0] if ns.experiment else {}
    return RunSpec("main", "main", world, deadline_at, gpus=gpus, env=env, soak=ns.soak)


def run_baseline(
    v: Dict[str, Any], sup: Supervisor, ns: argparse.Namespace, ev: Dict[str, Any]
) -> bool:
    """The single-GPU baseline; False (and the verdict filled) when it did not pass."""
    single = sup.run(RunSpec("single", "single", 1, sup.deadline_at, gpus=[0]))
    passed = judge_baseline(v, single, ns, ev, sup.t0)
    sup.current = None  # judged
    return passed


def judge_baseline(
    v: Dict[str, Any], single: RunResult, ns: argparse.Namespace, ev: Dict[str, Any], t0: float
) -> bool:
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
    if single.status == "ok":
        return True
    # One GPU alone does not come up: several will not either. Report that.
    v["verdict"] = s["verdict"]
    v["stalled"], v["failed_in"], v["error"] = single.stalled, single.failed_in, single.error
    v["phases"] = phase_records(single, t0)
    v["notes"].append("single-GPU baseline did not pass; multi-GPU run skipped")
    v["unkillable_ranks"] = single.unkillable
    ev["main"] = run_summary(single)
    return False


def record_main(v: Dict[str, Any], main: RunResult, ns: argparse.Namespace, t0: float) -> None:
    v["phases"] = phase_records(main, t0)
    v["stalled"], v["failed_in"], v["error"] = main.stalled, main.failed_in, main.error
    v["unkillable_ranks"] = main.unkillable
    record_readings(v, main)
    v["slow"] = slow_phases(main, ns.phase_deadline / 2.0)


def record_readings(v: Dict[str, Any], main: RunResult) -> None:
    """What the main run's ranks read on the way (backend, torch, NCCL, GPUs, P2P, bandwidth):
    facts about the host whether or not the run got to the end."""
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
        if cinfo and cinfo.get("device_count"):
            # what CUDA listed where training runs; plan reads it when nvidia-smi listed nothing
            v["facts"]["gpu_count"] = cinfo["device_count"]
            names = v["facts"].setdefault("gpu_names", {})
            names[str(st.rank % cinfo["device_count"])] = cinfo.get("name")
    v["p2p"] = p2p_evidence(main)
    v["allreduce"] = allreduce_evidence(main)


def judge_main(
    v: Dict[str, Any], main: RunResult, ns: argparse.Namespace, ev: Dict[str, Any], world: int
) -> None:
    degraded = [s["phase"] for s in v["slow"]]
    if main.status == "ok" and not ns.cpu and v["backend"] == "nccl" and world > 1:
        degraded += below_floors(v, ev)
    if ev.get("slow_single"):
        degraded.append("single")
    v["verdict"] = {
        "ok": "degraded" if degraded else "healthy",
        "hung": "hung",
        "failed": "failed",
    }[main.status]


def below_floors(v: Dict[str, Any], ev: Dict[str, Any]) -> List[str]:
    """Phases whose bandwidth is under the floor for the topology (LINK_FLOORS)."""
    out = []
    cls = link_class(v["facts"].get("topology_worst"))
    floors = LINK_FLOORS[cls]
    low = [k for k, g in v["p2p"]["copy_gbps"].items() if g < floors["copy_gbps"]]
    if low:
        ev["low_copy"] = True
        out.append("p2p_copy")
        v["notes"].append(
            "P2P copy under %.1f GB/s (%s links) for %s" % (floors["copy_gbps"], cls, low)
        )
    big = v["allreduce"][-1] if v["allreduce"] else None
    if big and big["busbw_gbps"] < floors["busbw_gbps"]:
        ev["low_bw"] = True
        out.append("allreduce")
        v["notes"].append(
            "all-reduce busbw %.2f GB/s at %d bytes, under %.1f GB/s for %s links"
            % (big["busbw_gbps"], big["bytes"], floors["busbw_gbps"], cls)
        )
    return out


def trouble_of(v: Dict[str, Any], ev: Dict[str, Any]) -> Optional[str]:
    """The phase worth experiments ("bandwidth" for a run under the floors), or None."""
    if v["verdict"] in ("hung", "failed"):
        where = (v["stalled"] or v["failed_in"] or {}).get("phase")
        return where if where in P2P_SENSITIVE else None
    if v["verdict"] != "degraded":
        return None
    slow = [s["phase"] for s in v["slow"] if s["phase"] in P2P_SENSITIVE]
    if slow:
        return slow[0]
    return "bandwidth" if ev.get("low_bw") or ev.get("low_copy") else None


# --------------------------------------------------------------------------- experiments

# One mechanism each, in the order tried: the broadest first (P2P on or off), then the
# narrower transports and algorithms. NCCL's environment variables:
# https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
KNOBS = (
    ("p2p-off", {"NCCL_P2P_DISABLE": "1"}),
    ("shm-off", {"NCCL_SHM_DISABLE": "1"}),
    ("cumem-off", {"NCCL_CUMEM_ENABLE": "0"}),
    ("p2p-level-pxb", {"NCCL_P2P_LEVEL": "PXB"}),
    ("ib-off", {"NCCL_IB_DISABLE": "1"}),
    ("proto-simple", {"NCCL_PROTO": "Simple"}),
    ("algo-ring", {"NCCL_ALGO": "Ring"}),
    ("nvls-off", {"NCCL_NVLS_ENABLE": "0"}),
    # GPU Direct RDMA (NIC <-> GPU memory) carries traffic between hosts only: the multi-node
    # probe tries it (gpufix.probe.multinode), never a run inside one host.
    ("gdr-off", {"NCCL_NET_GDR_LEVEL": "LOC"}),
    # Multi-node NVLink joins GPUs of different hosts in one NVLink domain (GB200/GB300 racks):
    # the multi-node probe tries it, never a run inside one host.
    ("mnnvl-off", {"NCCL_MNNVL_ENABLE": "0"}),
)
# The experiments that change an NCCL setting and nothing else: every knob. A gloo run (--cpu,
# --backend gloo) reads none of them, so the plan leaves them out there. Interface experiments
# set GLOO_SOCKET_IFNAME too; GPU pairs and the job's settings apply to any backend. The
# engine's copy is NCCL_ONLY in gpufix/engine/signals.py (a test keeps the two equal).
NCCL_ONLY = tuple(kid for kid, _ in KNOBS)
# The causes that blame an NCCL mechanism: what those experiments decide, and NCCL's transport
# for a collective no experiment cleared. Never read from a gloo run (NCCL_CAUSES in
# gpufix/engine/signals.py is the engine's copy).
NCCL_CAUSES = (*(c for kid in NCCL_ONLY for c in DECIDED_CAUSES[kid]), "nccl-transport")
# Interface names as the kernel allows them (IFNAMSIZ 16, no '/' or blanks).
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
# Settings that turn a mechanism off, at NCCL's documented default (env.rst: "0" leaves it on).
# NCCL reads ~/.nccl.conf and /etc/nccl.conf only for variables not in the environment
# (src/misc/param.cc: setEnvFile calls setenv(var, value, 0)), so the default in the
# environment outweighs an interim's "1" there: the verification of a permanent fix after an
# interim one runs without the interim (gpufix apply, docs/probe.md). The engine's copy is
# nccl_knobs.yaml's `default` (this program never imports gpufix; a test keeps the two equal).
NCCL_DEFAULTS = {
    "NCCL_P2P_DISABLE": "0",
    "NCCL_SHM_DISABLE": "0",
    "NCCL_IB_DISABLE": "0",
    "NCCL_PXN_DISABLE": "0",
}
PAIR_RE = re.compile(r"^gpus-([0-9]{1,3})-([0-9]{1,3})$")  # ASCII: `\d` takes any digit
# --job-env: the settings a training job runs with, so the probe sees what the job sees (an
# account's shell exports, a launcher's environment). Names of the libraries a start-up reads;
# values without blanks, quotes or template characters (data, never code). The probe owns its
# NCCL log (NCCL_DEBUG*) and the rendezvous (MASTER_*, RANK, WORLD_SIZE are not in the names).
JOB_ENV_NAME_RE = re.compile(
    r"^(NCCL|TORCH_NCCL|TORCH_DISTRIBUTED|GLOO|CUDA|UCX|FI)_[A-Z0-9_]{1,60}$"
)
JOB_ENV_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/=+^-]{0,200}$")
JOB_ENV_OWNED = ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS")
# Settings that load code from a path or write files where they say: the probe runs as root, so
# the job's (another account's) value would run that account's library, or overwrite any file,
# as root (NCCL's plugin and dump variables, CUDA's injection library, libfabric's and UCX's
# module directories, torch's debug dump). A plugin named without a path (NCCL_NET_PLUGIN=none,
# or a name the system's library path resolves) is kept.
JOB_ENV_LOADS = (
    "NCCL_CONF_FILE",
    "NCCL_TOPO_DUMP_FILE",
    "NCCL_GRAPH_DUMP_FILE",
    "CUDA_INJECTION64_PATH",
    "CUDA_CACHE_PATH",
    "FI_PROVIDER_PATH",
    "UCX_MODULE_DIR",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
)
JOB_ENV_PLUGINS = (
    "NCCL_NET_PLUGIN",
    "NCCL_TUNER_PLUGIN",
    "NCCL_PROFILER_PLUGIN",
    "NCCL_ENV_PLUGIN",
)
JOB_ENV_MAX = 32
JOB_ENV_HELP = "NCCL_*, TORCH_NCCL_*, TORCH_DISTRIBUTED_*, GLOO_*, CUDA_*, UCX_*, FI_*"


def parse_job_env(items: List[str]) -> Dict[str, str]:
    """--job-env VAR=VALUE items as a dict; ArgError for anything else."""
    if len(items) > JOB_ENV_MAX:
        raise ArgError("--job-env: at most %d settings" % JOB_ENV_MAX)
    out: Dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not JOB_ENV_NAME_RE.fullmatch(name):
            raise ArgError("--job-env %r: want VAR=VALUE with VAR one of %s" % (item, JOB_ENV_HELP))
        if name in JOB_ENV_OWNED:
            raise ArgError("--job-env %s: the probe sets it (its NCCL log)" % name)
        if name in JOB_ENV_LOADS or (name in JOB_ENV_PLUGINS and "/" in value):
            raise ArgError(
                "--job-env %s: it loads code from, or writes, a path the job names; the probe "
                "runs as root and takes no such setting" % name
            )
        if not JOB_ENV_VALUE_RE.fullmatch(value):
            raise ArgError("--job-env %s: the value has characters no setting needs" % name)
        if name in out:
            raise ArgError("--job-env %s given twice" % name)
        out[name] = value
    return out


WITHOUT = "job-env-without-"  # an experiment id: the job's settings but VAR (job-env-without-VAR)


def host_vars(ns: argparse.Namespace, exp_id: str) -> Tuple[str, ...]:
    """The job's settings an experiment runs without (their host values back)."""
    if exp_id == "job-env-off":
        return tuple(sorted(ns.job_env))
    if exp_id.startswith(WITHOUT):
        return (exp_id[len(WITHOUT) :],)
    return ()


def set_job_env(ns: argparse.Namespace) -> None:
    """Put the job's settings in the environment every rank inherits; keep the host's own values
    for the job-env-off and job-env-without-VAR experiments."""
    ns.job_env_saved = {var: os.environ.get(var) for var in ns.job_env}
    os.environ.update(ns.job_env)


def record_job_env(v: Dict[str, Any], ns: argparse.Namespace) -> None:
    """Say in the verdict that the runs had the job's settings."""
    if not ns.job_env:
        return
    v["job_env"] = dict(ns.job_env)
    v["job_env_culprit"] = None
    v["notes"].append(
        "every run ran with the job's settings %s (--job-env), except the job-env-off "
        "experiment (without all of them) and any job-env-without-VAR (without that one)"
        % " ".join("%s=%s" % kv for kv in sorted(ns.job_env.items()))
    )


def experiment_env(exp_id: str) -> Tuple[Dict[str, str], Optional[List[int]]]:
    """The environment and GPU subset of one experiment id; ValueError for an unknown id."""
    for kid, env in KNOBS:
        if kid == exp_id:
            return dict(env), None
    if exp_id == "job-env-off":
        return {}, None  # what it leaves out is the verdict's job_env
    if exp_id.startswith(WITHOUT) and JOB_ENV_NAME_RE.fullmatch(exp_id[len(WITHOUT) :]):
        return {}, None  # the job's settings but this one
    m = PAIR_RE.fullmatch(exp_id)
    if m and int(m.group(1)) < int(m.group(2)):
        return {}, [int(m.group(1)), int(m.group(2))]
    name = exp_id[len("ifname-") :] if exp_id.startswith("ifname-") else ""
    if IFNAME_RE.fullmatch(name):
        return {"NCCL_SOCKET_IFNAME": name, "GLOO_SOCKET_IFNAME": name}, None
    raise ValueError("unknown experiment %r" % exp_id)


def knob_applies(
    exp_id: str,
    env: Dict[str, str],
    facts: Dict[str, Any],
    peers: Optional[Dict[str, Dict[str, bool]]] = None,
    ngpu: int = 0,
) -> bool:
    """False when the facts, or the main run's peer-access matrix, say the knob would change
    nothing here."""
    if all(os.environ.get(k) == val for k, val in env.items()):
        return False  # already set that way
    if exp_id in ("p2p-off", "p2p-level-pxb") and peers_refused(peers):
        return False  # NCCL uses no P2P transport where CUDA refuses peer access (p2pCanConnect)
    worst = facts.get("topology_worst")
    if exp_id == "p2p-level-pxb" and worst and (worst.startswith("NV") or worst in ("PIX", "PXB")):
        return False  # every pair is within PXB already
    if exp_id == "p2p-level-pxb" and pxb_is_default(facts, ngpu):
        return False  # NCCL's own default here
    if exp_id == "nvls-off" and worst and not worst.startswith("NV"):
        return False  # NVLink SHARP needs NVLink/NVSwitch
    if exp_id == "gdr-off":
        return False  # inside one host NCCL does not use the network transport's GPU Direct
    if exp_id == "mnnvl-off":
        return False  # multi-node NVLink joins GPUs of different hosts, never one host's
    # NCCL uses InfiniBand only where the host has it.
    return exp_id != "ib-off" or bool(facts.get("infiniband"))


def peers_refused(peers: Optional[Dict[str, Dict[str, bool]]]) -> bool:
    """Every GPU pair the main run read refuses peer access (cudaDeviceCanAccessPeer)."""
    cells = [ok for row in (peers or {}).values() for ok in row.values()]
    return bool(cells) and not any(cells)


def pair_order(n: int) -> List[Tuple[int, int]]:
    """Disjoint pairs first (every GPU in a run after n/2 runs), then the rest."""
    cover = [(i, i + 1) for i in range(0, n - 1, 2)]
    rest = [(i, j) for i in range(n) for j in range(i + 1, n) if (i, j) not in cover]
    return cover + rest


def plan_experiments(
    ns: argparse.Namespace,
    facts: Dict[str, Any],
    world: int,
    ngpu: int,
    peers: Optional[Dict[str, Dict[str, bool]]] = None,
    backend: str = "nccl",
) -> List[str]:
    if ns.no_experiments or ns.experiment or (ns.nnodes or 1) > 1:
        return []  # multi-node experiments are the controller's, one run per host group
    if ns.experiments:
        return ns.experiments.split(",")
    # The job's own settings first: the most direct suspect when the job has any.
    plan = ["job-env-off"] if ns.job_env else []
    if world < 2:
        return plan  # one rank: no transport between GPUs for a knob to change
    for exp_id, env in () if backend == "gloo" else KNOBS:  # gloo reads no NCCL setting
        if exp_id == "p2p-off" and ns.no_p2p_rerun:
            continue
        if knob_applies(exp_id, env, facts, peers, min(world, ngpu) if ngpu else world):
            plan.append(exp_id)
    n = min(world, ngpu) if ngpu else world  # on --cpu, ranks stand in for GPUs
    if n >= 3:
        plan += ["gpus-%d-%d" % p for p in pair_order(n)]
    return plan


def note_gloo(v: Dict[str, Any], ns: argparse.Namespace, plan: List[str], world: int) -> None:
    """Say in a gloo run's verdict why no NCCL experiment was planned, or what a hand-listed
    one (--experiments) shows: NCCL reads none of its settings there."""
    listed = [x for x in plan if x in NCCL_ONLY]
    if listed:
        v["notes"].append(
            "gloo run: NCCL reads none of its settings, so %s (--experiments) show nothing "
            "about NCCL here; no NCCL cause is read from them" % ", ".join(listed)
        )
        return
    by_hand = ns.no_experiments or ns.experiment or ns.experiments
    if world > 1 and not by_hand and (ns.nnodes or 1) == 1:  # multi-node: the controller plans
        v["notes"].append(
            "gloo run: no NCCL experiment was planned (p2p-off, shm-off and the like): NCCL "
            "reads none of its settings in a gloo run"
        )


def run_experiments(
    v: Dict[str, Any],
    sup: Supervisor,
    ns: argparse.Namespace,
    ev: Dict[str, Any],
    plan: List[str],
    trouble: str,
) -> None:
    """Fresh runs with one mechanism changed, cheapest first, until one turns the run healthy."""
    end = time.monotonic() + ns.experiment_budget
    floor_s = min(ns.phase_deadline, 5.0)
    for i, exp_id in enumerate(plan):
        left = end - time.monotonic()
        if left < floor_s:
            why = "experiment budget of %.0f s spent" % ns.experiment_budget
            v["experiments"] += [skipped(x, why) for x in plan[i:]]
            break
        rec, res = run_experiment(sup, ns, v, exp_id, left, trouble)
        ev["texts"] += res.texts
        v["experiments"].append(rec)
        if exp_id == "p2p-off":
            v["no_p2p_rerun"] = ev["rerun"] = legacy_rerun(res)
        if rec["verdict"] == "healthy" and not exp_id.startswith("gpus-"):
            v["decided_by"] = ev["decided"] = exp_id
            if exp_id.startswith(WITHOUT):  # listed by --experiments
                name_culprit(v, ns, exp_id[len(WITHOUT) :], "%s was healthy" % exp_id)
            break
    if v["decided_by"] == "job-env-off":
        find_culprit(v, sup, ns, ev, end, trouble)
    if "p2p-off" in plan and v["no_p2p_rerun"] is None:
        v["no_p2p_rerun"] = {"verdict": "skipped", "why": "experiment budget spent"}
    v["suspects"] = ev["suspects"] = pair_suspects(v["experiments"])


def find_culprit(
    v: Dict[str, Any],
    sup: Supervisor,
    ns: argparse.Namespace,
    ev: Dict[str, Any],
    end: float,
    trouble: str,
) -> None:
    """After job-env-off turned the run healthy: which of the job's settings it needs. Only the
    settings that can change a run are suspects; one suspect is that one; with several, each in
    turn comes off alone (job-env-without-VAR, the others kept) until a run is healthy. A
    --experiments list runs only the job-env-without-VAR it names, in its order."""
    done = set(e["id"] for e in v["experiments"])
    if ns.experiments:
        todo = [x for x in ns.experiments.split(",") if x.startswith(WITHOUT) and x not in done]
    else:
        suspects = [x for x in sorted(ns.job_env) if job_setting_matters(ns, v["backend"], x)]
        if len(suspects) == 1:
            name_culprit(v, ns, suspects[0], "the only one of them that changes the run")
            return
        todo = [WITHOUT + x for x in suspects]
    floor_s = min(ns.phase_deadline, 5.0)
    cut = False
    for i, exp_id in enumerate(todo):
        left = end - time.monotonic()
        if left < floor_s:
            why = "experiment budget of %.0f s spent" % ns.experiment_budget
            v["experiments"] += [skipped(x, why) for x in todo[i:]]
            return
        cut = left < own_deadline(ns)
        rec, res = run_experiment(sup, ns, v, exp_id, left, trouble)
        ev["texts"] += res.texts
        v["experiments"].append(rec)
        if rec["verdict"] == "healthy":
            name_culprit(v, ns, exp_id[len(WITHOUT) :], "%s was healthy" % exp_id)
            return
    if len(todo) > 1 and not cut and not ns.experiments:  # a hand list may leave some out
        v["notes"].append(
            "no run without one of the job's settings was healthy: more than one of them breaks "
            "the run on its own; take them all out, or probe with each alone"
        )


def job_setting_matters(ns: argparse.Namespace, backend: str, var: str) -> bool:
    """False for a setting whose removal cannot change a run: the host's own value already,
    an interface --ifname sets in every run, an NCCL setting in a gloo run."""
    if ns.job_env[var] == ns.job_env_saved.get(var):
        return False
    if ns.ifname and var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        return False
    return not (backend == "gloo" and var.startswith(("NCCL_", "TORCH_NCCL_")))


def name_culprit(v: Dict[str, Any], ns: argparse.Namespace, var: str, because: str) -> None:
    v["job_env_culprit"] = var
    v["notes"].append(
        "the run needs the job's %s=%s to fail here (%s): taking it out of the job is the "
        "first thing to try" % (var, ns.job_env[var], because)
    )


def own_deadline(ns: argparse.Namespace) -> float:
    """An experiment's own deadline: the import, then a few phase deadlines."""
    return (ns.import_deadline or 2 * ns.phase_deadline) + 3 * ns.phase_deadline


def run_experiment(
    sup: Supervisor,
    ns: argparse.Namespace,
    v: Dict[str, Any],
    exp_id: str,
    left: float,
    trouble: str,
) -> Tuple[Dict[str, Any], RunResult]:
    env, gpus = experiment_env(exp_id)
    # Each its own deadline, within the budget.
    own = own_deadline(ns)
    t = time.monotonic()
    spec = RunSpec(
        "exp-" + exp_id,
        "pair" if gpus else "exp",
        2 if gpus else v["world_size"],
        t + min(left, own),
        env=env,
        gpus=gpus,
        soak=trouble == "soak",
        host_vars=host_vars(ns, exp_id),
    )
    spec.quick = trouble != "bandwidth"  # judging bandwidth needs the full sizes
    res = sup.run(spec)
    sup.current = None  # ended: a signal now cuts no experiment short
    stalled = res.stalled or {}
    rec = {
        "id": exp_id,
        "env": env,
        "gpus": gpus,
        "verdict": experiment_verdict(res, ns, v, spec.quick),
        "stalled": {"phase": stalled["phase"], "ranks": stalled["ranks"]} if stalled else None,
        "error": res.error,
        "elapsed_s": round(time.monotonic() - t, 3),
    }
    return rec, res


def experiment_verdict(
    res: RunResult, ns: argparse.Namespace, v: Dict[str, Any], quick: bool
) -> str:
    if res.status != "ok":
        return res.status
    if any(s["phase"] in P2P_SENSITIVE for s in slow_phases(res, ns.phase_deadline / 2.0)):
        return "degraded"
    if not quick and v["backend"] == "nccl":
        floor = LINK_FLOORS[link_class(v["facts"].get("topology_worst"))]["busbw_gbps"]
        ar = allreduce_evidence(res)
        if ar and ar[-1]["busbw_gbps"] < floor:
            return "degraded"
    return "healthy"


def skipped(exp_id: str, why: str) -> Dict[str, Any]:
    env, gpus = experiment_env(exp_id)
    rec: Dict[str, Any] = {"id": exp_id, "env": env, "gpus": gpus, "verdict": "skipped"}
    rec.update({"stalled": None, "error": why, "elapsed_s": 0.0})
    return rec


def legacy_rerun(res: RunResult) -> Dict[str, Any]:
    """The p2p-off experiment in the shape of the old no_p2p_rerun field."""
    r = run_summary(res) or {}
    ar = allreduce_evidence(res)
    r["busbw_gbps"] = ar[-1]["busbw_gbps"] if ar else None
    return r


def pair_suspects(experiments: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The GPU whose every pair fails, else the failing links; None when pairs cannot tell."""
    tried = [e for e in experiments if e["gpus"] and e["verdict"] != "skipped"]
    bad = [tuple(e["gpus"]) for e in tried if e["verdict"] != "healthy"]
    good = [tuple(e["gpus"]) for e in tried if e["verdict"] == "healthy"]
    if not bad or not good:
        return None  # no pair fails alone, or every pair does: not one GPU or link
    gpus = sorted(set(g for p in bad + good for g in p))
    # A GPU is the suspect when every pair with it fails, and there are two such pairs
    # (one failing pair alone cannot tell the GPU from the link).
    mine = dict((g, [p for p in bad + good if g in p]) for g in gpus)
    whole = [g for g in gpus if len(mine[g]) >= 2 and all(p in bad for p in mine[g])]
    if whole and all(set(p) & set(whole) for p in bad):
        return {"gpus": whole, "links": []}
    return {"gpus": [], "links": ["%d-%d" % p for p in bad]}


# --------------------------------------------------------------------------- soak


def parse_size(text: str) -> int:
    """Bytes from "8", "64K", "128M", "1G" (binary multiples, as nccl-tests reads -b/-e)."""
    m = re.fullmatch(r"([0-9]+)([KMG]?)", text.upper())  # whole, ASCII digits
    if not m:
        raise ValueError("bad size %r (want e.g. 8, 64K, 128M, 1G)" % text)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def soak_sizes(ns: argparse.Namespace) -> List[int]:
    """min, min*f, ... up to max; multiples of 4 bytes (float32 elements), at least 4."""
    lo, hi, f = parse_size(ns.soak_min_bytes), parse_size(ns.soak_max_bytes), ns.soak_factor
    sizes: List[int] = []
    n = lo
    while n <= hi:
        b = max(4, n - n % 4)
        if b not in sizes:
            sizes.append(b)
        if f <= 1:
            break
        n *= f
    return sizes


def soak_record(ns: argparse.Namespace, main: RunResult) -> Dict[str, Any]:
    rec = {"sizes": soak_sizes(ns), "iters": ns.soak_iters, "stalled_at_bytes": None}
    where = (main.stalled or main.failed_in or {}).get("phase")
    if main.status == "ok":
        rec["verdict"] = "healthy"
        rec["results"] = allreduce_evidence(main, "soak")
    elif where == "soak":
        rec["verdict"] = main.status
        steps = [st.step[1] for st in main.ranks if st.step is not None]
        rec["stalled_at_bytes"] = (main.stalled or {}).get("at_bytes") or (
            max(steps) if steps else None
        )
    else:
        rec["verdict"] = "skipped"  # the run stopped before the sweep
    return rec


def read_verdict_file(path: str) -> str:
    """A regular file of at most MAX_VERDICT_BYTES, opened without blocking (a FIFO or a link
    to /dev/zero is refused, not read forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > MAX_VERDICT_BYTES:
            raise ValueError("larger than %d bytes" % MAX_VERDICT_BYTES)
        chunks = []  # type: List[bytes]
        got = 0
        while got <= MAX_VERDICT_BYTES:
            chunk = os.read(fd, MAX_VERDICT_BYTES + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > MAX_VERDICT_BYTES:
        raise ValueError("larger than %d bytes" % MAX_VERDICT_BYTES)
    return data.decode("utf-8")


def prom_from(path: str, prom_out: Optional[str]) -> int:
    """The textfile of a verdict made elsewhere (roles/probe's, when the program printed none)."""
    try:
        v = json.loads(read_verdict_file(path))
        if not prom_out:
            raise ValueError("--prom-from needs --prom-out")
        if not isinstance(v, dict) or v.get("verdict") not in VERDICTS:
            raise ValueError("not a gpufix-probe verdict")
        text = prometheus(v)
    except (
        IOError,
        OSError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        RecursionError,
    ) as exc:
        why = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        sys.stderr.write("gpufix_probe: --prom-from %s: %s\n" % (path, why))
        return EXIT_INVALID
    return EXIT_OK if write_copy("--prom-out", prom_out, text) else EXIT_WRITE_FAILED


def write_copy(opt: str, path: str, text: str) -> bool:
    """A copy of the verdict (or its textfile) at PATH; one line on stderr when it cannot be
    written (a full or read-only filesystem): the verdict on stdout still stands."""
    try:
        write_atomic(path, text)
        return True
    except (IOError, OSError) as exc:
        why = exc.strerror or type(exc).__name__
    try:  # an older copy would go on saying the last run's verdict (a full disk can unlink)
        os.unlink(path)
        gone = "; the previous copy was removed"
    except (IOError, OSError):
        gone = "; a previous copy, if any, is still there" if os.path.lexists(path) else ""
    sys.stderr.write("gpufix_probe: %s %s: not written: %s%s\n" % (opt, path, why, gone))
    return False


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
        check_args(ns)
    except ArgError as exc:
        sys.stderr.write("gpufix_probe: %s (see --help)\n" % exc)
        return EXIT_INVALID
    if ns.worker:
        tie_to_supervisor(ns.parent_pid, ns.exit_after)
        return Worker(ns).run()
    if ns.prom_from:
        return prom_from(ns.prom_from, ns.prom_out)
    ns.run_parent, passed = run_parent()
    if ns.run_parent is None:
        sys.stderr.write(
            "gpufix_probe: no directory for the run's files, each needs %d MiB free: %s\n"
            % (RUN_DIR_FREE_BYTES >> 20, "; ".join(passed))
        )
        return EXIT_INVALID
    # Before anything else: a signal at any point must still print a verdict.
    # The handlers stay to the end: the process exits next, and a signal after the verdict was
    # printed must not turn its exit status into 128+N.
    sigs = Signals()
    v = supervise(ns, sigs)
    text = json.dumps(v, indent=2, sort_keys=True) + "\n"
    # stdout first (the role reads it): a full or read-only disk for the copies loses nothing,
    # and a stdout that cannot take it (closed, full, a broken pipe) loses not the copies
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (AttributeError, IOError, OSError, ValueError) as exc:
        sys.stderr.write("gpufix_probe: cannot write the verdict to stdout: %s\n" % exc)
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the exit flush, kept open)
    if ns.json_out:
        write_copy("--json-out", ns.json_out, text)
    if ns.prom_out:
        write_copy("--prom-out", ns.prom_out, prometheus(v))
    if ns.interrupted:
        return 128 + ns.interrupted
    return EXIT_OK if v["verdict"] in ("healthy", "not-applicable") else EXIT_NOT_HEALTHY


if __name__ == "__main__":
    sys.exit(main())
