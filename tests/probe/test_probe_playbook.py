"""Issue 15: verification must run in the environment training uses. playbooks/probe.yml, run the
way `gpufix apply` runs it (gpufix.runner, ansible-runner), on a podman container whose python3
has no torch while the training venv (/opt/venvs/train, a real venv whose site-packages point at
a CPU torch mounted read-only) has it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import containers
import pytest
from gpufix import runner
from podman_hosts import IMAGE, Hosts, new_hosts, sh, torch_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TRAIN = "/opt/venvs/train/bin/python"
CPU = {
    "gpufix_probe_cpu": True,
    "gpufix_probe_deadline": 120,
    "gpufix_probe_import_deadline": 90,
    "gpufix_probe_experiments": False,
}


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hosts, Path]]:
    if shutil.which("podman") is None:
        containers.unavailable("needs podman")
    if subprocess.run(["podman", "image", "exists", IMAGE]).returncode != 0:
        containers.unavailable(f"{IMAGE} missing: run tests/images/build.sh")
    h = new_hosts(1)
    try:
        h.start(torch_dir())
        site = "/opt/venvs/train/lib/python3.11/site-packages"
        sh(
            "podman", "exec", h.container("h1"), "sh", "-c",
            f"python3 -m venv --without-pip /opt/venvs/train && echo /opt/gpufix-torch > {site}/torch.pth",
        )  # fmt: skip
        inv = h.inventory(tmp_path_factory.mktemp("inv") / "inventory.yml")
        # The training venv has torch; plain python3 must not find it through PYTHONPATH.
        inv.write_text(inv.read_text().replace("gpufix_probe_pythonpath: /opt/gpufix-torch", ""))
        yield h, inv
    finally:
        h.remove()


def test_the_probe_runs_with_the_training_environments_python(host: tuple[Hosts, Path]) -> None:
    _, inv = host
    # as apply verifies a permanent fix while an interim's P2P off is in /etc/nccl.conf
    extra = {
        **CPU,
        "gpufix_probe_python": TRAIN,
        "gpufix_probe_nccl_defaults": ["NCCL_P2P_DISABLE"],
        # the job's own settings, as `gpufix probe --job-env` hands them on
        "gpufix_probe_job_env": ["NCCL_SOCKET_IFNAME=^docker0,lo", "NCCL_ALGO=Ring"],
    }
    res = runner.run_playbook("probe.yml", inv, limit="h1", extravars=extra, timeout=600)
    verdict = res.hosts["h1"].data["gpufix_probe_verdict"]
    assert res.rc == 0 and verdict["verdict"] == "healthy", res.hosts["h1"].message
    assert verdict["facts"]["python_executable"] == TRAIN
    assert any("NCCL_P2P_DISABLE=0" in n for n in verdict["notes"]), verdict["notes"]
    assert verdict["job_env"] == {"NCCL_SOCKET_IFNAME": "^docker0,lo", "NCCL_ALGO": "Ring"}


def test_an_interpreter_without_torch_fails_with_a_message_not_a_verdict(
    host: tuple[Hosts, Path],
) -> None:
    _, inv = host
    res = runner.run_playbook("probe.yml", inv, limit="h1", extravars=CPU, timeout=600)
    hr = res.hosts["h1"]
    assert res.rc == 2 and hr.status == "failed"
    assert "gpufix_probe_python=python3 on h1 has no torch" in hr.message
    assert "python_envs" in hr.message
