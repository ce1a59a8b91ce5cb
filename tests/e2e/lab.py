"""The lab's containers: start, prepare, talk to them, run gpufix against them."""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/gpufix-bionic-identity:1"
REPO = ROOT / "tests" / "fixtures" / "aptrepo" / "build" / "repo"
# The reboot settings the molecule scenarios use, from the one file that says why each is so.
_REBOOT_VARS = yaml.safe_load((ROOT / "molecule" / "_shared" / "reboot_vars.yml").read_text())
BOOT_TIME = _REBOOT_VARS["gpufix_test_boot_time_command"]
REBOOT = _REBOOT_VARS["gpufix_test_reboot_command"]


@dataclass
class Lab:
    prefix: str
    hosts: dict[str, str]  # inventory name -> container name
    inventory: Path
    state: Path
    workdir: Path
    extra_hostvars: dict[str, dict] = field(default_factory=dict)
    # The tests' pipelined transport (tests/connection_plugins/gpufix_podman.py); the docs' lab
    # (scripts/labctl.py) writes the collection's, which a user's ansible finds without settings.
    connection: str = "gpufix_podman"

    def sh(self, host: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(
            ["podman", "exec", self.hosts[host], "sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"{host}: exit {r.returncode}: {r.stderr[-1500:]}")
        return r

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(GPUFIX_STATE_DIR=str(self.state), GPUFIX_PROGRESS="1", NO_COLOR="1")
        env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '')}"
        # the pipelined test transport (tests/connection_plugins/gpufix_podman.py)
        env["ANSIBLE_CONNECTION_PLUGINS"] = str(ROOT / "tests" / "connection_plugins")
        return env

    def gpufix(self, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(ROOT / ".venv" / "bin" / "gpufix"), *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            stdin=subprocess.DEVNULL,  # never a TTY: --yes is needed to skip the prompt
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
                    "ansible_connection": self.connection,
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "ansible_become": False,  # root already; the image has no sudo
                    # reboots inside a container: see ../shared/TESTING.md
                    "gpufix_kernel_boot_time_command": BOOT_TIME,
                    "gpufix_reboot_boot_time_command": BOOT_TIME,
                    # 300 s as in the molecule scenarios (three test streams on two cores), for
                    # the playbooks run by hand; apply's steps and rollback's reboot take
                    # apply's own --reboot-timeout instead
                    "gpufix_kernel_reboot_timeout": 300,
                    "gpufix_kernel_reboot_command": REBOOT,
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
        """Take a host away (a user stop: podman does not restart it): unreachable now."""
        subprocess.run(["podman", "stop", "-t", "0", self.hosts[host]], capture_output=True)


def start(cname: str, prereqs: dict[str, Path], restart: bool = True) -> None:
    """restart=False: a reboot inside the container stops it for good (a host that never
    comes back)."""
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
            f"--restart={'always' if restart else 'no'}",
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

# A container shares the machine's kernel, so os.uname() (what the facts module reads) names
# the CI machine's kernel. This hook, a .pth in python3's site-packages, makes python report
# the kernel the boot simulation booted (gpufix-fixture-bootsim), as the roles already read
# it through gpufix_kernel_running_command. Test scaffolding: lab containers only.
UNAME_HOOK = '''"""gpufix lab only: report the simulated boot's kernel (gpufix-bootsim-uname) as the
release, because a container shares the machine's real kernel."""
import os

_real_uname = os.uname


def _lab_uname():
    u = _real_uname()
    try:
        with open("/run/gpufix-bootsim/kernel") as fh:
            release = fh.read().strip()
    except OSError:
        return u
    if not release or release == "unknown":
        return u
    return os.uname_result((u.sysname, u.nodename, release, u.version, u.machine))


os.uname = _lab_uname
'''
# A kernel host in the lab plays a bare machine, so the facts module must not find the
# container's marks (podman's /run/.containerenv, libpod in /proc/1/cgroup, container= in
# PID 1's environment): facts from inside a container make host-level strategies infeasible,
# rightly. This hook hides exactly those from python3. Lab containers only.
HOST_HOOK = '''"""gpufix lab only: this container plays a bare host; hide its container marks."""
import builtins
import io
import os

_real_exists = os.path.exists
_real_open = builtins.open
_HIDDEN = ("/.dockerenv", "/run/.containerenv")
_AS_HOST = {"/proc/1/cgroup": "0::/\\n", "/proc/1/environ": ""}


def _exists(path):
    return False if path in _HIDDEN else _real_exists(path)


def _open(file, mode="r", *args, **kwargs):
    if isinstance(file, str) and file in _AS_HOST and "r" in mode and "b" not in mode:
        return io.StringIO(_AS_HOST[file])
    return _real_open(file, mode, *args, **kwargs)


os.path.exists = _exists
builtins.open = _open
'''
INSTALL_UNAME_HOOK = f"""
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site"
cat > "$site/gpufix_lab_uname.py" <<'PY'
{UNAME_HOOK}PY
echo 'import gpufix_lab_uname' > "$site/gpufix-lab-uname.pth"
test "$(python3 -c 'import platform; print(platform.release())')" = "$(gpufix-bootsim-uname)"
cat > "$site/gpufix_e2e_host.py" <<'PY'
{HOST_HOOK}PY
echo 'import gpufix_e2e_host' > "$site/gpufix-e2e-host.pth"
test "$(python3 -c 'import os; print(os.path.exists("/run/.containerenv"))')" = False
"""

# A bionic host on its GA kernel with driver 535 and GRUB stand-ins (the kernel scenario's state).
# Driver 535.183.01, the version the fixture's prebuilt module for the HWE kernel is built for
# (specs/kernel.yml): the kernel role reboots only into a module of the installed driver's version.
KERNEL_HOST = (
    """set -e
V=535.183.01-0ubuntu0.18.04.1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-image-4.15.0-213-generic \
  gpufix-fixture-bootsim nvidia-driver-535=$V nvidia-utils-535=$V libnvidia-compute-535=$V \
  nvidia-kernel-common-535=$V nvidia-dkms-535=$V >/dev/null
apt-mark auto linux-image-4.15.0-213-generic >/dev/null
printf 'GRUB_DEFAULT=0\\nGRUB_TIMEOUT=0\\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\\nGRUB_CMDLINE_LINUX=""\\n' > /etc/default/grub
gpufix-bootsim-uname >/dev/null  # this boot runs 4.15, whatever is installed next
"""
    + INSTALL_UNAME_HOOK
)
# The prebuilt NVIDIA module for the HWE kernel (it pulls in that kernel's image), so the kernel
# role finds a module and reboots; the fixture has no DKMS build.
NVIDIA_MODULE = """set -e
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  linux-modules-nvidia-535-5.4.0-150-generic >/dev/null
"""
# Driver 535 alone, and two GPUs the facts can list: the fixture's nvidia-smi stub answers only
# the driver-version query, so a wrapper answers the facts module's GPU query with two rows
# recorded from an A100 host (tests/fixtures/tool_outputs/query_8xa100.csv) and hands every
# other call to the stub. Lab containers only.
_GPU_ROWS = "".join(
    (ROOT / "tests" / "fixtures" / "tool_outputs" / "query_8xa100.csv")
    .read_text()
    .splitlines(True)[:2]
)
DRIVER = f"""set -e
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nvidia-driver-535 >/dev/null
mkdir -p /usr/share/gpufix-e2e
cat > /usr/share/gpufix-e2e/query-gpu.csv <<'CSV'
{_GPU_ROWS}CSV
[ -e /usr/bin/nvidia-smi.fixture ] || mv /usr/bin/nvidia-smi /usr/bin/nvidia-smi.fixture
cat > /usr/bin/nvidia-smi <<'SH'
#!/bin/sh
case "$*" in
  *--query-gpu=index,*) cat /usr/share/gpufix-e2e/query-gpu.csv; exit 0 ;;
esac
exec /usr/bin/nvidia-smi.fixture "$@"
SH
chmod 0755 /usr/bin/nvidia-smi
"""
# A training environment: an interpreter whose site-packages have torch (the CPU build that
# the lab mounts), at a path of its own, as a venv would be.
TRAIN_ENV = """set -e
mkdir -p /opt/venvs/train/bin
cat > /opt/venvs/train/bin/python <<'SH'
#!/bin/sh
PYTHONPATH=/opt/gpufix-torch exec /usr/bin/python3 "$@"
SH
chmod 0755 /opt/venvs/train/bin/python
"""


def new_prefix() -> str:
    """Unique container names; GPUFIX_E2E_PREFIX lets a shared machine tell runs apart."""
    return f"{os.environ.get('GPUFIX_E2E_PREFIX', 'gpufix-e2e')}-{uuid.uuid4().hex[:8]}"
