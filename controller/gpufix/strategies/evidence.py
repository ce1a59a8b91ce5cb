"""Reading the probe's evidence and the host's interfaces, shared by strategies and the order."""

from __future__ import annotations

from gpufix.engine.context import Candidate, Ctx
from gpufix.facts.host import Host

# Cause ids the probe names (CAUSES in roles/probe/files/gpufix_probe.py, docs/probe.md).
P2P_CAUSES = ("p2p-path", "p2p-slow-copy")
SHM_CAUSES = ("shm",)
TRANSPORT_CAUSES = ("nccl-transport",)
DRIVER_CAUSES = ("driver-mismatch", "gpu-init")
DRIVER_TOO_OLD = ("driver-too-old",)


def across_hosts(ctx: Ctx) -> bool:
    """The probe ran across hosts: NCCL joins this host's GPUs to other hosts' over the network,
    so one GPU here is enough for the settings between nodes (the interface NCCL and its bootstrap
    use, IB/RoCE, GPUDirect RDMA through the PCIe path to the NIC)."""
    return ctx.signals is not None and ctx.signals.scope == "multi-node"


def multi_gpu_problem(ctx: Ctx, per_host: bool = False) -> str | None:
    """Why a multi-GPU setting cannot apply: no GPU, one GPU, or a count nobody could read. In a
    run across hosts one GPU (or a count nobody could read: the run used them) is enough, unless
    the setting needs several GPUs on this host (`per_host`: hiding all but one)."""
    n = ctx.host.gpu_count
    if across_hosts(ctx) and not per_host:
        return "no GPU on this host" if n == 0 else None
    if n is None:
        return "GPU count unknown (the facts could not list the GPUs): gather facts again"
    if n < 2:
        return "fewer than two GPUs"
    return None


def not_multi_gpu(ctx: Ctx, strategy: str, per_host: bool = False) -> Candidate | None:
    """The infeasible candidate when a multi-GPU setting cannot apply; a count nobody could read
    is `missing` (need `gpus`), which keeps the plan from passing over it to a later strategy."""
    problem = multi_gpu_problem(ctx, per_host)
    if problem is None:
        return None
    missing = ["gpus"] if ctx.host.gpu_count is None else []
    return Candidate(strategy, False, problem, missing=missing)


def p2p_evidence(ctx: Ctx) -> str:
    """What in the probe points at the PCIe peer path; empty when nothing does."""
    v = ctx.verdict or {}
    stalled = (v.get("stalled") or {}).get("phase")
    rerun = (v.get("no_p2p_rerun") or {}).get("verdict")
    detail = f"{v.get('verdict')} in {stalled or 'a collective'}"
    if rerun == "healthy":
        detail += ", healthy with NCCL_P2P_DISABLE=1"
    if ctx.cause(*P2P_CAUSES):
        ids = [c.get("id") for c in v.get("causes") or [] if isinstance(c, dict)]
        return f"probe {detail} ({', '.join(i for i in ids if i in P2P_CAUSES)})"
    if v.get("verdict") in ("hung", "degraded") and rerun == "healthy":
        return f"probe {detail}"
    return ""


_VIRTUAL_IFACES = (
    "docker",
    "veth",
    "virbr",
    "br-",
    "cni",
    "flannel",
    "cali",
    "tun",
    "tap",
    "podman",
)


def physical_interfaces(h: Host) -> list[str]:
    return [i for i in h.interfaces if not i.startswith(_VIRTUAL_IFACES)]


def physical_interface(h: Host) -> str | None:
    real = physical_interfaces(h)
    return real[0] if real else None


def profile_cost(ctx: Ctx, name: str) -> str:
    for p in ctx.kb.nccl_profiles:
        if p.name == name:
            return str(p.cost)
    return ""
