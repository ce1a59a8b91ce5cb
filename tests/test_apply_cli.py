"""gpufix apply / status / rollback at the command line: one-line errors, exit codes, JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from gpufix.apply.journal import FileJournal
from gpufix.cli import main
from gpufix.engine.plan import save_plans


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def _journal() -> FileJournal:
    steps = [{"playbook": "nccl_profile.yml", "vars": {"gpufix_nccl_profile_names": ["no-p2p"]}}]
    j = FileJournal.start(
        [
            {"host": "h1", "strategy": "nccl-profile", "steps": steps},
            {"host": "h2", "strategy": "nccl-profile", "steps": steps},
        ],
        plan_digest="sha256:x",
        options={"inventory": "/nonexistent/inv.yml"},
        plan_file="plan.json",
    )
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=1, files=["/etc/nccl.conf"])
    j.set_state("h1", "healthy", "probe: healthy")
    j.finish("complete")
    return j


def test_status_lists_runs_and_shows_one(capsys: pytest.CaptureFixture[str]) -> None:
    j = _journal()
    code, out, _ = run(capsys, "status", "--json")
    assert code == 0 and [r["run"] for r in json.loads(out)] == [j.run_id]
    code, out, _ = run(capsys, "status", "latest", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["run"]["state"] == "complete"
    assert [h["state"] for h in doc["hosts"]] == ["healthy", "pending"]
    code, out, _ = run(capsys, "status", j.run_id)
    assert code == 0 and "healthy" in out and "1/1" in out and "0/1" in out


def test_status_of_an_unknown_run_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "status", "20260101T000000-abcdef")
    assert code == 3 and err.count("\n") == 1 and "no run" in err


def test_rollback_refuses_what_it_cannot_do(capsys: pytest.CaptureFixture[str]) -> None:
    j = _journal()
    code, _, err = run(capsys, "rollback", j.run_id, "h9")
    assert code == 3 and "not in run" in err
    code, _, err = run(capsys, "rollback", j.run_id, "h1")
    assert code == 3 and "inventory" in err and "-i PATH" in err
    code, _, err = run(capsys, "rollback", j.run_id, "h2", "-i", "inventory/example.yml")
    assert code == 3 and "nothing to roll back" in err


def test_apply_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "apply", str(tmp_path / "missing.json"))
    assert code == 3 and "no plan file" in err and err.count("\n") == 1
    code, _, err = run(capsys, "apply", "--batch", "0", str(tmp_path / "missing.json"))
    assert code == 3 and "bad --batch" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, "apply", str(bad))
    assert code == 3 and "not JSON" in err


def test_apply_refuses_recorded_hosts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    code, _, err = run(capsys, "plan", "host01", "-o", str(path))
    assert code == 0, err
    code, _, err = run(capsys, "apply", str(path), "-i", "inventory/example.yml")
    assert code == 3 and "host01 is a recorded snapshot" in err and "Traceback" not in err


def test_a_dry_run_with_strategy_needs_no_yes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-03): `apply --strategy S HOST --check` off a terminal asked for --yes
    (a dry run asks nothing, as `apply PLANFILE --check`), before saying the host is recorded."""
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    code, _, err = run(capsys, "apply", "--strategy", "kernel-upgrade", "host01", "--check")
    assert code == 3 and "recorded snapshot" in err and "--yes" not in err, err
    code, _, err = run(capsys, "apply", "--strategy", "kernel-upgrade", "host01")
    assert code == 3 and "add --yes" in err, err


def _live_plan(tmp_path: Path, fixture: str = "bionic-ga-2x3090") -> tuple[Path, Path]:
    """A plan the engine made for a live inventory host (nothing will reach it in these tests)."""
    from gpufix.engine.context import Constraints
    from gpufix.engine.kb import load as load_kb
    from gpufix.engine.rules import load as load_rules
    from gpufix.planning import plan_host

    facts = json.loads(Path(f"tests/fixtures/hosts/{fixture}.json").read_text())["facts"]
    plan = plan_host(
        facts,
        None,
        Constraints(strategy="nccl-profile" if fixture == "x" else None),
        host="h1",
        python_envs=[],
        kb=load_kb(),
        rules=load_rules(),
    )
    path, inv = tmp_path / "plan.json", tmp_path / "inv.yml"
    save_plans([plan], path)
    inv.write_text("all:\n  hosts:\n    h1: {ansible_host: 192.0.2.1}\n")
    return path, inv


