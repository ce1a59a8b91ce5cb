"""What the plans tell an operator to run, as an expert reviewer (2026-12-06) found it wanting:
the GPU a pair isolated is numbered in CUDA's order, dcgmi and nvidia-smi number by PCI bus; a
PCIe-only host gets PCIe checks, not only NVLink ones; a single host's IB needs local checks; and
turning IB off costs every job across nodes, where leaving one HCA out would not."""

from __future__ import annotations

from gpufix.engine.kb import load
from gpufix.engine.needs import describe


def _how(need: str) -> str:
    return describe([need], "gpu01")[0]["how"]


def test_the_gpu_diagnostics_match_the_gpu_by_bus_id_and_read_pcie() -> None:
    how = _how("gpu-diagnostics")
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in how and "bus id" in how
    assert "lspci -vvv -s BUS_ID" in how and "AER" in how
    assert "dcgmi diag -r 3 -i GPU" not in how


def test_ib_checks_start_on_the_host_and_name_the_narrower_setting() -> None:
    how = _how("ib-fabric")
    assert "ibv_devinfo" in how and "mlx5_core" in how and "NCCL_IB_HCA" in how
    cost = load().nccl_profile("ib-off").cost
    assert "across nodes" in cost and "NCCL_IB_HCA" in cost
