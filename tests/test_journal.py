"""Journal: atomic writes, 0700 directories, secrets kept out, the resume state machine, the
in-memory journal of check mode, host locks."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from gpufix.apply import journal
from gpufix.apply.journal import FileJournal, Journal, next_action, scrub, write_json_atomic
from gpufix.apply.locks import HostLocks, process_start
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
    j = FileJournal.start(_plans(), plan_digest="sha256:x", options={"batch": "1"})
    assert _mode(j.path) == 0o700
    assert _mode(j.path.parent) == 0o700
    assert _mode(j.path / "h1.json") == 0o600
    meta = json.loads((j.path / "run.json").read_text())
    assert meta["plan_digest"] == "sha256:x" and meta["hosts"] == ["h1", "h2"]
    rec = json.loads((j.path / "h1.json").read_text())
    assert rec["state"] == "pending" and [s["state"] for s in rec["steps"]] == ["pending"] * 2


def test_every_transition_is_on_disk_before_the_call_returns() -> None:
    j = FileJournal.start(_plans(), plan_digest="sha256:x", options={})
    j.step_started("h1", 0)
    on_disk = json.loads((j.path / "h1.json").read_text())
    assert on_disk["state"] == "applying" and on_disk["steps"][0]["state"] == "started"
    j.step_finished("h1", 0, ok=True, changed=3, files=["/etc/b", "/etc/a", "/etc/a"])
    on_disk = json.loads((j.path / "h1.json").read_text())
    assert on_disk["steps"][0]["state"] == "done"
    assert on_disk["steps"][0]["files"] == ["/etc/a", "/etc/b"]
    reopened = FileJournal.open(j.run_id)
    assert reopened.host("h1")["steps"][0]["changed"] == 3


def test_secrets_never_reach_the_journal() -> None:
    plans = _plans()
    plans[0]["steps"][0]["vars"] = {
        "gpufix_x": 1,
        "ansible_become_password": "hunter2",
        "nested": {"api_token": "t0k"},
    }
    j = FileJournal.start(plans, plan_digest="d", options={"vault_password_file": "/x"})
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
    j = FileJournal.start(_plans(), plan_digest="d", options={})
    assert j.state == "running"
    j.meta["pid"] = 2**22 + 12345  # above pid_max: no such process
    j._persist_meta()
    assert FileJournal.open(j.run_id).state == "interrupted"
    assert FileJournal.find_for_plan("d").run_id == j.run_id  # type: ignore[union-attr]
    assert FileJournal.find_for_plan("other") is None


def test_a_run_an_error_stops_is_recorded_as_failed_with_the_error() -> None:
    """A review (2026-12-03): only Ctrl-C was caught, so a crash part-way (Ansible, runner, a
    full disk) left `running`, later read as `interrupted` with no word of why."""
    from types import SimpleNamespace

    from gpufix.apply.rollout import Applier

    j = FileJournal.start(_plans(), plan_digest="d", options={})

    def boom(*_: object) -> bool:
        raise OSError(28, "No space left on device")

    stub = SimpleNamespace(order=j.hosts, _rollout=boom)
    with pytest.raises(OSError):
        Applier._execute(stub, j, {h: ("step", 0) for h in j.hosts}, {}, False, {})  # type: ignore[arg-type]
    again = FileJournal.open(j.run_id)
    assert again.state == "failed"
    assert again.meta["error"] == "OSError: [Errno 28] No space left on device"
    assert set(again.meta["summary"]) == set(j.hosts)


def test_open_refuses_bad_ids_and_unknown_runs() -> None:
    with pytest.raises(InvalidInput, match="not a run id"):
        FileJournal.open("../../etc")
    with pytest.raises(InvalidInput, match="no run"):
        FileJournal.open("20260101T000000-abcdef")
    with pytest.raises(InvalidInput, match="no apply runs"):
        FileJournal.open("latest")


def test_host_names_that_would_escape_the_run_dir_are_refused() -> None:
    with pytest.raises(InvalidInput, match="cannot be journaled"):
        FileJournal.start(
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
        # a review (2026-12-06): `rebooting` is journaled before reboot.yml reboots; a crash in
        # between resumed to verify, and the host was probed on the old module
        (_rec("rebooting", ["done", "done"]), ("reboot", -1)),
        (_rec("rebooting", ["done", "done"], rebooted=True), ("verify", -1)),
        (_rec("verifying", ["done", "done"]), ("verify", -1)),
        (_rec("unreachable", ["done", "pending"]), ("step", 1)),
        (_rec("unreachable", ["done", "done"], rebooted=True), ("verify", -1)),
        (_rec("blocked", ["pending", "pending"]), ("step", 0)),
        (_rec("healthy", ["done", "done"]), ("skip", -1)),
        (_rec("reboot-pending", ["done", "done"]), ("skip", -1)),
        (_rec("skipped", ["pending", "pending"]), ("skip", -1)),
        (_rec("failed", ["done", "failed"]), ("refuse", -1)),
        (_rec("rolling-back", ["done", "done"]), ("refuse", -1)),
        (_rec("rolled-back", ["done", "done"]), ("retry", -1)),  # a new run may try again
    ],
)
def test_resume_state_machine(rec: dict, want: tuple[str, int]) -> None:
    assert next_action(rec) == want


def test_states_are_checked() -> None:
    j = FileJournal.start(_plans(), plan_digest="d", options={})
    with pytest.raises(ValueError):
        j.set_state("h1", "exploded")
    with pytest.raises(InvalidInput, match="not in run"):
        j.host("h9")


def test_list_runs_is_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = iter(["20260101T000002-aaaaaa", "20260101T000001-bbbbbb"])
    monkeypatch.setattr(journal, "new_run_id", lambda: next(ids))
    FileJournal.start(_plans(), plan_digest="a", options={})
    FileJournal.start(_plans(), plan_digest="b", options={})
    assert journal.list_runs() == ["20260101T000001-bbbbbb", "20260101T000002-aaaaaa"]
    assert FileJournal.open("latest").meta["plan_digest"] == "a"
    assert os.listdir(journal.runs_dir())


def test_a_reused_pid_does_not_keep_a_run_running() -> None:
    j = FileJournal.start(_plans(), plan_digest="d", options={})
    assert j.meta["pid_start"] == process_start(os.getpid())
    j.meta["pid_start"] = "1"  # this pid, but a process that started at another time
    j._persist_meta()
    assert FileJournal.open(j.run_id).state == "interrupted"


def test_check_mode_journal_has_the_same_interface_and_writes_nothing() -> None:
    j = Journal.start(_plans(), plan_digest="d", options={})
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=2)
    j.set_state("h1", "would-change", "check mode")
    j.add_verdict("h1", "after-apply", {"verdict": "healthy"})
    j.finish("complete")
    assert j.host("h1")["state"] == "would-change" and j.changed("h1") == 2
    assert not j.persistent and j.path is None
    assert journal.list_runs() == []  # nothing under the state directory


@pytest.mark.parametrize(
    "name",
    [
        "aws_access_key_id",
        "aws_secret_access_key",
        "github_token",
        "Authorization",
        "X-Auth-Token",
        "ansible_become_password",
        "vault_password_file",
        "client_secret",
        "accessToken",
        "db_passwd",
        "session_id",
    ],
)
def test_secret_names_are_redacted(name: str) -> None:
    assert scrub({name: "s3cr3t"}) == {name: journal.REDACTED}


@pytest.mark.parametrize(
    "name", ["gpufix_pcie_acs_iommu_passthrough", "gpufix_kernel_target", "tokenizer", "compass"]
)
def test_ordinary_names_are_kept(name: str) -> None:
    assert scrub({name: "v"}) == {name: "v"}


def test_passwords_inside_values_are_redacted() -> None:
    got = scrub(
        {
            "gpufix_ml_stack_index_url": "https://alice:hunter2@pypi.example/simple",
            "note": "curl -H 'Authorization: Bearer abc.def' https://x",
        }
    )
    text = json.dumps(got)
    assert "hunter2" not in text and "abc.def" not in text
    assert "https://alice:<redacted>@pypi.example/simple" in text


def test_a_corrupt_run_is_one_line_and_does_not_hide_the_others() -> None:
    good = FileJournal.start(_plans(), plan_digest="a", options={})
    bad = FileJournal.start(_plans(), plan_digest="b", options={})
    (bad.path / "run.json").write_text('{"format": "gpufix-run", "version": 1, "hosts": 5}')
    with pytest.raises(
        InvalidInput,
        match=r"journal file .*run\.json: \(document\): missing required fields: run, ",
    ):
        FileJournal.open(bad.run_id)
    assert FileJournal.find_for_plan("a").run_id == good.run_id  # type: ignore[union-attr]
    (bad.path / "h1.json").unlink()
    (bad.path / "run.json").unlink()
    assert FileJournal.find_for_plan("b") is None


def test_journal_host_files_cannot_name_another_host(tmp_path: Path) -> None:
    j = FileJournal.start(_plans(), plan_digest="d", options={})
    rec = json.loads((j.path / "h1.json").read_text())
    rec["host"] = "h2"
    (j.path / "h1.json").write_text(json.dumps(rec))
    with pytest.raises(InvalidInput, match="another host"):
        FileJournal.open(j.run_id)


def test_one_lock_per_host() -> None:
    with HostLocks(["h1", "h2"]) as first:
        first.label("20260101T000000-abcdef")
        with pytest.raises(Exception, match="another gpufix run") as exc:
            HostLocks(["h2", "h3"]).acquire()
        assert str(os.getpid()) in str(exc.value) and "20260101T000000-abcdef" in str(exc.value)
        # h3 was not left locked by the refused attempt
        with HostLocks(["h3"]):
            pass
    with HostLocks(["h1", "h2"]):  # released on exit
        pass


def test_a_lock_file_of_a_dead_process_is_taken_over() -> None:
    locks = journal.private_dir("locks")
    (locks / "h1.lock").write_text(json.dumps({"pid": 2**22 + 5, "start": "1", "host": "h1"}))
    with HostLocks(["h1"]):
        held = json.loads((locks / "h1.lock").read_text())
        assert held["pid"] == os.getpid()
    assert not (locks / "h1.lock").exists()


@pytest.mark.parametrize("bad", ["../x", "a/b", "", ".", "..", "h1\n", "$(id)"])
def test_locks_refuse_names_that_leave_the_directory(bad: str) -> None:
    with pytest.raises(InvalidInput):
        HostLocks([bad])


def test_state_dir_variable_set_but_empty_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As XDG's base-directory variables read: empty is unset (docs/apply.md, Journal)."""
    from gpufix import paths

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GPUFIX_STATE_DIR", "")
    assert paths.state_path() == tmp_path / "home" / ".local" / "state" / "gpufix"
    monkeypatch.setenv("GPUFIX_STATE_DIR", "state")
    with pytest.raises(InvalidInput, match="is not an absolute path"):
        paths.state_path()


