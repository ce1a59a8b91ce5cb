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
from gpufix.paths import default_inventory


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


def _live_inventory(tmp_path: Path) -> str:
    """h1 and h2 as live hosts (TEST-NET addresses: nothing in these tests reaches them)."""
    inv = tmp_path / "live.yml"
    inv.write_text(
        "all:\n  hosts:\n    h1: {ansible_host: 192.0.2.1}\n    h2: {ansible_host: 192.0.2.2}\n"
    )
    return str(inv)


def _healthy_run(inv: str) -> FileJournal:
    """A finished run whose NCCL profile left h1 healthy, with before and after states."""
    steps = [{"playbook": "nccl_profile.yml", "vars": {"gpufix_nccl_profile_names": ["no-p2p"]}}]
    j = FileJournal.start([{"host": "h1", "strategy": "nccl-profile", "steps": steps}],
                          plan_digest="sha256:z", options={"inventory": inv})  # fmt: skip
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=1, files=["/etc/nccl.conf"])
    j.update("h1", before={"packages": {}, "files": {}}, after={"packages": {}, "files": {}})
    j.set_state("h1", "healthy", "probe: healthy")
    j.finish("complete")
    return j


def test_rollback_refuses_what_it_cannot_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    j = _journal()
    code, _, err = run(capsys, "rollback", j.run_id, "h9")
    assert code == 3 and "not in run" in err
    code, _, err = run(capsys, "rollback", j.run_id, "h1")
    assert code == 3 and "inventory" in err and "-i PATH" in err
    code, _, err = run(capsys, "rollback", j.run_id, "h2", "-i", _live_inventory(tmp_path))
    assert code == 3 and "nothing to roll back" in err


@pytest.mark.parametrize("host", ["h1", "host01"])
def test_rollback_of_a_host_the_inventory_does_not_hold_records_nothing(
    capsys: pytest.CaptureFixture[str], host: str
) -> None:
    """A review (2026-12-05): rollback wrote `rolling-back` then `failed` into the journal of a
    host it never reached (not in the inventory, or a recorded snapshot), and a later apply of
    the plan then refused that host. It is refused first now, and the journal is left as it was."""
    j = FileJournal.start(
        [{"host": host, "strategy": "nccl-profile", "steps": []}],
        plan_digest="sha256:y",
        options={"inventory": "inventory/example.yml"},
    )
    j.set_state(host, "healthy", "probe: healthy")
    j.finish("complete")
    code, _, err = run(capsys, "rollback", j.run_id, host, "-i", str(default_inventory()))
    assert code == 3 and err.count("\n") == 1, err
    assert ("no host or group 'h1'" in err) if host == "h1" else ("recorded" in err)
    assert FileJournal.open(j.run_id).host(host)["state"] == "healthy"


def test_rollback_of_a_run_that_records_no_inventory_asks_for_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An empty inventory path was read as "." (a directory) and the rollback ran against it."""
    j = FileJournal.start(
        [{"host": "h1", "strategy": "nccl-profile", "steps": []}],
        plan_digest="sha256:z",
        options={"inventory": ""},
    )
    j.finish("complete")
    code, _, err = run(capsys, "rollback", j.run_id, "h1")
    assert code == 3 and "records no inventory" in err and "-i PATH" in err


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
    # without --check too, the refusal comes before asking (a review, 2026-12-06)
    code, _, err = run(capsys, "apply", "--strategy", "kernel-upgrade", "host01")
    assert code == 3 and "recorded snapshot" in err and "--yes" not in err, err


def test_a_live_host_off_a_terminal_needs_yes_with_strategy(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gpufix.engine.plan import load_plans

    path, inv = _live_plan(tmp_path)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    monkeypatch.setattr("gpufix.cli.apply._replan", lambda *a, **k: load_plans(path))
    code, _, err = run(capsys, "apply", "--strategy", "nccl-profile", "h1", "-i", str(inv))
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


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
def test_ctrl_c_during_the_freshness_check_is_130_and_starts_nothing(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A real Ctrl-C (SIGINT to the gpufix process) while ansible-runner gathers facts: exit
    130, nothing started after it, no run left behind (no host was touched), the lock released.
    (A Ctrl-C during a step, with its journal `interrupted`: tests/e2e.) SIGHUP, a dropped SSH
    session, goes the same way (a review, 2026-12-06: it killed gpufix outright)."""
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
        # as from a login session: a suite run under nohup would hand its SIG_IGN down, which
        # gpufix keeps on purpose
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()  # "  h1: gpufix_facts": the freshness gather started
        assert "gpufix_facts" in line, line
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        # a failed assertion above must not leave it running on: it would take this machine's
        # host lock a minute later, in another test's way
        proc.kill()
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
    j.update("h1", target={"ansible_host": "192.0.2.1"})  # as _live_inventory gives it
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=3)
    j.update("h1", rebooted=True)
    j.add_verdict("h1", "after-apply", {"verdict": "healthy"})
    j.set_state("h1", "healthy", "probe: healthy")
    j.finish("complete")
    return j


