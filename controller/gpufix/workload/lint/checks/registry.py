"""Every check, in the order they run."""

from __future__ import annotations

from . import Check, anomaly, data_parallel, devices, env_knobs, late_cuda_env, nvsmi_order

CHECKS: tuple[Check, ...] = (
    late_cuda_env.CHECK,
    data_parallel.CHECK,
    env_knobs.CHECK,
    devices.CHECK,
    nvsmi_order.CHECK,
    anomaly.CHECK,
)
