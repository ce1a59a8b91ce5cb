"""The test transport (tests/connection_plugins/gpufix_podman.py) against a real container:
modules run pipelined (no temporary files in the container), files copy both ways, and a
stopped container is unreachable, as a host is over ssh, not a failed task."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import containers
import pytest

ROOT = Path(__file__).resolve().parent.parent
NAME = "gpufix-it-transport"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("podman") is None:
        containers.unavailable("podman not installed")
    containers.remove(NAME)
    containers.start(NAME)
    inv = tmp_path_factory.mktemp("inv") / "hosts.yml"
    inv.write_text(
        f"all:\n  hosts:\n    {NAME}:\n      ansible_connection: gpufix_podman\n"
        "      ansible_python_interpreter: /usr/bin/python3\n"
    )
    try:
        yield inv
    finally:
        containers.remove(NAME)


def ansible(inv: Path, module: str, args: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONNECTION_PLUGINS=str(ROOT / "tests" / "connection_plugins"),
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="minimal",
        ANSIBLE_NOCOLOR="1",
    )
    exe = str(Path(sys.executable).parent / "ansible")
    return subprocess.run(
        [exe, "-i", str(inv), NAME, "-m", module, "-a", args, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def result(proc: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """The minimal callback's status word (SUCCESS, CHANGED, FAILED!, UNREACHABLE!) and what
    follows it."""
    head, _, rest = proc.stdout.partition("\n")
    host, _, tail = head.partition(" | ")
    assert host == NAME, proc.stdout
    status, _, more = tail.partition(" ")
    return status, more.lstrip("| ") + "\n" + rest


def test_a_module_runs_pipelined(inventory: Path) -> None:
    # a pipelined module leaves no directory under the remote tmp
    r = ansible(inventory, "ansible.builtin.shell", "ls -A /root/.ansible/tmp 2>/dev/null; true")
    status, out = result(r)
    assert r.returncode == 0 and status == "CHANGED", r.stdout + r.stderr
    assert out.strip() == "rc=0 >>", out


def test_files_copy_in_and_out(inventory: Path, tmp_path: Path) -> None:
    r = ansible(inventory, "ansible.builtin.copy", "content=abc dest=/tmp/gpufix-x mode=0644")
    assert r.returncode == 0 and result(r)[0] == "CHANGED", r.stdout
    r = ansible(inventory, "ansible.builtin.copy", "content=abc dest=/tmp/gpufix-x mode=0644")
    assert r.returncode == 0 and result(r)[0] == "SUCCESS", r.stdout
    r = ansible(inventory, "ansible.builtin.fetch", f"src=/tmp/gpufix-x dest={tmp_path}/ flat=yes")
    assert r.returncode == 0, r.stdout
    assert (tmp_path / "gpufix-x").read_text() == "abc"


def test_a_stopped_container_is_unreachable(inventory: Path) -> None:
    subprocess.run(["podman", "stop", "-t", "0", NAME], capture_output=True, check=False)
    try:
        r = ansible(inventory, "ansible.builtin.command", "true")
        status, out = result(r)
        assert status == "UNREACHABLE!" and json.loads(out.split("=>", 1)[1])["unreachable"], out
        assert r.returncode == 4  # ansible's "host unreachable"
    finally:
        subprocess.run(["podman", "start", NAME], capture_output=True, check=False)
