"""`localhost` that the inventory does not list (Ansible's implicit localhost) is a target of
every command, not only of the ad hoc facts run: plays say `hosts: all`, which never matches
the implicit localhost, so `gpufix uninstall localhost` (and apply's host check) reached no host
and said only "no result (failed)". Runs uninstall.yml in check mode on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpufix import runner
from gpufix.inventory import unlisted_local

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "inventory" / "example.yml"


def test_only_local_names_the_inventory_lacks_are_added(tmp_path: Path) -> None:
    assert unlisted_local(EXAMPLE, ["host01", "localhost"]) == ["localhost"]
    assert unlisted_local(EXAMPLE, ["host01"]) == []
    listed = tmp_path / "inv.yml"
    listed.write_text("all:\n  hosts:\n    localhost:\n      ansible_python_interpreter: /x\n")
    assert unlisted_local(listed, ["localhost"]) == []  # the user's own entry is kept as it is


@pytest.mark.slow  # a real ansible-playbook run on this machine, check mode
def test_uninstall_reaches_the_implicit_localhost(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GPUFIX_STATE_DIR": str(tmp_path / "state"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "uninstall", "localhost", "--check", "--yes", "--json"],
        capture_output=True, text=True, timeout=300, check=False, env=env,
        stdin=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    (host,) = json.loads(r.stdout)
    assert host["host"] == "localhost" and host["state"] != "failed", host


@pytest.mark.slow
def test_a_play_on_the_implicit_localhost_runs_there(tmp_path: Path) -> None:
    r = runner.run_playbook("uninstall.yml", EXAMPLE, limit="localhost", check=True)
    assert r.status == "successful" and r.hosts["localhost"].status == "ok", r
