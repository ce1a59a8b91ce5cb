"""A probe of a host another gpufix run is changing (left alone since session 39's review): its
verdict would describe a host half-changed, and its ranks would hold the GPUs that run's reboot
check waits for. `gpufix probe` and `plan --probe` read the host's apply lock first (the peek of
playbooks/host_lock.yml; this machine's file for a local host) and leave such a host out, exit 1.
The podman run is tests/e2e/test_apply_host_lock.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from gpufix import runner
from gpufix.apply import hostlock
from gpufix.errors import GpufixError
from gpufix.probe import command, local
from gpufix.probe.multinode import probe_group
from gpufix.probe.options import ProbeOptions

THEIRS = {"token": "b" * 32, "owner": "bastion2:/srv", "pid": "77", "since": "earlier"}


def _inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "all:\n  hosts:\n    h1: {ansible_host: 10.0.0.1}\n    h2: {ansible_host: 10.0.0.2}\n"
        "    h3: {ansible_connection: local}\n"
    )
    return inv


def _peek(monkeypatch: pytest.MonkeyPatch, answers: dict[str, object]) -> list[dict[str, Any]]:
    """host_lock.yml's peek answering `answers` ({host: holder text, None, or "unreachable"})."""
    calls: list[dict[str, Any]] = []

    def play(name: str, inv: Path, **kw: Any) -> runner.RunResult:
        assert name == "host_lock.yml"
        calls.append({**kw["extravars"], "limit": kw["limit"]})
        hosts = {}
        for h in kw["limit"].split(","):
            got = answers.get(h)
            if got == "unreachable":
                hosts[h] = runner.HostResult(h, "unreachable", message="ssh: no route")
            else:
                lock = {"taken": False, "released": False, "holder": got}
                hosts[h] = runner.HostResult(h, data={"gpufix_host_lock": lock})
        return runner.RunResult("x", 0, "successful", hosts)

    monkeypatch.setattr(runner, "run_playbook", play)
    return calls


@pytest.fixture
def verdict() -> str:
    """What the program prints on this machine (no GPU: not applicable), run for real."""
    return json.dumps(local.run_local(python=sys.executable, args=[], timeout=120))


def test_a_host_another_run_changes_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    verdict: str,
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    record = tmp_path / "apply.lock"  # this machine's own lock, for h3
    record.write_text(json.dumps({**THEIRS, "owner": "awx:/var/lib/awx"}))
    monkeypatch.setattr(hostlock, "LOCK_PATH", str(record))
    calls = _peek(monkeypatch, {"h1": json.dumps(THEIRS), "h2": None})
    ran: list[str] = []

    def script(limit: str, *_a: Any, **_k: Any) -> runner.RunResult:
        ran.append(limit)
        return runner.RunResult(
            "x", 0, "successful", {"h2": runner.HostResult("h2", stdout=verdict)}
        )

    monkeypatch.setattr(runner, "run_script", script)
    monkeypatch.setattr(local, "run_local", lambda **_k: pytest.fail("h3 was probed"))
    code = command.run("h1,h2,h3", _inventory(tmp_path), ProbeOptions(), as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [c["gpufix_host_lock_action"] for c in calls] == ["peek"] and calls[0][
        "limit"
    ] == "h1,h2"
    assert ran == ["h2"]  # only the free host ran the program
    assert out["h2"]["verdict"] == "not-applicable" and "held" not in out["h2"]
    for host, who in (("h1", "bastion2:/srv"), ("h3", "awx:/var/lib/awx")):
        assert out[host]["held"] is True and out[host]["reached"] is False
        assert out[host]["error"].startswith("not probed: another gpufix run is changing this host")
        assert who in out[host]["error"]


def test_a_failed_probe_elsewhere_still_exits_5(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(hostlock, "LOCK_PATH", str(tmp_path / "none"))
    _peek(monkeypatch, {"h1": json.dumps(THEIRS), "h2": None})
    printed = runner.HostResult("h2", stdout="nothing")  # no verdict: a failed probe
    monkeypatch.setattr(
        runner, "run_script", lambda *_a, **_k: runner.RunResult("x", 2, "failed", {"h2": printed})
    )
    assert command.run("h1,h2", _inventory(tmp_path), ProbeOptions(), as_json=True) == 5


def test_ours_gone_unreadable_or_unreached_is_probed_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, verdict: str
) -> None:
    """A record a dead run of this controller left is no holder; a lock that cannot be read (no
    root there, a FIFO in its place: never waited on) or a host not reached is no reason to
    skip: the probe itself says whether the host answers."""
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    fifo = tmp_path / "apply.lock"
    os.mkfifo(fifo)
    monkeypatch.setattr(hostlock, "LOCK_PATH", str(fifo))
    gone = json.dumps({**THEIRS, "owner": hostlock.owner(), "pid": "0"})
    _peek(monkeypatch, {"h1": gone, "h2": "unreachable"})
    said: list[tuple[str, str]] = []
    result = {h: runner.HostResult(h, stdout=verdict) for h in ("h1", "h2")}
    monkeypatch.setattr(
        runner, "run_script", lambda *_a, **_k: runner.RunResult("x", 0, "successful", result)
    )
    monkeypatch.setattr(local, "run_local", lambda **_k: json.loads(verdict))
    code = command.run(
        "h1,h2,h3",
        _inventory(tmp_path),
        ProbeOptions(),
        as_json=False,
        progress=lambda h, m: said.append((h, m)),
    )
    assert code == 0
    warned = {h: m for h, m in said if m.startswith("warning:")}
    assert set(warned) == {"h2", "h3"}
    assert "not reached" in warned["h2"] and "probing all the same" in warned["h2"]
    assert "not a regular file" in warned["h3"]


def test_a_multi_node_probe_starts_on_no_host_when_one_is_held(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    calls = _peek(monkeypatch, {"h1": None, "h2": json.dumps(THEIRS)})
    with pytest.raises(GpufixError, match=r"^h2: not probed: .*bastion2:/srv"):
        probe_group("h1,h2", _inventory(tmp_path), ProbeOptions(multi_node=True))
    assert len(calls) == 1  # no facts gathered, no rank started


def test_a_remote_lock_the_host_could_not_read_is_probed_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, verdict: str
) -> None:
    """host_lock.yml answers "unreadable: ..." for a FIFO or a file it may not read: a review
    (2026-12-07) found that read as a holder, so the host was not probed (exit 1), unlike the
    local case and docs/probe.md."""
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    _peek(monkeypatch, {"h1": "unreadable: not a regular file", "h2": None})
    said: list[tuple[str, str]] = []
    result = {h: runner.HostResult(h, stdout=verdict) for h in ("h1", "h2")}
    monkeypatch.setattr(
        runner, "run_script", lambda *_a, **_k: runner.RunResult("x", 0, "successful", result)
    )
    code = command.run(
        "h1,h2", _inventory(tmp_path), ProbeOptions(), as_json=False,
        progress=lambda h, m: said.append((h, m)),
    )  # fmt: skip
    assert code == 0
    assert [h for h, m in said if "could not be read" in m] == ["h1"]
