"""The driver role's preflight accepts what `gpufix plan` asks of it (issue 11, finding 3).

The variables of a real plan (the CLI's --json) go through roles/driver/tasks/preflight.yml with
ansible-playbook against localhost (connection=local, --check): the plan and the role must agree
on what the Ubuntu archive can install. Preflight only asserts; it reads no package state.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from role_check import run_tasks

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ROOT / "tests" / "fixtures" / "hosts"


def plan_vars(host: str) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "plan", host, "--json", "--strategy", "driver-pin"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    (plan,) = json.loads(r.stdout)["plans"]
    (step,) = plan["steps"]
    assert step["playbook"] == "driver_pin.yml"
    return dict(step["vars"])


def preflight(
    tmp_path: Path, vars_: dict[str, Any], kernel: str
) -> subprocess.CompletedProcess[str]:
    """Run the role's preflight on this machine; `kernel` stands in for the target's uname -r."""
    return run_tasks(
        tmp_path, "driver", "preflight", {**vars_, "gpufix_driver_kernel_release": kernel}
    )


def host_kernel(snapshot: str) -> str:
    return str(json.loads((HOSTS / snapshot).read_text())["facts"]["kernel"]["running"])


@pytest.mark.slow
def test_host08_plan_passes_the_driver_roles_preflight(tmp_path: Path) -> None:
    """HGX A100 on jammy, desktop-flavour nvidia-driver-535, fabric manager behind, the driver's
    exact version not known to be installable: the driver moves with fabric manager. R535 ended
    in June 2026, so (planned today) to R580 on the -server flavour, which the archive builds
    fabric manager beside; preflight must accept it."""
    vars_ = plan_vars("host08")
    assert vars_["gpufix_driver_fabricmanager"] is True
    assert vars_["gpufix_driver_branch"] == "580"
    assert vars_["gpufix_driver_flavour"] == "server"
    # No exact version: the role picks the pocket's current one.
    assert "gpufix_driver_version" not in vars_
    r = preflight(tmp_path, vars_, host_kernel("a100-fm-mismatch.json"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.slow
def test_preflight_refuses_archive_fabric_manager_580_without_the_server_driver(
    tmp_path: Path,
) -> None:
    """nvidia-fabricmanager-580 depends on nvidia-kernel-common-580-server-VERSION: the desktop
    flavour cannot satisfy it, and preflight says so before anything changes."""
    vars_ = {
        "gpufix_driver_branch": "580",
        "gpufix_driver_flavour": "",
        "gpufix_driver_fabricmanager": True,
    }
    r = preflight(tmp_path, vars_, host_kernel("a100-fm-mismatch.json"))
    assert r.returncode != 0
    assert "needs the -server driver" in r.stdout
    ok = preflight(
        tmp_path, {**vars_, "gpufix_driver_flavour": "server"}, host_kernel("a100-fm-mismatch.json")
    )
    assert ok.returncode == 0, ok.stdout[-3000:]


@pytest.mark.slow
def test_preflight_matches_whole_values(tmp_path: Path) -> None:
    """A final newline passed `match('^...$')` (Python's `$`); the role's patterns end in `\\Z`
    now (2026-12-06), as its spec's do."""
    vars_ = {"gpufix_driver_branch": "580", "gpufix_driver_flavour": "server"}
    kernel = host_kernel("a100-fm-mismatch.json")
    for bad, release in (({"gpufix_driver_branch": "580\n"}, kernel), ({}, kernel + "\n")):
        r = preflight(tmp_path, {**vars_, **bad}, release)
        assert r.returncode != 0, (bad, release)
        assert "Assert the branch and version agree" in r.stdout
