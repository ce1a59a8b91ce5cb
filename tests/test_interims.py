"""After the permanent fix verifies at NCCL's defaults, apply names the interim runs whose
setting still holds, with the rollback that takes each off (gpufix.apply.interims)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpufix.apply import interims
from gpufix.apply.journal import FileJournal

STEP = {"playbook": "nccl_profile.yml", "description": "P2P off", "vars": {}}


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))


def _run(kind: str, hosts: list[str], state: str = "healthy", changed: int = 1) -> FileJournal:
    plans = [{"host": h, "strategy": "nccl-profile", "steps": [STEP]} for h in hosts]
    j = FileJournal.start(plans, plan_digest="sha256:x", options={}, extra={"kind": kind})
    for h in hosts:
        j.step_started(h, 0)
        j.step_finished(h, 0, ok=True, changed=changed, files=["/etc/nccl.conf"])
        j.set_state(h, state)
    return j


def test_an_interim_that_holds_is_named_with_its_rollback() -> None:
    interim = _run("interim", ["h1", "h2"])
    permanent = _run("permanent", ["h1"])
    text = interims.note("h1", permanent.run_id, "NCCL_P2P_DISABLE,NCCL_SHM_DISABLE")
    assert f"`gpufix rollback {interim.run_id} h1 -i INVENTORY`" in text
    assert "NCCL_P2P_DISABLE, NCCL_SHM_DISABLE at NCCL's default" in text
    assert interims.in_force("h3", besides=permanent.run_id) == []


@pytest.mark.parametrize(
    ("kind", "state", "changed"),
    [
        ("permanent", "healthy", 1),  # not an interim
        ("interim", "rolled-back", 1),  # already taken off
        ("interim", "failed", 1),  # did not end well: a person decides
        ("interim", "healthy", 0),  # changed nothing (the setting was there before)
    ],
)
def test_runs_that_hold_nothing_are_not_named(kind: str, state: str, changed: int) -> None:
    _run(kind, ["h1"], state=state, changed=changed)
    permanent = _run("permanent", ["h1"])
    assert interims.note("h1", permanent.run_id, "NCCL_P2P_DISABLE") == ""


def test_an_unreadable_journal_is_skipped(tmp_path: Path) -> None:
    interim = _run("interim", ["h1"])
    (interim.path / "run.json").write_text("{not json")
    permanent = _run("permanent", ["h1"])
    assert interims.in_force("h1", besides=permanent.run_id) == []


def _after(j: FileJournal, defaults: str, *, interim: bool = False):
    from gpufix.apply.after import After
    from gpufix.apply.result import Options
    from gpufix.engine.plan import Plan, Step

    plan = Plan(
        host="h1", strategy="pcie-acs", findings=[], options=[],
        steps=[Step("pcie_acs.yml", "ACS off", {})], reboot_required=False, outcome="",
        risks=[], path=[], facts_digest="x", kb_digest="y",
        verify={"nccl_defaults": defaults} if defaults else {},
    )  # fmt: skip
    return After(j, {"h1": plan}, Options(inventory=Path("inv"), interim=interim), lambda *a: None)


def _healthy() -> dict:
    import json

    root = Path(__file__).resolve().parents[1]
    return json.loads((root / "docs" / "device" / "h200-probe-healthy.json").read_text())


@pytest.mark.parametrize(
    ("defaults", "interim_run", "named"),
    [("NCCL_P2P_DISABLE", False, True), ("", False, False), ("NCCL_P2P_DISABLE", True, False)],
)
def test_a_healthy_verification_names_the_interim_only_when_it_was_verified_without_it(
    defaults: str, interim_run: bool, named: bool
) -> None:
    from gpufix.runner import HostResult

    held = _run("interim", ["h1"])
    j = _run("interim" if interim_run else "permanent", ["h1"], state="verifying")
    after = _after(j, defaults, interim=interim_run)
    after._verdict("h1", HostResult("h1", data={"gpufix_probe_verdict": _healthy()}))
    rec = FileJournal.open(j.run_id).host("h1")
    assert rec["state"] == "healthy"
    assert (f"gpufix rollback {held.run_id} h1" in rec["reason"]) is named, rec["reason"]


def test_status_lists_each_runs_kind(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    interim = _run("interim", ["h1"])
    permanent = _run("permanent", ["h1"])
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "status"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if "│" in line}
    assert "interim" in rows[interim.run_id] and "permanent" in rows[permanent.run_id]
