"""What a host (or a file beside the inventory) sends back is data, bounded before it is kept or
read: findings of an attack review (2026-12-07). A host check report nested deep enough, with a
key the schema does not know, was journaled and made the whole run unreadable (every host's
rollback and resume refused); a lock holder that was not text crashed every run; a FIFO in an
inventory directory or in place of the host's lock file blocked for good; a NUL in
gpufix_snapshot was an internal error; a GPU name of megabytes took minutes of regex time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufix import runner
from gpufix.apply import hostcheck, hostlock
from gpufix.apply.journal import FileJournal
from gpufix.errors import InvalidInput
from gpufix.inventory import resolve
from gpufix.paths import playbook

from .conftest import CliRun, facts

REPORT = {
    "python": "3.6.9",
    "dpkg": {"locks_held": [], "waited_s": 0, "audit": "", "interrupted": False},
    "disk_mib": {"/": 50000, "/boot": 900},
    "gpu_processes": [],
    "packages": {"nvidia-driver-535": "535.183.01-0ubuntu1"},
    "holds": [],
    "kernel": {"running": "5.4.0-150-generic", "installed": ["5.4.0-150-generic"]},
    "nvidia": {
        "driver_packages": [],
        "dkms_sources": [],
        "prebuilt_packages": [],
        "modules_by_kernel": {},
    },
    "files": {},
}


def test_a_host_check_report_a_journal_could_not_read_back_blocks_the_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    deep: Any = "x"
    for _ in range(60):
        deep = [deep]
    reports = {
        "deep": {**REPORT, "zz_extra": deep},
        "wide": {**REPORT, "zz_extra": "y" * (17 << 20)},
        "odd": {**REPORT, "zz_extra": {"a": 1}},
        "commas": {**REPORT, "packages": {f"p{i}": "," * 199 for i in range(3000)}},
    }
    monkeypatch.setattr(runner, "run_playbook", lambda *_a, **_k: runner.RunResult(
        "x", 0, "successful",
        {h: runner.HostResult(h, data={"gpufix_preflight": r}) for h, r in reports.items()},
    ))  # fmt: skip
    want = {"strategy": "nccl-profile", "kernel_step": False}
    got = hostcheck.run_preflight({h: want for h in reports}, tmp_path / "inv.yml")
    assert [b.check for b in got["deep"].blockers] == ["preflight"]
    assert "nested too deeply" in got["deep"].blockers[0].message
    assert "over 16 MiB" in got["wide"].blockers[0].message
    assert "over 500000 values" in got["commas"].blockers[0].message
    assert got["odd"].ok and "zz_extra" not in got["odd"].report  # known keys only are kept
    # and what is kept, journaled before and after, reads back
    j = FileJournal.start(
        [{"host": "odd", "strategy": "nccl-profile", "steps": []}], plan_digest="d", options={}
    )
    j.update("odd", before=got["odd"].report, after=got["odd"].report)
    assert FileJournal.open(j.run_id).host("odd")["before"] == got["odd"].report


@pytest.mark.parametrize("holder", [5, {"token": "a" * 32}, ["x"], True, 1.5])
def test_a_lock_holder_that_is_not_text_holds_the_host_and_crashes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, holder: object
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    answer = {"taken": False, "holder": holder}
    monkeypatch.setattr(runner, "run_playbook", lambda *_a, **_k: runner.RunResult(
        "x", 0, "successful", {"h1": runner.HostResult("h1", data={"gpufix_host_lock": answer})}
    ))  # fmt: skip
    held, lost = hostlock.HostLock(tmp_path / "inv.yml").take(["h1"])
    assert "unreadable record" in held["h1"] and not lost
    busy, lost, _ = hostlock.HostLock(tmp_path / "inv.yml").peek(["h1"])
    assert "unreadable record" in busy["h1"]


def test_taken_means_true_not_any_truthy_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    answer = {"taken": "no", "holder": None}
    monkeypatch.setattr(runner, "run_playbook", lambda *_a, **_k: runner.RunResult(
        "x", 0, "successful", {"h1": runner.HostResult("h1", data={"gpufix_host_lock": answer})}
    ))  # fmt: skip
    lock = hostlock.HostLock(tmp_path / "inv.yml")
    held, _ = lock.take(["h1"])
    assert lock.taken == [] and "h1" in held


def test_a_fifo_in_place_of_the_hosts_lock_is_not_waited_on(tmp_path: Path) -> None:
    script = yaml.safe_load(playbook("host_lock.yml").read_text())[0]["vars"][
        "__gpufix_host_lock_script"
    ]
    lock = tmp_path / "gpufix" / "apply.lock"
    lock.parent.mkdir()
    os.mkfifo(lock)
    mine = json.dumps({"token": "c" * 32, "owner": "me", "pid": 1})
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", script, "take", str(lock), mine, ""],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    got = json.loads(r.stdout)
    assert not got["taken"] and got["holder"] == "unreadable: not a regular file"
    assert time.monotonic() - t0 < 10


def test_a_fifo_in_an_inventory_directory_is_refused_not_waited_on(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_host: 192.0.2.10\n")
    os.mkfifo(inv / "zz")
    # in a child with a time limit: before the fix, Ansible waited on the FIFO for good
    code = f"from gpufix.inventory import resolve\nresolve('h1', __import__('pathlib').Path({str(inv)!r}))"
    try:
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("resolve() waited on a FIFO in the inventory directory")
    assert "zz is not a regular file" in r.stderr, r.stderr[-2000:]


def test_a_nul_in_a_snapshot_path_is_bad_input(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text('all:\n  hosts:\n    s_nul: {gpufix_snapshot: "a\\u0000b"}\n')
    with pytest.raises(InvalidInput, match="NUL"):
        resolve("s_nul", inv)


def test_a_gpu_name_of_megabytes_is_refused_by_the_schema(tmp_path: Path, cli: CliRun) -> None:
    doc = facts("bionic-hwe-8xa100")
    doc["facts"]["gpus"][0]["name"] = "A" * 300
    path = tmp_path / "f.json"
    path.write_text(json.dumps(doc))
    code, _, err = cli("plan", "x", "--facts", str(path))
    assert code == 3 and "name" in err


@pytest.mark.parametrize(
    "value", ["true; reboot", "{{ lookup('pipe', 'id') }}", 1, ["/var/lib/kubelet"]]
)
def test_a_kubelet_answer_that_is_not_a_boolean_is_refused(
    tmp_path: Path, cli: CliRun, value: Any
) -> None:
    """containers.kubelet (facts module 1.6.0) decides a pod-spec plan: only true, false, null
    or an unknown marker is read; anything else is bad input, exit 3, before any plan."""
    doc = facts("bionic-hwe-8xa100")
    doc["facts"]["containers"]["kubelet"] = value
    path = tmp_path / "f.json"
    path.write_text(json.dumps(doc))
    code, out, err = cli("plan", "x", "--facts", str(path))
    assert code == 3 and "kubelet" in err and out == ""