def test_ctrl_c_during_the_freshness_check_is_130_and_starts_nothing(tmp_path: Path) -> None:
    """A real Ctrl-C (SIGINT to the gpufix process) while ansible-runner gathers facts: exit
    130, nothing started after it, no run left behind (no host was touched), the lock released.
    (A Ctrl-C during a step, with its journal `interrupted`: tests/e2e.)"""
    path, inv = _live_plan(tmp_path)
    slow = tmp_path / "slowpython"  # an interpreter that takes its time: the gather is running
    slow.write_text(f'#!/bin/sh\nsleep 60\nexec {sys.executable} "$@"\n')
    slow.chmod(0o755)
    inv.write_text(
        "all:\n  hosts:\n    h1:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {slow}\n"
    )
    env = {
        **os.environ,
        "GPUFIX_STATE_DIR": os.environ["GPUFIX_STATE_DIR"],
        "GPUFIX_PROGRESS": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gpufix"), "apply", str(path), "-i", str(inv), "--yes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()  # "  h1: gpufix_facts": the freshness gather started
    assert "gpufix_facts" in line, line
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out == "" and "before any host was changed" in err and "batch" not in err
    from gpufix.apply.journal import list_runs

    assert list_runs() == []
    locks = Path(os.environ["GPUFIX_STATE_DIR"]) / "locks"
    assert not any(locks.iterdir())  # the host lock was released


def test_status_lists_a_corrupt_run_without_failing(capsys: pytest.CaptureFixture[str]) -> None:
    good = _journal()
    bad = _journal()
    (bad.path / "run.json").write_text("{not json")
    code, out, err = run(capsys, "status", "--json")
    assert code == 0, err
    states = {r["run"]: r["state"] for r in json.loads(out)}
    assert states == {good.run_id: "complete", bad.run_id: "unreadable"}
    code, out, _ = run(capsys, "status")
    assert code == 0 and "unreadable" in out and good.run_id in out


def _rebooted_journal() -> FileJournal:
    steps = [{"playbook": "kernel_upgrade.yml", "vars": {}}]
    j = FileJournal.start(
        [{"host": "h1", "strategy": "kernel-upgrade", "steps": steps}],
        plan_digest="sha256:k",
        options={"inventory": "inventory/example.yml"},
    )
    j.update("h1", before={"packages": {}, "kernel": {"running": "4.15.0-213-generic"}})
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=3)
    j.update("h1", rebooted=True)
    j.add_verdict("h1", "after-apply", {"verdict": "healthy"})
    j.set_state("h1", "healthy", "probe: healthy")
    j.finish("complete")
    return j


def test_rollback_that_reboots_needs_allow_reboot(capsys: pytest.CaptureFixture[str]) -> None:
    j = _rebooted_journal()
    code, _, err = run(capsys, "rollback", j.run_id, "h1", "-i", "inventory/example.yml")
    assert code == 3 and "--allow-reboot" in err and err.count("\n") == 1
    assert FileJournal.open(j.run_id).host("h1")["state"] == "healthy"  # nothing was done


def test_status_shows_no_stale_verdict_for_a_rolled_back_host(
    capsys: pytest.CaptureFixture[str],
) -> None:
    j = _rebooted_journal()
    j.add_verdict("h1", "rolled-back", {"verdict": None})
    j.set_state("h1", "rolled-back", "restored from the journal")
    code, out, _ = run(capsys, "status", j.run_id)
    assert code == 0 and "rolled back" in out and "healthy" not in out.replace("rolled-back", "")


def test_conflicting_apply_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "apply", "--strategy", "nccl-profile", "--interim", "host01")
    assert code == 3 and "--interim" in err


def test_a_check_run_waits_for_no_one_but_is_refused_while_a_run_holds_the_host(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A review (2026-12-03): `apply --check` took no host lock, so a dry run's diffs were read
    while another run changed the host. It is refused like a real run (exit 1, the holder)."""
    from gpufix.apply.locks import HostLocks

    path, inv = _live_plan(tmp_path)
    with HostLocks(["h1"]):  # another run, still checking facts (no run id yet)
        code, _, err = run(capsys, "apply", str(path), "-i", str(inv), "--check")
    assert code == 1, err
    assert "h1 is being changed by another gpufix run" in err
    assert "before its run starts" in err and "run ?" not in err
