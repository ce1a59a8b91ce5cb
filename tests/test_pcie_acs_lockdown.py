"""The pcie_acs role refuses, before any change, to clear ACS under kernel lockdown: Ubuntu's
kernels lock down under Secure Boot and then refuse PCI config-space writes from userspace
(pci_write_config, LOCKDOWN_PCI_ACCESS), while setpci only warns and exits 0. Runs the role's
preflight with ansible-playbook against localhost in check mode, on a recorded lockdown file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from role_check import ROOT, run_tasks

ROLE = ROOT / "roles" / "pcie_acs"


def preflight(
    tmp_path: Path, lockdown: str | None, **vars_: object
) -> subprocess.CompletedProcess[str]:
    """The preflight with `lockdown` as the file's text (None: no file, no lockdown LSM)."""
    path = tmp_path / "lockdown"
    if lockdown is not None:
        path.write_text(lockdown + "\n")
    return run_tasks(
        tmp_path,
        "pcie_acs",
        "preflight",
        {"gpufix_pcie_acs_bridges": ["0000:02:08.0"], "gpufix_pcie_acs_lockdown_path": str(path),
         **vars_},
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode", ["none [integrity] confidentiality", "none integrity [confidentiality]"]
)
def test_lockdown_is_refused_with_the_ways_out(tmp_path: Path, mode: str) -> None:
    r = preflight(tmp_path, mode)
    assert r.returncode != 0, r.stdout[-3000:]
    active = mode.split("[")[1].split("]")[0]
    assert f"the kernel is in lockdown ({active}," in r.stdout
    assert "ACS cannot be cleared" in r.stdout and "Secure Boot" in r.stdout
    for way_out in ("BIOS/firmware", "turn Secure Boot off", "nccl-profile"):
        assert way_out in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("lockdown", ["[none] integrity confidentiality", None])
def test_no_lockdown_passes(tmp_path: Path, lockdown: str | None) -> None:
    r = preflight(tmp_path, lockdown)
    assert r.returncode == 0, r.stdout[-3000:]
    # the check ran (the file was read, or found absent), and passed
    refuse = r.stdout.split("Refuse to clear ACS under kernel lockdown]")[1].split("TASK")[0]
    assert "ok: [localhost]" in refuse


@pytest.mark.slow
def test_no_bridges_means_nothing_to_refuse(tmp_path: Path) -> None:
    """With no bridges the role only removes its unit: lockdown stops nothing."""
    r = preflight(tmp_path, "none [integrity] confidentiality", gpufix_pcie_acs_bridges=[])
    assert r.returncode == 0, r.stdout[-3000:]


def test_intel_passthrough_adds_only_iommu_pt() -> None:
    """intel_iommu=on turns the IOMMU on where Ubuntu leaves it off, and with it ACS on every
    bridge (Linux 50310600ebda): the opposite of what the role is for. iommu=pt alone is enough
    where the IOMMU already translates, which is where the controller asks for pass-through."""
    flags = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert flags["_gpufix_pcie_acs_iommu_flags_by_vendor"]["GenuineIntel"] == ["iommu=pt"]
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    text = spec["argument_specs"]["main"]["options"]["gpufix_pcie_acs_iommu_flags"]["description"]
    assert "intel_iommu=on iommu=pt" not in text