def test_rollback_that_reboots_needs_allow_reboot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    j = _rebooted_journal()
    code, _, err = run(capsys, "rollback", j.run_id, "h1", "-i", _live_inventory(tmp_path))
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


@pytest.mark.parametrize("python", ["python; rm -rf /", "rel/python", "", "/usr/bin/python3 -c x"])
def test_probe_options_are_refused_before_any_host_is_touched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, python: str
) -> None:
    """A review (2026-12-05): --probe-python was checked only when the probe ran, after the
    steps and the reboot, which left the host changed, unprobed and not rolled back. Refused
    (exit 3) before the run starts now, in --check too; no run is recorded."""
    path, inv = _live_plan(tmp_path)
    code, _, err = run(capsys, "apply", str(path), "-i", str(inv), "--probe-python", python)
    assert code == 3 and "gpufix_probe_python" in err and err.count("\n") == 1, err
    code, _, err = run(
        capsys, "apply", str(path), "-i", str(inv), "--check", "--probe-python", python
    )
    assert code == 3 and "gpufix_probe_python" in err, err
    from gpufix.apply.journal import list_runs

    assert list_runs() == []


def test_a_damaged_run_of_the_same_plan_is_refused_not_started_over(tmp_path: Path) -> None:
    """A review (2026-12-05): a run of this plan whose host file could not be read was passed
    over, so a new run started every host at step 0, past a host that had failed and was not
    rolled back. Refused now (exit 1, naming the run); a damaged run of another plan is still
    passed over."""
    from gpufix.errors import GpufixError

    j = _journal()  # plan digest sha256:x
    (j.path / "h2.json").write_text('{"format": "gpufix-journal-host"')  # cut short
    with pytest.raises(GpufixError, match=f"run {j.run_id} of this plan cannot be read"):
        FileJournal.find_for_plan("sha256:x")
    assert FileJournal.find_for_plan("sha256:other") is None


def test_a_host_file_that_is_not_a_file_makes_the_run_unreadable() -> None:
    from gpufix.errors import InvalidInput

    j = _journal()
    (j.path / "h2.json").unlink()
    (j.path / "h2.json").mkdir()
    with pytest.raises(InvalidInput):
        FileJournal.open(j.run_id)


def test_a_journal_without_started_at_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    """started_at is optional in journal-host.schema.json: a record without it is updated,
    not a KeyError."""
    j = _journal()
    rec = json.loads((j.path / "h2.json").read_text())
    del rec["started_at"]
    (j.path / "h2.json").write_text(json.dumps(rec))
    again = FileJournal.open(j.run_id)
    again.set_state("h2", "skipped", "test")
    assert again.host("h2")["started_at"]


