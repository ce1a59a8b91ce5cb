"""Parsers on outputs recorded on a real H200 machine (bench/device/gpu_check.sh, docs/device/)."""

from __future__ import annotations

from pathlib import Path

from gpufix.facts.local import load_module

OUT = Path(__file__).parent / "fixtures" / "tool_outputs"
mod = load_module()


def read(name: str) -> str:
    return (OUT / name).read_text()


def test_query_gpu() -> None:
    (gpu,) = mod.parse_nvidia_smi_query(read("query_h200_real.csv"))
    assert gpu["name"] == "NVIDIA H200" and gpu["compute_cap"] == "9.0"
    assert gpu["memory.total"] == "143771" and gpu["pci.bus_id"] == "00000000:00:06.0"


def test_topology_single_gpu_with_ansi_header() -> None:
    topo = mod.parse_topo_matrix(read("topo_h200_real.txt"))
    assert topo["matrix"] == {"GPU0": {}} and topo["worst"] is None
    assert mod.parse_topo_p2p(read("p2p_r_h200_real.txt")) == {"GPU0": {}}


def test_open_kernel_module_version() -> None:
    parsed = mod.parse_proc_driver_version(read("proc_driver_version_580_open_real.txt"))
    assert parsed == {"version": "580.159.04", "flavor": "open"}
