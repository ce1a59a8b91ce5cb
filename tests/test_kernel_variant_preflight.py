"""The kernel role, run by hand, refuses before any change to put bionic's HWE kernel beside a
cloud or OEM variant (the plan already calls kernel-upgrade infeasible there). Runs the role's
preflight with ansible-playbook against localhost in check mode; the running kernel comes from
a recorded `uname -r`, the release's HWE packages are bionic's (vars/Ubuntu-18.04.yml)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from role_check import ROOT, run_tasks

BIONIC = yaml.safe_load((ROOT / "roles/kernel/vars/Ubuntu-18.04.yml").read_text())


def preflight(tmp_path: Path, running: str, **vars_: object) -> subprocess.CompletedProcess[str]:
    return run_tasks(
        tmp_path,
        "kernel",
        "preflight",
        {
            **{k: v for k, v in BIONIC.items() if k.startswith("_gpufix_kernel_")},
            "gpufix_kernel_running_command": f"echo {running}",
            **vars_,
        },
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "running",
    ["5.4.0-1103-aws", "5.4.0-1109-azure", "5.0.0-1070-oem-osp1", "4.15.0-213-lowlatency"],
)
def test_a_cloud_or_oem_variant_is_refused(tmp_path: Path, running: str) -> None:
    r = preflight(tmp_path, running)
    flavour = running.split("-", 2)[2]
    assert r.returncode != 0, r.stdout[-3000:]
    assert f"{running} is Ubuntu's {flavour} kernel:" in r.stdout
    assert f"(linux-{flavour}, or its -hwe- one) moves it forward" in r.stdout


@pytest.mark.slow
# the last: host data with Jinja in it is no release, and is never evaluated
@pytest.mark.parametrize(
    "running",
    ["4.15.0-213-generic", "not-a-release", "'{{ 7 * 191 }}-1103-aws'"],
)
def test_generic_and_unreadable_releases_pass(tmp_path: Path, running: str) -> None:
    r = preflight(tmp_path, running)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "1337" not in r.stdout


@pytest.mark.slow
def test_packages_named_by_the_user_are_their_choice(tmp_path: Path) -> None:
    r = preflight(
        tmp_path,
        "5.4.0-1103-aws",
        gpufix_kernel_packages=["linux-aws"],
        gpufix_kernel_target="5.4.0-1104-aws",
    )
    assert r.returncode == 0, r.stdout[-3000:]
