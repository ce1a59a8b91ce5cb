"""A journal says which files go back, with what content, mode and owner, and which packages
move: a rollback acts on it as root, and /etc/default/grub's content is run by update-grub in
the same play. An attack review (2026-12-07) wrote such a journal by hand (grub content
`$(id > /root/PWNED)`, mode 4755; sudo downgraded) and every check passed. Now each journal file
carries an HMAC with a key of this state directory (gpufix.apply.seal), and rollback and resume
act only on a journal whose every file carries it; rollback also writes back no set-id or
group/world-writable file, no file another user owns, and no package the host check does not
track, whatever a sealed journal says."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from gpufix import runner
from gpufix.apply import hostcheck, seal
from gpufix.apply.journal import FileJournal
from gpufix.apply.rolevars import check_vars
from gpufix.apply.rollback import files_kept, rollback_vars
from gpufix.errors import GpufixError, InvalidInput
from gpufix.paths import playbook

from .conftest import CliRun

GRUB = "/etc/default/grub"


def _run(tmp_path: Path) -> FileJournal:
    """A kernel-upgrade run of h1 as apply journals it: a step ran and changed GRUB's file."""
    j = FileJournal.start(
        [
            {
                "host": "h1",
                "strategy": "kernel-upgrade",
                "steps": [{"playbook": "kernel_upgrade.yml"}],
            }
        ],
        plan_digest="sha256:z",
        options={},
    )
    old = {"exists": True, "mode": "644", "uid": 0, "gid": 0,
           "content_b64": base64.b64encode(b'GRUB_DEFAULT=0\n').decode()}  # fmt: skip
    j.update("h1", before={"files": {GRUB: old}, "packages": {}, "holds": []})
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=False, changed=1, files=[GRUB])
    j.set_state("h1", "failed", "the step failed")
    j.finish("failed")
    return j


def _forge(j: FileJournal) -> None:
    """The review's journal: the same run, edited by hand."""
    path = j.path / "h1.json"
    rec = json.loads(path.read_text())
    payload = base64.b64encode(b"$(id > /root/GPUFIX_ROLLBACK_PWNED)\n").decode()
    rec["before"]["files"][GRUB]["content_b64"] = payload
    rec["before"]["packages"] = {"sudo": "1.8.21p2-3ubuntu1"}
    path.write_text(json.dumps(rec))


@pytest.fixture
def no_ansible(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**_kw: object) -> None:
        pytest.fail("a refused journal reached Ansible")

    monkeypatch.setattr(runner, "_run", refuse)


def test_a_journal_this_controller_wrote_is_sealed_and_reads_back_without_the_seal(
    tmp_path: Path,
) -> None:
    j = _run(tmp_path)
    on_disk = json.loads((j.path / "h1.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{64}", on_disk["seal"]) and seal.holds(on_disk)
    opened = FileJournal.open(j.run_id)
    opened.require_sealed("rolled back")
    assert "seal" not in opened.host("h1") and "seal" not in opened.meta
    key = next((Path(os.environ["GPUFIX_STATE_DIR"]) / "keys").iterdir())
    assert key.stat().st_mode & 0o777 == 0o600


def test_an_edited_journal_is_not_rolled_back(
    tmp_path: Path, cli: CliRun, dead_inventory: Path, marker: Path, no_ansible: None
) -> None:
    j = _run(tmp_path)
    _forge(j)
    code, _, err = cli("rollback", j.run_id, "h1", "-i", str(dead_inventory))
    assert code == 3 and "not rolled back" in err and "h1.json" in err, err
    assert "not as this controller wrote it" in err
    assert FileJournal.open(j.run_id).host("h1")["state"] == "failed"  # nothing recorded either


def test_a_journal_from_another_controller_is_not_acted_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRun, dead_inventory: Path
) -> None:
    """Sealed, but with another state directory's key: a backup or a ticket's copy."""
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "other"))
    j = _run(tmp_path)
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    FileJournal.start(
        [{"host": "h9", "strategy": "nccl-profile", "steps": []}], plan_digest="d", options={}
    )
    mine = tmp_path / "state" / "runs" / j.run_id
    shutil.copytree(j.path, mine)
    code, _, err = cli("rollback", j.run_id, "h1", "-i", str(dead_inventory))
    assert code == 3 and "run.json" in err and "h1.json" in err, err
    with pytest.raises(InvalidInput, match="not resumed"):
        FileJournal.open(j.run_id).require_sealed("resumed")
    code, out, _ = cli("status", j.run_id, "--json")  # reading it needs no seal
    assert code == 0 and json.loads(out)["hosts"][0]["state"] == "failed"


