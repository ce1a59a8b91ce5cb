"""A playbook stopped at its time limit did not succeed: a real ansible-runner run on localhost.
Before, a host whose tasks so far had returned ok kept status "ok", so apply recorded a step
(and rollback a restore) as done that had been cut off half way."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from gpufix import runner

PLAYBOOK = """---
- name: A step that starts well and then takes too long
  hosts: all
  gather_facts: false
  tasks:
    - name: First task
      ansible.builtin.command: "true"
      changed_when: true
    - name: Install the kernel packages
      ansible.builtin.command: sleep {seconds}
      changed_when: true
"""


def play(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seconds: int, limit: int
) -> runner.RunResult:
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    inv = tmp_path / "local.yml"
    inv.write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    book = tmp_path / "step.yml"
    book.write_text(PLAYBOOK.format(seconds=seconds))
    return runner._run(inventory=inv, progress=None, timeout=limit, playbook=str(book))


@pytest.mark.slow
def test_a_play_cut_off_by_its_time_limit_is_a_failed_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = play(tmp_path, monkeypatch, seconds=60, limit=5)
    hr = res.hosts["localhost"]
    assert res.status == "timeout"
    assert hr.changed == 1  # the first task did run: the host may be half changed
    assert hr.status == "failed"
    assert hr.cut_off and hr.message == (
        "stopped at the 5 s time limit during 'Install the kernel packages', before its play ended"
    )


@pytest.mark.slow
def test_a_play_that_ends_in_time_is_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = play(tmp_path, monkeypatch, seconds=0, limit=60)
    assert res.status == "successful"
    assert res.hosts["localhost"].status == "ok" and res.hosts["localhost"].changed == 2


def test_a_failed_run_keeps_the_hosts_its_play_finished() -> None:
    """ansible-playbook exits 2 when one host failed: the others' plays ended and stand."""
    hosts = {
        "a": runner.HostResult("a", task="last"),
        "b": runner.HostResult("b", status="failed", message="boom"),
        "c": runner.HostResult("c", task="Reboot"),
    }
    runner.unfinished(hosts, {"a", "b"}, "failed", 60)
    assert (hosts["a"].status, hosts["b"].message) == ("ok", "boom")
    assert hosts["c"].status == "failed"
    assert (
        hosts["c"].message == "Ansible ended (failed) before this host's play did during 'Reboot'"
    )
