"""Rollback puts a watched file back with its owner and group, not only its content and mode:
the journal keeps the ids the host check read (old journals without them still load), the
controller hands rollback.yml the numbers only, checked as data, and a real rollback.yml run
on this machine (connection=local, files in tmp_path only) puts them back."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from gpufix import inputs
from gpufix.apply import rollback
from gpufix.apply.journal import FileJournal
from gpufix.apply.rolevars import check_vars
from gpufix.errors import InvalidInput
from role_check import ROOT, run_playbook

DAEMON = "/etc/docker/daemon.json"
# What the host check records of a daemon.json a docker group may read (playbooks/host_check.yml)
BEFORE = {
    "exists": True,
    "mode": "640",
    "content_b64": base64.b64encode(b'{"default-shm-size": "1g"}\n').decode(),
    "uid": 0,
    "gid": 998,
    "owner": "root",
    "group": "docker",
}


def _record(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """A run whose step reported no file written: only the before/after states tell."""
    return {
        "strategy": "container-fix",
        "steps": [{"playbook": "container_fix.yml", "files": []}],
        "before": {"files": {DAEMON: before}},
        "after": {"files": {DAEMON: after}},
    }


def test_the_journal_keeps_owner_and_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    j = FileJournal.start(
        [{"host": "h1", "strategy": "container-fix", "steps": []}], plan_digest="d", options={}
    )
    old = {k: v for k, v in BEFORE.items() if k in ("exists", "mode", "content_b64")}
    j.update("h1", before={"files": {DAEMON: BEFORE, "/etc/nccl.conf": old}})
    files = FileJournal.open(j.run_id).host("h1")["before"]["files"]
    assert files[DAEMON] == BEFORE and files["/etc/nccl.conf"] == old  # an old journal loads
    rec = json.loads(next(j.path.glob("h1*.json")).read_text())
    for bad in (-1, 2**32 - 1, "0", 1.5):
        rec["before"]["files"][DAEMON] = {**BEFORE, "uid": bad}
        assert inputs.schema_errors(rec, "journal-host"), bad
    rec["before"]["files"][DAEMON] = {**BEFORE, "owner": "x" * 257}
    assert inputs.schema_errors(rec, "journal-host")


def test_rollback_restores_a_file_whose_owner_alone_changed() -> None:
    """The change left the content but made the file root's: rollback puts it back, by number."""
    v = rollback.rollback_vars(_record(BEFORE, {**BEFORE, "gid": 0, "group": "root"}))
    want = {k: BEFORE[k] for k in ("exists", "mode", "content_b64", "uid", "gid")}
    assert v["gpufix_rollback_files"] == {DAEMON: want}  # names are for people, not passed
    check_vars("rollback.yml", v, "test")
    unchanged = rollback.rollback_vars(_record(BEFORE, dict(BEFORE)))
    assert unchanged["gpufix_rollback_files"] == {}


@pytest.mark.parametrize("bad", [-1, 2**32 - 1, 2**32, "0", "0; id", "{{ 7 * 7 }}", True, 1.5])
@pytest.mark.parametrize("key", ["uid", "gid"])
def test_owner_and_group_ids_are_checked_as_data(key: str, bad: object) -> None:
    saved = {k: BEFORE[k] for k in ("exists", "mode", "content_b64", "uid", "gid")}
    with pytest.raises(InvalidInput, match=f"{key} must be an integer from 0 to 4294967294"):
        check_vars("rollback.yml", {"gpufix_rollback_files": {DAEMON: {**saved, key: bad}}}, "t")


def test_names_never_reach_rollback_yml() -> None:
    with pytest.raises(InvalidInput, match="a saved file is"):
        check_vars("rollback.yml", {"gpufix_rollback_files": {DAEMON: BEFORE}}, "test")


def test_rollback_yml_puts_owner_group_and_mode_back(tmp_path: Path) -> None:
    """Real ansible-playbook: a file the change made root:root 0644 comes back root:4343 0640
    with its content; one from a journal without ids keeps the owner it has now."""
    kept, legacy = tmp_path / "daemon.json", tmp_path / "nccl.conf"
    for f in (kept, legacy):
        f.write_text("changed\n")
        os.chown(f, 0, 0)
    os.chmod(kept, 0o644)
    os.chown(legacy, 4141, 4141)
    saved = {
        str(kept): {"exists": True, "mode": "640", "content_b64": "b2xkCg==", "uid": 0,
                    "gid": 4343},
        str(legacy): {"exists": True, "mode": "600", "content_b64": "b2xkCg=="},
    }  # fmt: skip
    extravars = {"gpufix_rollback_files": saved}
    check_vars("rollback.yml", extravars, "test")
    out = run_playbook(
        tmp_path,
        ROOT / "playbooks" / "rollback.yml",
        {**extravars, "ansible_become": False},
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    st = kept.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 4343, 0o640)
    assert kept.read_text() == "old\n"
    st = legacy.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4141, 4141, 0o600)
    assert legacy.read_text() == "old\n"
