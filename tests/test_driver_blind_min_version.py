"""The driver role refuses a version below gpufix_driver_min_version in check mode without an index.

Check mode on a host without NVIDIA's repository cannot read the repository's index (the run
would add it), so roles/driver/tasks/resolve.yml resolves nothing ("blind"). An exact version
asked for is still known there and must be refused when below the minimum, as a real run does
before any change; resolve.yml is also an entry point of its own, without the preflight checks.
Runs resolve.yml with ansible-playbook against localhost (connection=local, --check); it reads
`apt-cache madison` only.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from role_check import run_tasks

REPO_URI = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
BLIND = {
    "gpufix_driver_source": "nvidia",
    "gpufix_driver_branch": "590",
    "gpufix_driver_flavour": "open",
    "gpufix_driver_nvidia_repo_uri": REPO_URI,
    # What sources.yml records in check mode when the host has no entry for the repository.
    "gpufix_driver_nvidia_repo": {"reused": False, "added": True, "file": ""},
    "gpufix_driver_kernel_release": "6.8.0-136-generic",
}


def resolve(tmp_path: Path, vars_: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return run_tasks(tmp_path, "driver", "resolve", vars_)


@pytest.mark.slow
def test_blind_check_mode_refuses_an_exact_version_below_the_minimum(tmp_path: Path) -> None:
    r = resolve(
        tmp_path,
        {**BLIND, "gpufix_driver_version": "590.44.01", "gpufix_driver_min_version": "590.48.01"},
    )
    out = r.stdout + r.stderr
    assert "NVIDIA's repository is new to this host" in out  # the blind path, not a resolved one
    assert r.returncode != 0, out[-3000:]
    assert "nvidia-open 590.44.01 (the version asked for" in out
    assert "is below gpufix_driver_min_version 590.48.01" in out


@pytest.mark.slow
def test_blind_check_mode_accepts_the_minimum_and_says_what_it_cannot_compare(
    tmp_path: Path,
) -> None:
    at_min = resolve(
        tmp_path,
        {**BLIND, "gpufix_driver_version": "590.48.01", "gpufix_driver_min_version": "590.48.01"},
    )
    assert at_min.returncode == 0, at_min.stdout[-3000:]
    branch_only = resolve(tmp_path, {**BLIND, "gpufix_driver_min_version": "590.48.01"})
    assert branch_only.returncode == 0, branch_only.stdout[-3000:]
    assert "newest nvidia-open of branch 590 once" in branch_only.stdout