def test_a_key_another_account_could_read_is_refused(tmp_path: Path) -> None:
    _run(tmp_path)
    key = next((Path(os.environ["GPUFIX_STATE_DIR"]) / "keys").iterdir())
    key.chmod(0o644)
    with pytest.raises(GpufixError, match="not a private file"):
        seal.sealed_copy({"x": 1})


@pytest.mark.parametrize("kind", ["symlink", "fifo", "damaged"])
def test_a_key_that_is_no_private_key_file_is_refused_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    """The key decides what root acts on: a link to a key elsewhere (or to a file another
    account writes), a FIFO another process holds open, or a damaged key is refused with one
    line, never followed, waited on or replaced by a new key."""
    _run(tmp_path)
    key = next((Path(os.environ["GPUFIX_STATE_DIR"]) / "keys").iterdir())
    key.unlink()
    if kind == "symlink":
        other = tmp_path / "elsewhere.key"
        other.write_text("ab" * 32 + "\n")
        other.chmod(0o600)
        key.symlink_to(other)
        want = "is a symbolic link"
    elif kind == "fifo":
        os.mkfifo(key, 0o600)
        want = "not a private file"
    else:
        key.write_text("not a key\n")
        key.chmod(0o600)
        want = "damaged"
    with pytest.raises(GpufixError, match=want):
        seal.sealed_copy({"x": 1})
    assert key.is_symlink() == (kind == "symlink")  # not replaced by a new key


def test_even_a_sealed_journal_writes_back_no_way_in(tmp_path: Path) -> None:
    """Defence in depth behind the seal: the key's owner is root already, but a wrong or old
    record must not leave a set-id file, a file another user owns or move sudo."""
    j = _run(tmp_path)
    rec = j.host("h1")
    rec["before"]["packages"] = {"sudo": "1.8.21p2-3ubuntu1", "nvidia-driver-535": "535.1"}
    rec["after"] = {"packages": {"openssh-server": "1:8.9", "nvidia-driver-535": "535.2"},
                    "holds": ["sudo", "nvidia-driver-535"], "files": {}}  # fmt: skip
    v = rollback_vars(rec)
    assert v["gpufix_rollback_install"] == {"nvidia-driver-535": "535.1"}
    assert v["gpufix_rollback_remove"] == [] and v["gpufix_rollback_unhold"] == [
        "nvidia-driver-535"
    ]
    saved = v["gpufix_rollback_files"][GRUB]
    check_vars("rollback.yml", v, "test")
    for bad, says in (({"mode": "4755"}, ": mode 4755: "), ({"mode": "666"}, ": mode 666: "),
                      ({"uid": 1000}, ": owned by uid 1000: ")):  # fmt: skip
        with pytest.raises(InvalidInput, match=says):
            check_vars("rollback.yml", {"gpufix_rollback_files": {GRUB: {**saved, **bad}}}, "t")
    check_vars("rollback.yml", {"gpufix_rollback_files": {GRUB: {**saved, "gid": 998}}}, "t")
    # a record holding such a file (a host whose file really was 0666): that file stays as the
    # run left it, said in the rollback's record; the rest of the rollback goes on
    rec["before"]["files"][GRUB] = {**rec["before"]["files"][GRUB], "mode": "4755"}
    assert GRUB not in rollback_vars(rec)["gpufix_rollback_files"]
    assert f"{GRUB} (mode 4755) not written back" in files_kept(rec)


def test_the_tracked_packages_are_the_host_checks() -> None:
    source = playbook("host_check.yml").read_text()
    pieces = re.findall(r'r"([^"]*)"', source[source.index("keep = re.compile") :][:400])
    assert "".join(pieces) == hostcheck.TRACKED_PACKAGES.pattern