@pytest.mark.parametrize("kind", ["dangling", "directory", "fifo", "bad-pid", "huge-pid"])
def test_a_damaged_lock_file_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    """A review (2026-12-05): a lock file that is a dangling link, a directory or a FIFO, or a
    held lock naming a pid that is not one, was an internal error."""
    import fcntl

    from gpufix.paths import private_dir

    path, inv = _live_plan(tmp_path)
    lock = private_dir("locks") / "h1.lock"
    held = None
    if kind == "dangling":
        lock.symlink_to(tmp_path / "nowhere")
    elif kind == "directory":
        lock.mkdir()
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.write_text(json.dumps({"pid": "abc" if kind == "bad-pid" else 10**20}))
        held = os.open(lock, os.O_RDONLY)
        fcntl.flock(held, fcntl.LOCK_EX)
    try:
        code, _, err = run(capsys, "apply", str(path), "-i", str(inv), "--check")
    finally:
        if held is not None:
            os.close(held)
    assert code == 1 and err.startswith("gpufix: error: h1") and err.count("\n") == 1, err
    assert "internal error" not in err


def test_status_titles_show_control_characters_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    """run.json's error and plan_file reach the table title: escaped like the rows."""
    j = _journal()
    meta = json.loads((j.path / "run.json").read_text())
    meta["plan_file"] = "p\x1b]0;PWNED\x07\x1b[2J.json"
    (j.path / "run.json").write_text(json.dumps(meta))
    code, out, _ = run(capsys, "status", j.run_id)
    assert code == 0 and "\x1b" not in out and "\x07" not in out


