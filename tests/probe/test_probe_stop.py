"""An interrupted `gpufix probe HOST` stops what it started on the host: Ansible stops on
Ctrl-C, the program it started there ran on to its deadline, holding the GPUs (a review,
2026-12-05). The run's id is on every command line it starts; playbooks/probe_stop.yml finds
them by it. The podman run is in test_probe_multinode.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import probe_env
from gpufix import runner
from gpufix.probe import program_path
from gpufix.probe.remote import probe_hosts


def inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1:\n      ansible_host: 10.0.0.1\n")
    return inv


def test_an_interrupted_host_probe_is_stopped_by_its_run_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def interrupted(limit: str, inv: Path, script: Path, args: list[str], **kw: Any) -> None:
        seen["args"] = args
        raise KeyboardInterrupt

    def stopped(playbook: str, inv: Path, **kw: Any) -> runner.RunResult:
        seen["stop"] = (playbook, kw["limit"], kw["extravars"])
        return runner.RunResult("x", 0, "successful", {"h1": runner.HostResult("h1")})

    monkeypatch.setattr(runner, "run_script", interrupted)
    monkeypatch.setattr(runner, "run_playbook", stopped)
    with pytest.raises(KeyboardInterrupt) as exc:
        probe_hosts(["h1"], inventory(tmp_path))
    run_id = seen["args"][seen["args"].index("--run-id") + 1]
    assert len(run_id) == 12 and run_id.isalnum()
    assert seen["stop"] == ("probe_stop.yml", "h1", {"gpufix_probe_run_id": run_id})
    assert exc.value.args[0] == "interrupted: stopped the probe programs on h1"


def test_a_host_that_could_not_be_stopped_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: Any, **kw: Any) -> None:
        raise KeyboardInterrupt

    def unreachable(playbook: str, inv: Path, **kw: Any) -> runner.RunResult:
        hosts = {"h1": runner.HostResult("h1", "unreachable")}
        return runner.RunResult("x", 4, "failed", hosts)

    monkeypatch.setattr(runner, "run_script", interrupted)
    monkeypatch.setattr(runner, "run_playbook", unreachable)
    with pytest.raises(KeyboardInterrupt) as exc:
        probe_hosts(["h1"], inventory(tmp_path))
    assert exc.value.args[0].startswith(
        "interrupted: could not stop the probe programs on h1: they end by their own deadline"
    )


@pytest.mark.parametrize("run_id", ["a b", "x;id", "{{ 1 }}", "-cpu", "a" * 65])
def test_a_run_id_is_a_plain_word(tmp_path: Path, run_id: str) -> None:
    p = subprocess.run(
        [sys.executable, str(program_path()), "--cpu", "--run-id", run_id],
        env=probe_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 3 and "--run-id" in p.stdout + p.stderr
