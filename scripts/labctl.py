"""A disposable lab of bionic-identity container hosts for the whole plan -> apply -> reboot ->
probe -> rollback loop, without touching a real host. Run it as `bash scripts/lab.sh ACTION`.

  up [--dir DIR] [--name NAME]   start the hosts, prepare them, write DIR/lab.yml
  down [--dir DIR] [--name NAME] remove the hosts (and DIR/lab.yml)
  status [--name NAME]           list the hosts
NAME (default $GPUFIX_LAB_NAME, else gpufix-lab) prefixes the container names.

Each host is the bionic-identity image (a Debian 12 userland whose os-release says Ubuntu
18.04: it runs our roles' Ubuntu code, not Ubuntu), with no network, the fixture apt
repository mounted read-only, and torch's CPU build for the probe (gloo). A reboot is a
container restart; a boot simulation (GRUB stand-ins) decides which fixture kernel "booted".

  host01  GA kernel 4.15.0-213-generic, driver 535, the prebuilt NVIDIA module for the HWE
          kernel 5.4.0-150-generic: `gpufix plan host01 --strategy kernel-upgrade` is feasible.
  host02  the same, but its torch import never returns: the probe says `hung` after the
          reboot and apply rolls the host back.

The containers share the machine's kernel; so that facts see the simulated boot and a bare
host, each host's Python reports the booted fixture kernel as its release and does not see the
container's marks (`.pth` hooks from tests/e2e/lab.py, lab only).
The building blocks (image, repository, container start, host preparation) are the end-to-end
tests' (tests/e2e/lab.py), so the lab is what those tests exercise.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _e2e_lab() -> ModuleType:
    """tests/e2e/lab.py, loaded by path: the end-to-end tests' image, repository and hosts."""
    spec = importlib.util.spec_from_file_location("gpufix_e2e_lab", ROOT / "tests/e2e/lab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


E2E = _e2e_lab()
IMAGE, KERNEL_HOST, PREPARE, REPO = E2E.IMAGE, E2E.KERNEL_HOST, E2E.PREPARE, E2E.REPO

TORCH_VERSION = "2.13.0"
HOSTS = ("host01", "host02")
HANG = {"host02": {"gpufix_probe_pythonpath": "/opt/gpufix-torch-hang"}}

# Boot 4.15 until something changes it (as a fleet that pins its default kernel), and install
# the prebuilt module for the HWE kernel, as linux-modules-nvidia-535-generic-hwe-18.04 would.
LAB_HOST = """set -e
gpufix-bootsim-boot >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  linux-modules-nvidia-535-5.4.0-150-generic >/dev/null
apt-mark auto linux-modules-nvidia-535-5.4.0-150-generic linux-image-5.4.0-150-generic >/dev/null
"""


def say(msg: str) -> None:
    print(f"lab: {msg}", file=sys.stderr, flush=True)


def podman(*args: str, check: bool = True, stdin: str | None = None) -> str:
    r = subprocess.run(["podman", *args], input=stdin, capture_output=True, text=True, timeout=600)
    if check and r.returncode != 0:
        raise SystemExit(f"lab: podman {args[0]}: {r.stderr.strip()[-500:]}")
    return r.stdout


def containers(name: str) -> list[str]:
    out = podman("ps", "-a", "--filter", f"name=^{name}-host[0-9]+$", "--format", "{{.Names}}")
    return sorted(out.split())


def prerequisites() -> dict[str, Path]:
    if shutil.which("podman") is None:
        raise SystemExit("lab: podman is not installed (bash scripts/install.sh --test sets it up)")
    if subprocess.run(["podman", "image", "exists", IMAGE]).returncode != 0:
        say(f"building {IMAGE} (debootstrap, a few minutes, once)")
        subprocess.run(["bash", str(ROOT / "tests" / "images" / "build.sh")], check=True)
    build = ROOT / "tests" / "fixtures" / "aptrepo" / "build.py"
    subprocess.run([sys.executable, str(build), str(REPO)], check=True, capture_output=True)
    torch = Path(os.environ.get("GPUFIX_E2E_TORCH", "/var/tmp/gpufix-e2e-torch"))
    if not (torch / "torch" / "__init__.py").is_file():
        say(f"installing torch {TORCH_VERSION} (CPU) for the hosts into {torch}")
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(torch)]
        subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True, timeout=1800)
    hang = Path(os.environ.get("GPUFIX_LAB_HANG", "/var/tmp/gpufix-lab-hangtorch"))
    (hang / "torch").mkdir(parents=True, exist_ok=True)
    (hang / "torch" / "__init__.py").write_text("import time\ntime.sleep(100000)\n")
    return {"torch": torch, "hang": hang}


def up(directory: Path, name: str) -> None:
    if containers(name):
        raise SystemExit(f"lab: {name} is already up ({' '.join(containers(name))}): down first")
    prereqs = prerequisites()
    hosts = {h: f"{name}-{h}" for h in HOSTS}
    inventory = directory / "lab.yml"
    lab = E2E.Lab(name, hosts, inventory, directory, directory, dict(HANG))
    lab.connection = "containers.podman.podman"
    try:
        for host, cname in hosts.items():
            say(f"starting {host} ({cname})")
            E2E.start(cname, prereqs)
        for host in hosts:
            say(f"preparing {host}: fixture repository, GA kernel, driver 535, HWE module")
            # KERNEL_HOST installs the lab's python hooks (booted kernel, no container marks)
            lab.sh(host, PREPARE + KERNEL_HOST + LAB_HOST)
    except BaseException:
        remove(name)
        raise
    lab.write_inventory()
    say(f"ready: {', '.join(hosts)} in {inventory}")
    say(f"next: .venv/bin/gpufix plan host01 -i {inventory} --strategy kernel-upgrade")


def remove(name: str) -> list[str]:
    names = containers(name)
    for cname in names:
        podman("rm", "-f", "-t", "0", cname, check=False)
    return names


def down(directory: Path, name: str) -> None:
    names = remove(name)
    inventory = directory / "lab.yml"
    if inventory.is_file() and name in inventory.read_text():
        inventory.unlink()
    say(f"removed {', '.join(names) or 'nothing (no lab was up)'}")


def status(name: str) -> int:
    out = podman(
        "ps", "-a", "--filter", f"name=^{name}-host[0-9]+$", "--format", "{{.Names}} {{.Status}}"
    )
    print(out.strip() or f"no lab named {name}")
    return 0 if out.strip() else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/lab.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--dir", default=".", help="where lab.yml goes (default: here)")
    parser.add_argument(
        "--name",
        default=os.environ.get("GPUFIX_LAB_NAME", "gpufix-lab"),
        help="container name prefix (default: $GPUFIX_LAB_NAME or gpufix-lab)",
    )
    ns = parser.parse_args(argv)
    directory = Path(ns.dir).resolve()
    if ns.action == "up":
        up(directory, ns.name)
    elif ns.action == "down":
        down(directory, ns.name)
    else:
        return status(ns.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
