"""The ml_stack role's driver check survives an nvidia-smi that never answers (a wedged GPU keeps
it waiting in the driver): the task timeout ends the wait, the role goes on to the
libnvidia-compute package's version, and without one it fails saying nvidia-smi did not answer in
time. Runs the role's driver tasks with ansible-playbook --check against localhost; the
"nvidia-smi" is a script that notes it ran and sleeps far past the 2-second timeout."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from role_check import run_playbook

SLEEP_S = 10
TIMEOUT_S = 2


def no_libnvidia_compute() -> bool:
    """This machine stands in for a host without the driver's libnvidia-compute package."""
    if shutil.which("dpkg-query") is None:
        return False
    listed = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Status}\\n", "libnvidia-compute*"],
        capture_output=True,
        text=True,
        check=False,
    )
    return "install ok installed" not in listed.stdout


def wedged_smi(tmp_path: Path) -> tuple[str, Path]:
    ran = tmp_path / "smi-ran"
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\n: > '{ran}'\nexec sleep {SLEEP_S}\n")
    exe.chmod(0o755)
    return str(exe), ran


# The role's driver tasks inside a block whose rescue reports, on one line, the task that failed
# the role and its message, with what the role registered from nvidia-smi and whether it read
# the package list.
BOOK = """\
- hosts: localhost
  gather_facts: true
  tasks:
    - name: The role's driver check
      block:
        - ansible.builtin.include_role:
            name: ml_stack
            tasks_from: driver
      rescue:
        - name: Report
          ansible.builtin.debug:
            msg: >-
              REPORT {{ {'failed_task': ansible_failed_task.name, 'msg': ansible_failed_result.msg,
                         'smi': __gpufix_ml_stack_smi | default({}),
                         'read_packages': ansible_facts.packages is defined} | to_json }}
"""


def driver_check(
    tmp_path: Path, **vars_: object
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None, dict[str, int]]:
    """Run the role's driver.yml in check mode: the run, the rescue's report (None when nothing
    failed) and the play recap's counts."""
    book = tmp_path / "driver.yml"
    book.write_text(BOOK)
    # what preflight sets before it imports driver.yml: cu121 wants CUDA 12's floor
    base = {"_gpufix_ml_stack_cuda_for_variant": "12.1",
            "_gpufix_ml_stack_torch_pin": "torch==2.1.2+cu121",
            "gpufix_ml_stack_nvidia_smi_timeout": TIMEOUT_S}  # fmt: skip
    r = run_playbook(tmp_path, book, {**base, **vars_}, check=True)
    report = None
    for line in r.stdout.splitlines():
        if '"msg": "REPORT ' in line:
            report = json.loads(json.loads(line.split('"msg": ', 1)[1]).removeprefix("REPORT "))
    recap = re.search(r"^localhost\s+:\s+(.*)$", r.stdout, re.M)
    assert recap, r.stdout[-3000:] + r.stderr[-2000:]
    counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", recap.group(1))}
    return r, report, counts


@pytest.mark.slow
@pytest.mark.skipif(not no_libnvidia_compute(), reason="this machine has libnvidia-compute")
def test_a_wedged_nvidia_smi_leads_to_the_package_check(tmp_path: Path) -> None:
    smi, ran = wedged_smi(tmp_path)
    r, report, counts = driver_check(tmp_path, gpufix_ml_stack_nvidia_smi_command=smi)
    assert ran.exists(), "the stand-in nvidia-smi never ran"
    assert report is not None, r.stdout[-3000:]
    # (a) the timeout failed the nvidia-smi task (no rc: the command never returned) and the role
    # rescued it and went on to read the packages: what failed the role is the assert after them
    assert report["smi"].get("failed") and "rc" not in report["smi"], report
    assert report["read_packages"], report
    assert report["failed_task"] == "Assert the installed driver and the build's floor are known"
    # (b) with no libnvidia-compute either, the assert says nvidia-smi did not answer in time
    assert report["msg"].startswith(
        f"cannot tell the installed NVIDIA driver version (nvidia-smi did not answer within "
        f"{TIMEOUT_S} s (gpufix_ml_stack_nvidia_smi_timeout; a wedged GPU?); "
        "no libnvidia-compute package)"
    ), report["msg"]
    # two rescues: the role's (nvidia-smi) and this test's (the assert); check mode changed nothing
    assert counts["rescued"] == 2 and counts["failed"] == 0 and counts["changed"] == 0, counts


@pytest.mark.slow
def test_a_given_driver_version_asks_nothing(tmp_path: Path) -> None:
    # (c) the version is given: nvidia-smi never runs, so nothing waits for it
    smi, ran = wedged_smi(tmp_path)
    r, report, counts = driver_check(tmp_path, gpufix_ml_stack_nvidia_smi_command=smi,
                                     gpufix_ml_stack_driver_version="535.183.01")  # fmt: skip
    assert r.returncode == 0 and report is None, r.stdout[-3000:]
    assert not ran.exists()
    assert counts["rescued"] == 0 and counts["changed"] == 0, counts
