"""Starting systemd test containers the way this machine's podman needs (../shared/TESTING.md):
runc (crun fails on cgroups v1 hybrid), ulimits root may set, no network, a tmpfs /run."""

from __future__ import annotations

import os
import subprocess
from typing import NoReturn

import pytest

IMAGE = "localhost/gpufix-bionic-identity:1"
PODMAN_RUN = [
    "podman", "run", "-d", "--runtime=runc", "--network=none", "--tmpfs=/run:rw",
    "--ulimit=nofile=16384:16384", "--ulimit=nproc=16384:16384",
]  # fmt: skip


def start(name: str, image: str = IMAGE) -> None:
    subprocess.run([*PODMAN_RUN, "--name", name, image], check=True, capture_output=True)


def remove(*names: str) -> None:
    subprocess.run(["podman", "rm", "-f", *names], check=False, capture_output=True)


def unavailable(why: str) -> NoReturn:
    """Skip a test that needs podman, a tool or a built image; under GPUFIX_REQUIRE_PODMAN (the
    CI run, scripts/test.sh) fail instead, so a missing part cannot pass as a skip."""
    if os.environ.get("GPUFIX_REQUIRE_PODMAN"):
        pytest.fail(f"{why} (GPUFIX_REQUIRE_PODMAN is set)")
    pytest.skip(why)
