"""The apply lock on the host: the playbook's script on real files (take, refuse, take over,
release, never through a symlink), and the controller's reading of what a host reports (a
holder's record is data from the host). tests/e2e/test_apply_host_lock.py runs both on containers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpufix import runner
from gpufix.apply import hostlock
from gpufix.paths import playbook

SCRIPT = yaml.safe_load(playbook("host_lock.yml").read_text())[0]["vars"][
    "__gpufix_host_lock_script"
]


def test_the_controller_names_the_path_the_playbook_locks() -> None:
    """Errors and docs name hostlock.LOCK_PATH; the playbook writes its own variable."""
    play = yaml.safe_load(playbook("host_lock.yml").read_text())[0]
    assert play["vars"]["__gpufix_host_lock_path"] == hostlock.LOCK_PATH


def _lock(path: Path, action: str, token: str, takeover: str = "") -> dict:
    mine = json.dumps({"token": token, "owner": "me:/state", "pid": 1, "since": "now"})
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, action, str(path), mine, takeover],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(r.stdout)


def test_the_script_takes_refuses_takes_over_and_releases(tmp_path: Path) -> None:
    path = tmp_path / "gpufix" / "apply.lock"
    a, b = "a" * 32, "b" * 32
    assert _lock(path, "take", a)["taken"]  # the directory is made as well
    assert path.stat().st_mode & 0o777 == 0o600
    got = _lock(path, "take", b)
    assert not got["taken"] and json.loads(got["holder"])["token"] == a
    assert not _lock(path, "release", b)["released"] and path.exists()  # not b's to release
    assert _lock(path, "take", b, takeover=a)["taken"]
    assert json.loads(path.read_text())["token"] == b
    assert not _lock(path, "take", "c" * 32, takeover=a)["taken"]  # a no longer holds it
    assert _lock(path, "release", b)["released"] and not path.exists()
    assert _lock(path, "release", b) == {"taken": False, "released": False, "holder": None}


def test_takes_on_one_host_wait_for_each_other(tmp_path: Path) -> None:
    """A takeover reads, removes and writes the record: two at once (two controllers) would both
    hold the lock. The script holds flock(2) on the lock's directory meanwhile (nothing is
    written for it), so a second one waits, touching nothing."""
    import fcntl

    path = tmp_path / "apply.lock"
    stale = json.dumps({"token": "a" * 32, "owner": "gone", "pid": "1", "since": "then"})
    path.write_text(stale)
    guard = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(guard, fcntl.LOCK_EX)  # another take is in its critical section
    mine = json.dumps({"token": "b" * 32, "owner": "me:/state", "pid": "2", "since": "now"})
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "take", str(path), mine, "a" * 32],
        stdout=subprocess.PIPE,
        text=True,
    )
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
    assert path.read_text() == stale
    os.close(guard)
    out, _ = proc.communicate(timeout=30)
    assert json.loads(out)["taken"] and json.loads(path.read_text())["token"] == "b" * 32
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apply.lock"]  # no guard file


def test_only_a_well_formed_token_is_taken_over(tmp_path: Path) -> None:
    """A review (2026-12-06): a record with an empty token was replaced when the controller
    passed no token to take over ("" == ""): the script decided what only the controller may."""
    path = tmp_path / "apply.lock"
    path.write_text(json.dumps({"token": "", "owner": "x"}))
    assert not _lock(path, "take", "a" * 32, takeover="")["taken"]
    assert json.loads(path.read_text())["token"] == ""


def test_a_record_without_a_token_takes_and_releases_nothing(tmp_path: Path) -> None:
    """The first version compared the two tokens it could not read (None == None): it released
    any record it could not parse, its own written as a Python repr by a templated argument."""
    path = tmp_path / "apply.lock"
    path.write_text("{'token': 'not json'}")
    for action in ("take", "release"):
        r = subprocess.run(
            [sys.executable, "-c", SCRIPT, action, str(path), "{'token': 'x'}", ""],
            capture_output=True,
            text=True,
        )
        assert r.returncode != 0 and "names no token" in r.stderr
    got = _lock(path, "release", "a" * 32)
    assert not got["released"] and path.read_text() == "{'token': 'not json'}"


def test_the_script_never_follows_a_symlink(tmp_path: Path) -> None:
    """An attack: another account points the lock's name at a file root owns; taking, taking
    over and releasing must neither write nor remove it."""
    target = tmp_path / "shadow"
    target.write_text("root:x:0:\n")
    path = tmp_path / "apply.lock"
    os.symlink(target, path)
    got = _lock(path, "take", "a" * 32)
    assert not got["taken"] and got["holder"].startswith("unreadable")
    assert not _lock(path, "release", "a" * 32)["released"]
    assert target.read_text() == "root:x:0:\n" and path.is_symlink()


def _result(*reports: tuple[str, str, object]) -> runner.RunResult:
    hosts = {}
    for host, status, got in reports:
        data = {"gpufix_host_lock": got} if got is not None else {}
        hosts[host] = runner.HostResult(
            host, status, message="" if got else "ssh: no route", data=data
        )
    return runner.RunResult("x", 0, "successful", hosts)


def _play(monkeypatch: pytest.MonkeyPatch, answers: list[runner.RunResult]) -> list[dict]:
    calls: list[dict] = []

    def play(name: str, *_a: object, **k: object) -> runner.RunResult:
        assert name == "host_lock.yml"
        calls.append({**k["extravars"], "limit": k["limit"]})  # type: ignore[dict-item]
        return answers.pop(0)

    monkeypatch.setattr(runner, "run_playbook", play)
    return calls


def _holder(token: str, owner: str, pid: int = 77, start: str = "") -> str:
    record = {"token": token, "owner": owner, "pid": str(pid), "since": "2026-12-06T09:00:00Z"}
    return json.dumps({**record, "pid_start": start})


@pytest.mark.parametrize("force", [False, True])
def test_a_holder_is_taken_over_only_when_it_is_ours_and_gone_or_forced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, force: bool
) -> None:
    """A review (2026-12-06): a record of this controller was taken over whoever wrote it, so the
    same machine under two inventory names (one plan, or two operators sharing root's state
    directory) was changed by two runs at once. Ours is taken over only when its process is gone;
    this run's own token under another name, or a live run of ours, blocks the host, forced or
    not."""
    from gpufix.apply.locks import process_start

    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    lock = hostlock.HostLock(tmp_path / "inv.yml", force=force)
    gone = _holder("a" * 32, hostlock.owner(), pid=0)
    theirs = _holder("b" * 32, "bastion2:/srv")
    live = _holder("c" * 32, hostlock.owner(), os.getpid(), str(process_start(os.getpid())))
    alias = _holder(lock.token, hostlock.owner(), os.getpid())
    first = _result(
        ("h1", "ok", {"taken": True, "holder": None}),
        ("h2", "ok", {"taken": False, "holder": gone}),
        ("h3", "ok", {"taken": False, "holder": theirs}),
        ("h4", "unreachable", None),
        ("h5", "ok", {"taken": False, "holder": "\x1b[2J" + "x" * 5000}),
        ("h6", "ok", {"taken": False, "holder": live}),
        ("h7", "ok", {"taken": False, "holder": alias}),
        ("h8", "ok", {"taken": False, "holder": json.dumps({"token": "", "owner": "x"})}),
    )
    over = [_result(("h2", "ok", {"taken": True, "holder": gone}))]
    if force:
        over.append(_result(("h3", "ok", {"taken": True, "holder": theirs})))
    calls = _play(monkeypatch, [first, *over])
    hosts = [f"h{i}" for i in range(1, 9)]
    held, lost = lock.take(hosts)
    assert [c["gpufix_host_lock_takeover"] for c in calls] == ["", "a" * 32] + (
        ["b" * 32] if force else []
    )
    assert lock.taken == ["h1", "h2"] + (["h3"] if force else [])
    assert set(lost) == {"h4"} and "no route" in lost["h4"]
    if not force:
        assert "bastion2:/srv (pid 77, since 2026-12-06T09:00:00Z)" in held["h3"]
        assert "--force host-lock" in held["h3"]
    # a record that is not one: one bounded line, no terminal escape, and what to do by hand
    assert "\x1b" not in held["h5"] and len(held["h5"]) < 400 and "remove that file" in held["h5"]
    assert "another run of this controller" in held["h6"]
    assert "under another inventory name" in held["h7"]
    assert "remove that file" in held["h8"]
    # the release goes wherever a take went: one cut short may have written our record
    release = _play(monkeypatch, [_result(*((h, "ok", {"released": True}) for h in hosts))])
    lock.release()
    assert [(c["gpufix_host_lock_action"], c["limit"]) for c in release] == [
        ("release", ",".join(hosts))
    ]
    assert lock.taken == [] and lock.sent == []
    assert all(c["gpufix_host_lock_holder"]["token"] == lock.token for c in release)


def test_a_take_cut_short_is_released(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A review (2026-12-06): a Ctrl-C during the take raised before any host was recorded as
    taken, so release() did nothing and hosts whose script had run kept this run's record."""
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    limits: list[str] = []

    def play(name: str, *_a: object, **k: object) -> runner.RunResult:
        limits.append(str(k["limit"]))
        if len(limits) == 1:
            raise KeyboardInterrupt
        return _result(("h1", "ok", {"released": True}), ("h2", "ok", {"released": False}))

    monkeypatch.setattr(runner, "run_playbook", play)
    lock = hostlock.HostLock(tmp_path / "inv.yml")
    with pytest.raises(KeyboardInterrupt):
        lock.take(["h1", "h2"])
    lock.release()
    assert limits == ["h1,h2", "h1,h2"]


