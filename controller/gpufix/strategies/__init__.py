"""The strategies: one module each (a Strategy record and its evaluate function), and the registry.

Adding a strategy: a module here with its STRATEGY, its name in REGISTRY, and its role and
playbook (docs/architecture.md).
"""

from __future__ import annotations

from gpufix.strategies import (
    container_fallback,
    container_fix,
    cuda_downgrade,
    driver_pin,
    kernel_upgrade,
    nccl_profile,
    none,
    pcie_acs,
    single_gpu,
)
from gpufix.strategies.base import Strategy

REGISTRY: dict[str, Strategy] = {
    s.name: s
    for s in (
        none.STRATEGY,
        kernel_upgrade.STRATEGY,
        cuda_downgrade.STRATEGY,
        container_fallback.STRATEGY,
        nccl_profile.STRATEGY,
        single_gpu.STRATEGY,
        pcie_acs.STRATEGY,
        driver_pin.STRATEGY,
        container_fix.STRATEGY,
    )
}
NAMES: tuple[str, ...] = tuple(REGISTRY)


def get(name: str) -> Strategy:
    return REGISTRY[name]
