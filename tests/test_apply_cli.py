"""gpufix apply / status / rollback at the command line: one-line errors, exit codes, JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpufix.apply.journal import Journal
from gpufix.cli import main
from gpufix.engine.plan import Plan, Step, save_plans


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def _journal() -> Journal:
    steps = [{"playbook": "nccl_profile.yml", "vars": {"gpufix_nccl_profile_names": ["no-p2p"]}}]
    j = Journal.create(
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
    plan = Plan(
        host="host01",
        strategy="nccl-profile",
        findings=[],
        options=[],
        steps=[Step("nccl_profile.yml", "", {})],
        reboot_required=False,
        outcome="",
        risks=[],
        path=[],
        facts_digest="sha256:f",
        kb_digest="sha256:k",
    )
    path = tmp_path / "plan.json"
    save_plans([plan], path)
    code, _, err = run(capsys, "apply", str(path), "-i", "inventory/example.yml")
    assert code == 3 and "host01 is a recorded snapshot" in err and "Traceback" not in err
