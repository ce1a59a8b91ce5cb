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
    hold the lock. The script holds flock(2) on a guard file beside it meanwhile; a guard that
    is a symlink is not opened."""
    import fcntl

    path = tmp_path / "apply.lock"
    stale = json.dumps({"token": "a" * 32, "owner": "gone", "pid": "1", "since": "then"})
    path.write_text(stale)
    guard = os.open(f"{path}.guard", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(guard, fcntl.LOCK_EX)  # another take is in its critical section
    mine = json.dumps({"token": "b" * 32, "owner": "me:/state", "pid": "2", "since": "now"})
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "take", str(path), mine, "a" * 32],
        stdout=subprocess.PIPE,
        text=True,
    )
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
    assert path.read_text() == stale  # it waits, touching nothing
    os.close(guard)
    out, _ = proc.communicate(timeout=30)
    assert json.loads(out)["taken"] and json.loads(path.read_text())["token"] == "b" * 32
    assert Path(f"{path}.guard").stat().st_mode & 0o777 == 0o600
    Path(f"{path}.guard").unlink()
    os.symlink(tmp_path / "elsewhere", f"{path}.guard")
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, "release", str(path), mine, ""], capture_output=True
    )
    assert r.returncode != 0 and path.exists() and not (tmp_path / "elsewhere").exists()


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
        calls.append(dict(k["extravars"]))  # type: ignore[call-overload]
        return answers.pop(0)

    monkeypatch.setattr(runner, "run_playbook", play)
    return calls


def _holder(token: str, owner: str) -> str:
    return json.dumps({"token": token, "owner": owner, "pid": 77, "since": "2026-12-06T09:00:00Z"})


@pytest.mark.parametrize("force", [False, True])
def test_a_holder_is_taken_over_only_when_it_is_ours_or_forced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, force: bool
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    ours, theirs = _holder("a" * 32, hostlock.owner()), _holder("b" * 32, "bastion2:/srv")
    first = _result(
        ("h1", "ok", {"taken": True, "holder": None}),
        ("h2", "ok", {"taken": False, "holder": ours}),
        ("h3", "ok", {"taken": False, "holder": theirs}),
        ("h4", "unreachable", None),
        ("h5", "ok", {"taken": False, "holder": "\x1b[2J" + "x" * 5000}),
    )
    over = [_result(("h2", "ok", {"taken": True, "holder": ours}))]
    if force:
        over.append(_result(("h3", "ok", {"taken": True, "holder": theirs})))
    calls = _play(monkeypatch, [first, *over])
    lock = hostlock.HostLock(tmp_path / "inv.yml", force=force)
    held, lost = lock.take(["h1", "h2", "h3", "h4", "h5"])
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
    release = _play(monkeypatch, [_result(*((h, "ok", {"released": True}) for h in lock.taken))])
    lock.release()
    assert [c["gpufix_host_lock_action"] for c in release] == ["release"] and lock.taken == []
    assert all(c["gpufix_host_lock_holder"]["token"] == lock.token for c in release)


def test_a_dry_run_reads_the_record_and_writes_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    ours, theirs = _holder("a" * 32, hostlock.owner()), _holder("b" * 32, "bastion2:/srv")
    calls = _play(monkeypatch, [_result(
        ("h1", "ok", {"taken": False, "holder": None}),
        ("h2", "ok", {"taken": False, "holder": ours}),
        ("h3", "ok", {"taken": False, "holder": theirs}),
    )])  # fmt: skip
    held, lost = hostlock.HostLock(tmp_path / "inv.yml").peek(["h1", "h2", "h3"])
    assert [c["gpufix_host_lock_action"] for c in calls] == ["peek"]
    assert set(held) == {"h3"} and "bastion2:/srv" in held["h3"] and not lost
    path = tmp_path / "apply.lock"
    path.write_text(theirs)
    assert json.loads(_lock(path, "peek", "c" * 32)["holder"])["owner"] == "bastion2:/srv"
    assert path.read_text() == theirs  # read, not taken over
