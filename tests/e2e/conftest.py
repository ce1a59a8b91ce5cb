"""A lab of podman systemd containers for `gpufix apply` end to end (marked integration).

Each container is the bionic-identity image (a Debian 12 userland whose os-release says
Ubuntu 18.04: it exercises our playbooks and roles, not Ubuntu), with the fixture apt repo
mounted read-only, no network, and `--restart=always` so a reboot is a container restart.
A CPU build of torch is mounted read-only so the probe can reach a real verdict (gloo).
Containers get unique names and are removed at the end of each test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import containers
import pytest
from lab import (
    DRIVER,
    IMAGE,
    KERNEL_HOST,
    NVIDIA_MODULE,
    PREPARE,
    REPO,
    ROOT,
    TRAIN_ENV,
    Lab,
    new_prefix,
    start,
)

TORCH_VERSION = "2.13.0"


def _torch_dir() -> Path:
    """torch for the containers' Python 3.11, installed once into a cache directory."""
    base = Path(os.environ.get("GPUFIX_E2E_TORCH", "/var/tmp/gpufix-e2e-torch"))
    if not (base / "torch" / "__init__.py").is_file():
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(base)]
        subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True, timeout=900)
    return base


def _need(cmd: list[str], why: str) -> None:
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        containers.unavailable(why)


@pytest.fixture(scope="session")
def lab_prereqs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("podman") is None:
        containers.unavailable("podman not installed")
    # ansible-runner runs `ansible-playbook` from PATH; in-process gathering needs the venv's.
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "")
    _need(["podman", "image", "exists", IMAGE], f"{IMAGE} missing: run tests/images/build.sh")
    subprocess.run(
        [sys.executable, str(ROOT / "tests/fixtures/aptrepo/build.py"), str(REPO)],
        check=True,
        capture_output=True,
    )
    hang = tmp_path_factory.mktemp("hangtorch")
    # A torch whose import never returns: the probe must call that host hung, not wait.
    (hang / "torch").mkdir()
    (hang / "torch" / "__init__.py").write_text("import time\ntime.sleep(100000)\n")
    return {"torch": _torch_dir(), "hang": hang}


@pytest.fixture
def make_lab(lab_prereqs: dict[str, Path], tmp_path: Path) -> Iterator[Callable[..., Lab]]:
    labs: list[Lab] = []

    def make(
        n: int = 1, setup: str = "", hostvars: dict[str, dict] | None = None, restart: bool = True
    ) -> Lab:
        """setup: comma-separated parts of lab.py: kernel (GA kernel, driver, GRUB stand-ins),
        module (the prebuilt NVIDIA module for the HWE kernel), driver (driver 535 alone),
        train (a training venv with torch)."""
        prefix = new_prefix()
        hosts = {f"h{i + 1}": f"{prefix}-h{i + 1}" for i in range(n)}
        lab = Lab(
            prefix,
            hosts,
            tmp_path / "inventory.yml",
            tmp_path / "state",
            tmp_path,
            dict(hostvars or {}),
        )
        labs.append(lab)
        for cname in hosts.values():
            start(cname, lab_prereqs, restart)
        parts = {
            "kernel": KERNEL_HOST,
            "module": NVIDIA_MODULE,
            "driver": DRIVER,
            "train": TRAIN_ENV,
        }
        script = PREPARE + "".join(parts[p] for p in setup.split(",") if p)
        for h in hosts:
            lab.sh(h, script)
        lab.write_inventory()
        return lab

    yield make
    for lab in labs:
        for cname in lab.hosts.values():
            subprocess.run(["podman", "rm", "-f", "-t", "0", cname], capture_output=True)