@pytest.mark.parametrize(
    ("mode", "owner", "refused"),
    [(0o700, None, False), (0o1777, None, False), (0o777, None, True), (0o770, None, True),
     (0o755, 4242, True)],
)  # fmt: skip
def test_a_state_directory_another_account_can_change_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int, owner: int | None, refused: bool
) -> None:
    """A review (2026-12-06): in a shared directory others can write, another account could put
    its own runs/ in place of ours between gpufix's checks and its reads (a journal root's
    rollback restores /etc files from). The sticky bit, as on /tmp, prevents that."""
    from gpufix import paths
    from gpufix.errors import GpufixError

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    if owner is not None:
        if os.geteuid() != 0:
            pytest.skip("chown to another account needs root")
        os.chown(shared, owner, owner)
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(shared))
    if refused:
        with pytest.raises(GpufixError, match="can be changed by another account"):
            paths.state_dir()
    else:
        assert paths.state_dir() == shared


def test_a_crash_inside_start_leaves_no_run_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-06, L2): start() made the run directory, then wrote each host's file and
    run.json last; a crash between (a full disk) left a directory that `gpufix status` listed as
    an unreadable run for good. The run is written under another name and renamed whole."""
    from gpufix.apply.journal import list_runs, runs_dir

    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))

    def full(self: FileJournal) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(FileJournal, "_persist_meta", full)
        with pytest.raises(OSError):
            FileJournal.start(_plans(), plan_digest="d", options={})
    assert list_runs() == []
    j = FileJournal.start(_plans(), plan_digest="d", options={})
    assert list_runs() == [j.run_id] and j.path == runs_dir() / j.run_id
    j.set_state(j.hosts[0], "applying")  # later writes go to the renamed directory
    assert FileJournal.open(j.run_id).host(j.hosts[0])["state"] == "applying"