def test_a_dry_run_reads_the_record_and_writes_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    ours, theirs = _holder("a" * 32, hostlock.owner(), 0), _holder("b" * 32, "bastion2:/srv")
    calls = _play(monkeypatch, [_result(
        ("h1", "ok", {"taken": False, "holder": None}),
        ("h2", "ok", {"taken": False, "holder": ours}),
        ("h3", "ok", {"taken": False, "holder": theirs}),
    )])  # fmt: skip
    held, lost, unread = hostlock.HostLock(tmp_path / "inv.yml").peek(["h1", "h2", "h3"])
    assert [c["gpufix_host_lock_action"] for c in calls] == ["peek"]
    assert set(held) == {"h3"} and "bastion2:/srv" in held["h3"] and not lost and not unread
    path = tmp_path / "apply.lock"
    path.write_text(theirs)
    assert json.loads(_lock(path, "peek", "c" * 32)["holder"])["owner"] == "bastion2:/srv"
    assert path.read_text() == theirs  # read, not taken over


@pytest.mark.integration
def test_a_host_still_rebooting_is_waited_for_and_no_other_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Real ansible-playbook runs against a port nothing listens on. Before 2026-12-06 a resumed
    run's host that was down for its reboot (a Ctrl-C while it rebooted, apply again at once) was
    `unreachable` at the lock's first try and counted toward --max-fail. A host the last run left
    `rebooting` gets the wait; any other host is not waited for (one dead host would hold up
    the run). Either, not answering, is not reached: never `blocked`."""
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    inv = tmp_path / "inv.yml"
    down = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "ssh"}
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"booting": down, "dead": down}}}))
    plays: list[tuple[str, int]] = []
    real = runner.run_playbook

    def spy(name: str, *a: object, **k: object) -> runner.RunResult:
        plays.append((str(k["limit"]), k["extravars"]["gpufix_host_lock_wait"]))  # type: ignore[index]
        return real(name, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "run_playbook", spy)
    lock = hostlock.HostLock(inv)
    held, lost = lock.take(["booting", "dead"], booting=["booting"], wait=3)
    assert plays == [("dead", 0), ("booting", 3)]
    assert not held and set(lost) == {"booting", "dead"}
    assert "timed out waiting for" in lost["booting"] and "refused" in lost["dead"]


@pytest.mark.parametrize("wait", ["{{ 7 * 191 }}", -1, 86401, True, "60"])
def test_the_wait_is_a_bounded_number_or_nothing_runs(wait: object, tmp_path: Path) -> None:
    """An attack on the new variable: it reaches a playbook as data checked against varspec
    (an int in 0..86400) before ansible-playbook starts, never as a template."""
    from gpufix.apply.rolevars import check_vars
    from gpufix.errors import InvalidInput

    good = {"gpufix_host_lock_action": "take", "gpufix_host_lock_holder": {"token": "a" * 32},
            "gpufix_host_lock_takeover": ""}  # fmt: skip
    check_vars("host_lock.yml", {**good, "gpufix_host_lock_wait": 1200}, "host lock")
    with pytest.raises(InvalidInput):
        check_vars("host_lock.yml", {**good, "gpufix_host_lock_wait": wait}, "host lock")
