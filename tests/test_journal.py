"""Journal: atomic writes, 0700 directories, secrets kept out, the resume state machine."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from gpufix.apply import journal
from gpufix.apply.journal import Journal, next_action, write_json_atomic
from gpufix.errors import InvalidInput


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))


def _plans() -> list[dict]:
    steps = [
        {"playbook": "kernel_upgrade.yml", "description": "hwe", "vars": {"a": 1}, "reboot": True},
        {"playbook": "nccl_profile.yml", "description": "nccl", "vars": {}},
    ]
    return [
        {"host": "h1", "strategy": "kernel-upgrade", "steps": steps},
        {"host": "h2", "strategy": "kernel-upgrade", "steps": steps},
    ]


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_create_writes_private_files() -> None:
    j = Journal.create(_plans(), plan_digest="sha256:x", options={"batch": "1"})
    assert _mode(j.path) == 0o700
    assert _mode(j.path.parent) == 0o700
    assert _mode(j.path / "h1.json") == 0o600
    meta = json.loads((j.path / "run.json").read_text())
    assert meta["plan_digest"] == "sha256:x" and meta["hosts"] == ["h1", "h2"]
    rec = json.loads((j.path / "h1.json").read_text())
    assert rec["state"] == "pending" and [s["state"] for s in rec["steps"]] == ["pending"] * 2


def test_every_transition_is_on_disk_before_the_call_returns() -> None:
    j = Journal.create(_plans(), plan_digest="sha256:x", options={})
    j.step_started("h1", 0)
    on_disk = json.loads((j.path / "h1.json").read_text())
    assert on_disk["state"] == "applying" and on_disk["steps"][0]["state"] == "started"
    j.step_finished("h1", 0, ok=True, changed=3, files=["/etc/b", "/etc/a", "/etc/a"])
    on_disk = json.loads((j.path / "h1.json").read_text())
    assert on_disk["steps"][0]["state"] == "done"
    assert on_disk["steps"][0]["files"] == ["/etc/a", "/etc/b"]
    reopened = Journal.open(j.run_id)
    assert reopened.host("h1")["steps"][0]["changed"] == 3


def test_secrets_never_reach_the_journal() -> None:
    plans = _plans()
    plans[0]["steps"][0]["vars"] = {
        "gpufix_x": 1,
        "ansible_become_password": "hunter2",
        "nested": {"api_token": "t0k"},
    }
    j = Journal.create(plans, plan_digest="d", options={"vault_password_file": "/x"})
    text = (j.path / "h1.json").read_text() + (j.path / "run.json").read_text()
    assert "hunter2" not in text and "t0k" not in text and "/x" not in text
    assert '"gpufix_x": 1' in text


def test_atomic_write_leaves_old_file_when_serialising_fails(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    write_json_atomic(target, {"v": 1})

    class Boom:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_json_atomic(target, {"v": Boom()})
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # no temp file left behind


def test_interrupted_run_is_detected_from_a_dead_pid() -> None:
    j = Journal.create(_plans(), plan_digest="d", options={})
    assert j.state == "running"
    j.meta["pid"] = 2**22 + 12345  # above pid_max: no such process
    j._write_meta()
    assert Journal.open(j.run_id).state == "interrupted"
    assert Journal.find_for_plan("d").run_id == j.run_id  # type: ignore[union-attr]
    assert Journal.find_for_plan("other") is None


def test_open_refuses_bad_ids_and_unknown_runs() -> None:
    with pytest.raises(InvalidInput, match="not a run id"):
        Journal.open("../../etc")
    with pytest.raises(InvalidInput, match="no run"):
        Journal.open("20260101T000000-abcdef")
    with pytest.raises(InvalidInput, match="no apply runs"):
        Journal.open("latest")


def test_host_names_that_would_escape_the_run_dir_are_refused() -> None:
    with pytest.raises(InvalidInput, match="cannot be journaled"):
        Journal.create(
            [{"host": "../x", "strategy": "s", "steps": []}], plan_digest="d", options={}
        )


def _rec(state: str, steps: list[str], rebooted: bool = False) -> dict:
    return {
        "state": state,
        "rebooted": rebooted,
        "steps": [{"index": i, "state": s} for i, s in enumerate(steps)],
    }


@pytest.mark.parametrize(
    ("rec", "want"),
    [
        (_rec("pending", ["pending", "pending"]), ("step", 0)),
        (_rec("applying", ["done", "started"]), ("step", 1)),  # re-run the cut step
        (_rec("applying", ["started", "pending"]), ("step", 0)),
        (_rec("applying", ["done", "done"]), ("reboot", -1)),
        (_rec("rebooting", ["done", "done"]), ("verify", -1)),
        (_rec("verifying", ["done", "done"]), ("verify", -1)),
        (_rec("unreachable", ["done", "pending"]), ("step", 1)),
        (_rec("unreachable", ["done", "done"], rebooted=True), ("verify", -1)),
        (_rec("blocked", ["pending", "pending"]), ("step", 0)),
        (_rec("healthy", ["done", "done"]), ("skip", -1)),
        (_rec("reboot-pending", ["done", "done"]), ("skip", -1)),
        (_rec("skipped", ["pending", "pending"]), ("skip", -1)),
        (_rec("failed", ["done", "failed"]), ("refuse", -1)),
        (_rec("rolling-back", ["done", "done"]), ("refuse", -1)),
        (_rec("rolled-back", ["done", "done"]), ("refuse", -1)),
    ],
)
def test_resume_state_machine(rec: dict, want: tuple[str, int]) -> None:
    assert next_action(rec) == want


def test_states_are_checked() -> None:
    j = Journal.create(_plans(), plan_digest="d", options={})
    with pytest.raises(ValueError):
        j.set_state("h1", "exploded")
    with pytest.raises(InvalidInput, match="not in run"):
        j.host("h9")


def test_list_runs_is_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = iter(["20260101T000002-aaaaaa", "20260101T000001-bbbbbb"])
    monkeypatch.setattr(journal, "new_run_id", lambda: next(ids))
    Journal.create(_plans(), plan_digest="a", options={})
    Journal.create(_plans(), plan_digest="b", options={})
    assert journal.list_runs() == ["20260101T000001-bbbbbb", "20260101T000002-aaaaaa"]
    assert Journal.open("latest").meta["plan_digest"] == "a"
    assert os.listdir(journal.runs_dir())
