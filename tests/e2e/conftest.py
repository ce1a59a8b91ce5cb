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
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/gpufix-bionic-identity:1"
REPO = ROOT / "tests" / "fixtures" / "aptrepo" / "build" / "repo"
TORCH_VERSION = "2.13.0"
BOOT_TIME = "cut -d ' ' -f 22 /proc/1/stat"


def _torch_dir() -> Path:
    """torch for the containers' Python 3.11, installed once into a cache directory."""
    base = Path(os.environ.get("GPUFIX_E2E_TORCH", "/var/tmp/gpufix-e2e-torch"))
    if not (base / "torch" / "__init__.py").is_file():
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(base)]
        subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True, timeout=900)
    return base


def _need(cmd: list[str], why: str) -> None:
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        pytest.skip(why)


@pytest.fixture(scope="session")
def lab_prereqs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("podman") is None:
        pytest.skip("podman not installed")
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


@dataclass
class Lab:
    prefix: str
    hosts: dict[str, str]  # inventory name -> container name
    inventory: Path
    state: Path
    workdir: Path
    extra_hostvars: dict[str, dict] = field(default_factory=dict)

    def sh(self, host: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["podman", "exec", self.hosts[host], "sh", "-c", script],
            capture_output=True,
            text=True,
            check=check,
            timeout=300,
        )

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(GPUFIX_STATE_DIR=str(self.state), GPUFIX_PROGRESS="1", NO_COLOR="1")
        env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '')}"
        return env

    def gpufix(self, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(ROOT / ".venv" / "bin" / "gpufix"), *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            cwd=self.workdir,
        )

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "gpufix"), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(),
            cwd=self.workdir,
        )

    def write_inventory(self) -> None:
        hosts = {
            name: {"ansible_host": cname, **self.extra_hostvars.get(name, {})}
            for name, cname in self.hosts.items()
        }
        inv = {
            "all": {
                "vars": {
                    "ansible_connection": "containers.podman.podman",
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "ansible_become": False,  # root already; the image has no sudo
                    # reboots inside a container: see ../shared/TESTING.md
                    "gpufix_kernel_boot_time_command": BOOT_TIME,
                    "gpufix_reboot_boot_time_command": BOOT_TIME,
                    "gpufix_kernel_reboot_timeout": 120,
                    "gpufix_kernel_running_command": "gpufix-bootsim-uname",
                    "gpufix_probe_cpu": True,
                    "gpufix_probe_world_size": 2,
                    "gpufix_probe_pythonpath": "/opt/gpufix-torch",
                },
                "hosts": hosts,
            }
        }
        self.inventory.write_text(yaml.safe_dump(inv, sort_keys=False))

    def stop(self, host: str) -> None:
        """Take a host away for good (no restart): unreachable from now on."""
        subprocess.run(["podman", "update", "--restart=no", self.hosts[host]], capture_output=True)
        subprocess.run(["podman", "kill", self.hosts[host]], capture_output=True)


def _start(cname: str, prereqs: dict[str, Path]) -> None:
    subprocess.run(
        [
            "podman",
            "run",
            "-d",
            "--name",
            cname,
            "--hostname",
            cname,
            "--label",
            "gpufix-e2e=1",
            "--runtime=runc",
            "--restart=always",
            "--network=none",
            "--tmpfs=/run:rw",
            "--tmpfs=/tmp:rw",
            "--ulimit=nofile=16384:16384",
            "--ulimit=nproc=16384:16384",
            "-v",
            f"{REPO}:/srv/localrepo:ro",
            "-v",
            f"{prereqs['torch']}:/opt/gpufix-torch:ro",
            "-v",
            f"{prereqs['hang']}:/opt/gpufix-torch-hang:ro",
            IMAGE,
            "/sbin/init",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


PREPARE = """set -e
systemctl is-system-running --wait >/dev/null 2>&1 || true
echo 'deb [trusted=yes] file:/srv/localrepo ./' > /etc/apt/sources.list.d/gpufix-fixtures.list
apt-get update -qq >/dev/null
"""

# A bionic host on its GA kernel with driver 535 and GRUB stand-ins (the kernel scenario's state).
KERNEL_HOST = """set -e
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-image-4.15.0-213-generic \
  gpufix-fixture-bootsim nvidia-driver-535 >/dev/null
apt-mark auto linux-image-4.15.0-213-generic >/dev/null
printf 'GRUB_DEFAULT=0\\nGRUB_TIMEOUT=0\\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\\nGRUB_CMDLINE_LINUX=""\\n' > /etc/default/grub
"""


@pytest.fixture
def make_lab(lab_prereqs: dict[str, Path], tmp_path: Path) -> Iterator[Callable[..., Lab]]:
    labs: list[Lab] = []

    def make(n: int = 1, setup: str = "", hostvars: dict[str, dict] | None = None) -> Lab:
        prefix = f"gpufix-e2e-{uuid.uuid4().hex[:8]}"
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
            _start(cname, lab_prereqs)
        for h in hosts:
            lab.sh(h, PREPARE + (KERNEL_HOST if setup == "kernel" else ""))
        lab.write_inventory()
        return lab

    yield make
    for lab in labs:
        for cname in lab.hosts.values():
            subprocess.run(["podman", "rm", "-f", "-t", "0", cname], capture_output=True)
