"""roles/pcie_acs/files/gpufix-acs-bridges on a fake sysfs tree: the bridges above NVIDIA GPUs, and
above the network adapters that share a switch with one (the GPUDirect RDMA path)."""

from __future__ import annotations

import subprocess
from pathlib import Path

FINDER = Path(__file__).resolve().parents[1] / "roles" / "pcie_acs" / "files" / "gpufix-acs-bridges"


def device(sys_root: Path, path: str, vendor: str, klass: str) -> None:
    d = sys_root / "devices" / path
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "class").write_text(klass + "\n")
    link = sys_root / "bus" / "pci" / "devices" / d.name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(d)


def test_finds_the_bridges_above_each_gpu_and_nothing_else(tmp_path: Path) -> None:
    sw = "pci0000:00/0000:00:01.0/0000:01:00.0"  # root port, then a PLX switch upstream port
    device(tmp_path, f"{sw}/0000:02:08.0/0000:03:00.0", "0x10de", "0x030200")  # GPU 0
    device(tmp_path, f"{sw}/0000:02:10.0/0000:04:00.0", "0x10de", "0x030200")  # GPU 1
    device(
        tmp_path, f"{sw}/0000:02:10.0/0000:04:00.1", "0x10de", "0x040300"
    )  # its audio: not a GPU
    device(tmp_path, "pci0000:80/0000:80:01.0/0000:81:00.0", "0x15b3", "0x020000")  # a NIC
    # ... on another root complex: no GPU traffic crosses its bridges
    out = subprocess.run(
        ["sh", str(FINDER), str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]


def test_no_gpu_means_no_bridges(tmp_path: Path) -> None:
    device(tmp_path, "pci0000:00/0000:00:1f.0", "0x8086", "0x060100")
    out = subprocess.run(
        ["sh", str(FINDER), str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout == ""


def test_adds_the_bridges_of_an_adapter_beside_a_gpu(tmp_path: Path) -> None:
    # A switch with a GPU and a ConnectX (InfiniBand class) on two downstream ports: GPUDirect
    # RDMA between them turns at the switch, through the adapter's downstream port too.
    sw = "pci0000:00/0000:00:01.0/0000:01:00.0"
    device(tmp_path, f"{sw}/0000:02:08.0/0000:03:00.0", "0x10de", "0x030200")  # GPU
    device(tmp_path, f"{sw}/0000:02:10.0/0000:04:00.0", "0x15b3", "0x020700")  # IB adapter
    device(tmp_path, f"{sw}/0000:02:14.0/0000:05:00.0", "0x8086", "0x010802")  # NVMe: not a NIC
    device(tmp_path, "pci0000:80/0000:80:01.0/0000:81:00.0", "0x15b3", "0x020000")  # elsewhere
    out = subprocess.run(
        ["sh", str(FINDER), str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]


def test_bridges_in_a_vmd_domain_keep_their_domain(tmp_path: Path) -> None:
    """A GPU behind Intel VMD sits in a domain past four hex digits (10000:e0:1a.0, sysfs
    pci10000:e0 under the VMD endpoint): its bridges are listed, the VMD endpoint is not."""
    vmd = "pci0000:00/0000:00:0e.0/pci10000:e0"
    device(tmp_path, f"{vmd}/10000:e0:1a.0/10000:e1:00.0", "0x10de", "0x030200")
    out = subprocess.run(
        ["sh", str(FINDER), str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["10000:e0:1a.0"]