@pytest.mark.parametrize("damage", ["missing", "named-twice"])
def test_a_run_whose_hosts_do_not_match_its_files_is_unreadable(
    capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """A review (2026-12-05): a host file missing was passed over (status showed an empty
    table, rollback said the host is not in the run), and a host named twice was counted
    twice. Such a run is listed as unreadable, like any damaged journal."""
    from gpufix.errors import InvalidInput

    j = _journal()
    if damage == "missing":
        (j.path / "h2.json").unlink()
    else:
        meta = json.loads((j.path / "run.json").read_text())
        meta["hosts"] = ["h1", "h2", "h1"]
        (j.path / "run.json").write_text(json.dumps(meta))
    with pytest.raises(InvalidInput):
        FileJournal.open(j.run_id)
    code, out, _ = run(capsys, "status", "--json")
    assert code == 0 and json.loads(out)[0]["state"] == "unreadable", out


def test_status_with_no_runs_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """A review (2026-12-05): an empty table, where `status latest` said there was no run."""
    code, out, _ = run(capsys, "status")
    assert code == 0 and out.startswith("no apply runs recorded yet (in ")


def test_version_names_where_the_content_is(capsys: pytest.CaptureFixture[str]) -> None:
    """A wheel keeps the roles and the example inventory inside the installed package: a user
    finds them with --version (a review found them named only in an error message)."""
    from gpufix import __version__
    from gpufix.paths import content_root

    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.splitlines() == [f"gpufix, version {__version__}", f"content: {content_root()}"]


def test_ctrl_c_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review (2026-12-05): Ctrl-C during `gpufix plan` printed an empty line (click's main()
    does, before its Abort), then "gpufix: aborted"; the docs promise one line."""
    from gpufix import planning
    from gpufix.cli.app import run

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(planning, "make_plans", interrupted)
    with pytest.raises(SystemExit) as exc:
        run(["plan", "host01"])
    assert exc.value.code == 130
    assert capsys.readouterr().err == "gpufix: interrupted\n"


def test_a_rollback_that_waited_for_the_lock_reads_the_journal_again(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-06): the journal was read before the host lock and never again, so a
    second rollback of the same host, waiting for the first one's lock, rolled it back again
    (a second reboot) and wrote its stale copy over the first one's record."""
    from gpufix.apply import locks, rollback

    inv = _live_inventory(tmp_path)
    j = _healthy_run(inv)
    real = locks.HostLocks

    class OtherRollbackFirst(real):  # type: ignore[misc,valid-type]
        def __enter__(self) -> locks.HostLocks:
            FileJournal.open(j.run_id).set_state("h1", "rolled-back", "the other one")
            return super().__enter__()

    monkeypatch.setattr(locks, "HostLocks", OtherRollbackFirst)
    monkeypatch.setattr(rollback, "rollback", lambda *a, **k: pytest.fail("rolled back twice"))
    code, _, err = run(capsys, "rollback", j.run_id, "h1", "-i", inv)
    assert code == 3 and "already rolled back" in err, err
    assert FileJournal.open(j.run_id).host("h1")["reason"] == "the other one"


@pytest.mark.parametrize(("answer_s", "fresh"), [(0.0, True), (45.0, False)])
def test_facts_read_over_at_the_prompt_are_gathered_again_under_the_lock(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    answer_s: float,
    fresh: bool,
) -> None:
    """A review (2026-12-06): `apply --strategy` gathered facts, waited at the prompt as long as
    the operator took, then skipped the stale-plan check; a run that changed the host meanwhile
    went unnoticed. Facts older than FRESH_FOR_S when the apply starts are gathered again."""
    from gpufix.apply import rollout
    from gpufix.cli import apply as cli_apply
    from gpufix.engine.plan import load_plans

    path, inv = _live_plan(tmp_path)
    clock = [1000.0]
    monkeypatch.setattr(cli_apply.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(cli_apply, "_replan", lambda *a, **k: load_plans(path))

    def answer(*_a: object, **_k: object) -> None:
        clock[0] += answer_s  # the operator reads the plan

    monkeypatch.setattr(cli_apply, "_confirm", answer)
    seen: dict = {}

    def fake_apply(plans: object, opts: object, **kw: object) -> None:
        seen.update(kw)
        raise SystemExit(0)

    monkeypatch.setattr(rollout, "apply", fake_apply)
    run(capsys, "apply", "--strategy", "nccl-profile", "h1", "-i", str(inv), "--yes")
    assert seen["fresh_facts"] is fresh


def test_rolling_back_a_run_that_later_runs_changed_over_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-06, L10): `gpufix rollback OLD h1` restored OLD's `before` over what a
    later run did to the same file or package of h1, with no record of it. Refused until the
    later run is rolled back, or with --over-later-runs; a later run that changed other things
    (the permanent fix after an interim, docs/operations.md) does not stand in the way."""
    from gpufix.apply import journal, rollback

    inv = _live_inventory(tmp_path)
    ids = iter(f"20261206T1{n}0000-{c * 6}" for n, c in enumerate("abcd"))
    monkeypatch.setattr(journal, "new_run_id", lambda: next(ids))
    conf = "/etc/nccl.conf"

    def changed(strategy: str, before: dict, after: dict, ran: bool = True) -> FileJournal:
        steps = [{"playbook": "x.yml", "vars": {}}]
        j = FileJournal.start([{"host": "h1", "strategy": strategy, "steps": steps}],
                              plan_digest="sha256:z", options={"inventory": inv})  # fmt: skip
        if ran:
            j.step_started("h1", 0)
            j.step_finished("h1", 0, ok=True, changed=1, files=[conf] if conf in after else [])
        j.update("h1", before={"packages": {}, **before}, after={"packages": {}, **after})
        j.set_state("h1", "healthy", "probe: healthy")
        j.finish("complete")
        return j

    absent = {"files": {conf: {"exists": False}}}
    written = {"files": {conf: {"exists": True, "size": 20}}}
    old = changed("nccl-profile", absent, written)
    later = changed("nccl-profile", written, {"files": {conf: {"exists": True, "size": 40}}})
    changed("nccl-profile", written, written, ran=False)  # planned, never started
    (journal.runs_dir() / "20261206T125959-eeeeee").mkdir()  # a crash inside Journal.start
    driver = changed("driver-pin", {"packages": {"nvidia-driver-535": "535.274.02-0ubuntu1"}},
                     {"packages": {"nvidia-driver-580": "580.95.05-0ubuntu1"}})  # fmt: skip
    rolled: list[str] = []
    monkeypatch.setattr(rollback, "rollback", lambda j, h, *a, **k: rolled.append(j.run_id))
    _no_host_lock(monkeypatch)
    code, _, err = run(capsys, "rollback", old.run_id, "h1", "-i", inv)
    assert code == 3 and err.count("\n") == 1 and rolled == [], err
    assert f"{later.run_id} (file {conf})" in err and "--over-later-runs" in err
    assert driver.run_id not in err and "cccccc" not in err and "eeeeee" not in err
    run(capsys, "rollback", old.run_id, "h1", "-i", inv, "--over-later-runs")
    assert rolled == [old.run_id]
    FileJournal.open(later.run_id).set_state("h1", "rolled-back", "restored from the journal")
    rolled.clear()
    run(capsys, "rollback", old.run_id, "h1", "-i", inv)
    assert rolled == [old.run_id]


def _no_host_lock(
    monkeypatch: pytest.MonkeyPatch, held: dict | None = None, lost: dict | None = None
) -> None:
    """The lock on the host (tests/test_host_lock.py, tests/e2e/test_apply_host_lock.py) as taken,
    held by another controller, or not reached; these hosts are TEST-NET addresses nothing
    reaches."""
    from gpufix.apply import hostlock

    def take(self: hostlock.HostLock, hosts: list[str], *_a: object) -> tuple[dict, dict]:
        self.taken.extend(h for h in hosts if h not in (held or {}) and h not in (lost or {}))
        return dict(held or {}), dict(lost or {})

    monkeypatch.setattr(hostlock.HostLock, "take", take)
    monkeypatch.setattr(hostlock.HostLock, "release", lambda self: None)


def test_a_rollback_waits_for_no_other_controller(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's own apply lock, held by another controller's run: the rollback is refused
    with the holder (exit 1) and nothing is rolled back."""
    from gpufix.apply import rollback

    inv = _live_inventory(tmp_path)
    j = _healthy_run(inv)
    monkeypatch.setattr(rollback, "rollback", lambda *a, **k: pytest.fail("rolled back"))
    _no_host_lock(monkeypatch, {"h1": "another gpufix run holds this host: bastion2:/srv"})
    code, _, err = run(capsys, "rollback", j.run_id, "h1", "-i", inv)
    assert code == 1 and "not rolled back: another gpufix run holds this host" in err, err
    assert FileJournal.open(j.run_id).host("h1")["state"] == "healthy"
    # a host the lock does not reach is unreachable (exit 4, as for apply), not an error (1)
    _no_host_lock(monkeypatch, lost={"h1": "not reached for the host's apply lock: no route"})
    code, _, err = run(capsys, "rollback", j.run_id, "h1", "-i", inv)
    assert code == 4 and "not rolled back: not reached" in err, err
    assert FileJournal.open(j.run_id).host("h1")["state"] == "healthy"


def test_later_runs_are_matched_by_machine_and_an_unread_run_conflicts_with_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-06): later runs were matched by inventory name only, and a run whose
    own changes were never read back (its step failed, the host was lost) computed nothing to
    put back, so no later run stood in the way; its rollback then reads the host, later
    changes included, and undid them."""
    from gpufix.apply import journal
    from gpufix.apply.rollback import later_changes

    ids = iter(f"20261206T1{n}0000-{c * 6}" for n, c in enumerate("abcdef"))
    monkeypatch.setattr(journal, "new_run_id", lambda: next(ids))
    conf = "/etc/nccl.conf"

    def run_on(host: str, address: str, after: bool = True) -> FileJournal:
        steps = [{"playbook": "x.yml", "vars": {}}]
        j = FileJournal.start([{"host": host, "strategy": "nccl-profile", "steps": steps}],
                              plan_digest="sha256:z", options={})  # fmt: skip
        before = {"packages": {}, "files": {conf: {"exists": False}}}
        j.update(host, target={"ansible_host": address}, before=before)
        j.step_started(host, 0)
        j.step_finished(host, 0, ok=True, changed=1, files=[conf])
        if after:
            j.update(host, after={"packages": {}, "files": {conf: {"exists": True, "size": 1}}})
        return j

    old = run_on("gpu01", "10.0.0.5")
    alias = run_on("gpu01.dc1", "10.0.0.5")  # the same machine under another name
    run_on("gpu02", "10.0.0.6")  # another machine
    assert later_changes(old, "gpu01") == [f"{alias.run_id} (file {conf})"]
    unread = run_on("gpu03", "10.0.0.7", after=False)
    later = run_on("gpu03", "10.0.0.7")
    assert later_changes(unread, "gpu03") == [
        f"{later.run_id} (this run's own changes were not read back)"
    ]
