"""Starting systemd test containers the way this machine's podman needs (../shared/TESTING.md):
runc (crun fails on cgroups v1 hybrid), ulimits root may set, no network, a tmpfs /run."""

from __future__ import annotations

import subprocess

IMAGE = "localhost/gpufix-bionic-identity:1"
PODMAN_RUN = [
    "podman", "run", "-d", "--runtime=runc", "--network=none", "--tmpfs=/run:rw",
    "--ulimit=nofile=16384:16384", "--ulimit=nproc=16384:16384",
]  # fmt: skip


def start(name: str, image: str = IMAGE) -> None:
    subprocess.run([*PODMAN_RUN, "--name", name, image], check=True, capture_output=True)


def remove(*names: str) -> None:
    subprocess.run(["podman", "rm", "-f", *names], check=False, capture_output=True)
