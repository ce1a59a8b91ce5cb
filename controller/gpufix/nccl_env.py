"""The environment variables gpufix knows about, with what counts as a debug or workaround value.

One definition for lint, preflight and diagnose: each row says which values are the ones a
check cares about and where that meaning is documented.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
NCCL_LOGGING_DOC = (
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/logging.html"
)
CUDA_ENV_DOC = (
    "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"
)
TORCH_DIST_DEBUG_DOC = (
    "https://pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications"
)
TORCH_CUDA_ASYNC_DOC = "https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution"


@dataclass(frozen=True)
class Knob:
    """One environment variable. `values`: the values that make it count (None: any value)."""

    name: str
    kind: str  # debug | p2p-off | transport | cuda-init
    values: frozenset[str] | None
    source: str
    note: str

    def matches(self, value: str) -> bool:
        """Whether `value` is one of the values that make this knob count."""
        v = value.strip()
        if self.values is None:
            return bool(v)
        return v.upper() in self.values


KNOBS: tuple[Knob, ...] = (
    Knob(
        "NCCL_DEBUG",
        "debug",
        frozenset({"INFO", "TRACE"}),
        NCCL_LOGGING_DOC,
        "levels VERSION, WARN, INFO, TRACE; WARN is the production minimum, INFO/TRACE diagnose",
    ),
    Knob("NCCL_DEBUG_SUBSYS", "debug", None, NCCL_LOGGING_DOC, "filters debug output"),
    Knob("NCCL_DEBUG_FILE", "debug", None, NCCL_LOGGING_DOC, "writes debug logs to files"),
    Knob(
        "TORCH_DISTRIBUTED_DEBUG",
        "debug",
        frozenset({"DETAIL"}),
        TORCH_DIST_DEBUG_DOC,
        "OFF, INFO or DETAIL; DETAIL adds checks that slow every collective",
    ),
    Knob(
        "CUDA_LAUNCH_BLOCKING",
        "debug",
        frozenset({"1"}),
        TORCH_CUDA_ASYNC_DOC,
        "1 makes every kernel launch synchronous: for locating an error, slow for training",
    ),
    Knob(
        "NCCL_P2P_DISABLE",
        "p2p-off",
        frozenset({"1"}),
        NCCL_ENV_DOC,
        "1 disables the GPU-to-GPU (NVLink/PCIe) transport; NCCL goes through host memory",
    ),
    Knob(
        "NCCL_P2P_LEVEL",
        "transport",
        None,
        NCCL_ENV_DOC,
        "caps the distance at which NCCL uses P2P (LOC, NVL, PIX, PXB, PHB, SYS or 0-5)",
    ),
    Knob(
        "NCCL_SHM_DISABLE",
        "transport",
        frozenset({"1"}),
        NCCL_ENV_DOC,
        "1 disables the shared-memory transport; NCCL falls back to the network",
    ),
    Knob(
        "NCCL_IB_DISABLE",
        "transport",
        frozenset({"1"}),
        NCCL_ENV_DOC,
        "1 disables InfiniBand/RoCE; NCCL falls back to IP sockets",
    ),
    Knob(
        "CUDA_VISIBLE_DEVICES",
        "cuda-init",
        None,
        CUDA_ENV_DOC,
        "read once, when CUDA initialises in the process",
    ),
    Knob(
        "CUDA_DEVICE_ORDER",
        "cuda-init",
        None,
        CUDA_ENV_DOC,
        "FASTEST_FIRST (default) or PCI_BUS_ID (nvidia-smi's order); read when CUDA initialises",
    ),
)
KNOBS_BY_NAME: Mapping[str, Knob] = {k.name: k for k in KNOBS}


def _values(kind: str) -> dict[str, frozenset[str] | None]:
    return {k.name: k.values for k in KNOBS if k.kind == kind}


# Debug settings: variable -> values that mean "debugging" (None: any non-empty value).
DEBUG_KNOBS: Mapping[str, frozenset[str] | None] = _values("debug")
# NCCL transport workarounds other than P2P off: variable -> values that count (None: any).
TRANSPORT_KNOBS: Mapping[str, frozenset[str] | None] = _values("transport")
P2P_DISABLE_VAR = "NCCL_P2P_DISABLE"
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
CUDA_DEVICE_ORDER = "CUDA_DEVICE_ORDER"
# Read by the CUDA driver once, when it initialises.
CUDA_INIT_VARS: frozenset[str] = frozenset(_values("cuda-init"))
# The order nvidia-smi and NVML number GPUs in.
PCI_BUS_ORDER = "PCI_BUS_ID"


def is_debug_setting(name: str, value: str) -> bool:
    """Whether NAME=VALUE is a debugging setting (NCCL_DEBUG=INFO, CUDA_LAUNCH_BLOCKING=1...)."""
    knob = KNOBS_BY_NAME.get(name)
    return knob is not None and knob.kind == "debug" and knob.matches(value)


def is_transport_workaround(name: str, value: str) -> bool:
    """Whether NAME=VALUE turns an NCCL transport off or caps it (P2P, SHM, IB)."""
    knob = KNOBS_BY_NAME.get(name)
    return knob is not None and knob.kind in ("p2p-off", "transport") and knob.matches(value)


__all__ = [
    "CUDA_DEVICE_ORDER",
    "CUDA_INIT_VARS",
    "CUDA_VISIBLE_DEVICES",
    "DEBUG_KNOBS",
    "KNOBS",
    "KNOBS_BY_NAME",
    "P2P_DISABLE_VAR",
    "PCI_BUS_ORDER",
    "TRANSPORT_KNOBS",
    "Knob",
    "is_debug_setting",
    "is_transport_workaround",
]
