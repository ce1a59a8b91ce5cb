"""Which installed packages playbooks/host_check.yml records: what a strategy's roles install, so
rollback (gpufix.apply.rollback) can remove what a change added. Runs the playbook's own script
with stub dpkg-query, dpkg and apt-mark first on PATH, printing a recorded bionic host."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpufix import runner, schema_check
from gpufix.apply import hostcheck
from gpufix.apply.rolevars import check_vars
from gpufix.errors import InvalidInput
from gpufix.inputs import schema_errors
from role_check import run_playbook

ROOT = Path(__file__).resolve().parent.parent

# dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Abbrev}\n' on a bionic host after a
# DKMS driver install (dkms and pciutils as the driver and pcie_acs roles pull them in).
ROWS = [
    ("bash", "4.4.18-2ubuntu1.3", "ii"),
    ("dkms", "2.3-3ubuntu9.7", "ii"),
    ("libpci3", "1:3.5.2-1ubuntu1.1", "ii"),
    ("pciutils", "1:3.5.2-1ubuntu1.1", "ii"),
    ("nvidia-dkms-535", "535.183.01-0ubuntu0.18.04.1", "ii"),
    ("nvidia-driver-535", "535.183.01-0ubuntu0.18.04.1", "hi"),
    ("linux-headers-5.4.0-150-generic", "5.4.0-150.167~18.04.1", "ii"),
    ("dkms-helper", "1.0", "ii"),
    ("xpciutils", "1.0", "ii"),
    ("old-removed", "1.0", "rc"),
]
# How the check records a file root owns (the tests run as root, as the check does).
ROOTS = {"uid": 0, "gid": 0, "owner": "root", "group": "root"}
# ${db:Status-Abbrev} is three characters: the third (error flag) is a space when all is well.
DPKG_QUERY = "".join(f"{name}\t{version}\t{status} \n" for name, version, status in ROWS)


def _script() -> str:
    plays = yaml.safe_load((ROOT / "playbooks" / "host_check.yml").read_text())
    script: str = plays[0]["vars"]["__gpufix_preflight_script"]
    return script


def _stub(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_the_packages_a_change_can_add_are_recorded(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "dpkg-query.out").write_text(DPKG_QUERY)
    _stub(bindir, "dpkg-query", f"cat '{tmp_path}/dpkg-query.out'\n")
    _stub(bindir, "dpkg", "exit 0\n")
    _stub(bindir, "apt-mark", "echo nvidia-driver-535\n")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    out = subprocess.run(
        [sys.executable, "-c", _script(), "0", "[]", "echo 5.4.0-150-generic", "30",
         str(hostcheck.SAVE_LIMIT), str(tmp_path / "venv")],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    report = json.loads(out.stdout)
    assert sorted(report["packages"]) == [
        "dkms",
        "linux-headers-5.4.0-150-generic",
        "nvidia-dkms-535",
        "nvidia-driver-535",
        "pciutils",
    ]
    assert report["holds"] == ["nvidia-driver-535"]


def _run_script(
    tmp_path: Path,
    files: list[str],
    smi: str | None,
    smi_timeout: str = "30",
    save_limit: int = hostcheck.SAVE_LIMIT,
    venv: Path | None = None,
    probe: dict | None = None,
) -> dict:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    _stub(bindir, "dpkg-query", "exit 0\n")
    _stub(bindir, "dpkg", "exit 0\n")
    _stub(bindir, "apt-mark", "exit 0\n")
    if smi is not None:
        _stub(bindir, "nvidia-smi", smi)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    out = subprocess.run(
        [sys.executable, "-c", _script(), "0", json.dumps(files), "echo 5.4.0-150-generic", smi_timeout,
         str(save_limit), str(venv or tmp_path / "no-venv"), json.dumps(probe or {})],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    report: dict = json.loads(out.stdout)
    return report


def test_a_file_too_large_to_save_whole_is_not_saved_in_part(tmp_path: Path) -> None:
    """Rollback writes a saved file back as the whole file: one cut at the limit would come back
    corrupted. Over the limit the check records the size only, and the host is refused."""
    small, large = tmp_path / "nccl.conf", tmp_path / "daemon.json"
    small.write_text("NCCL_P2P_DISABLE=1\n")
    large.write_bytes(b"x" * (hostcheck.SAVE_LIMIT + 1))
    report = _run_script(tmp_path, [str(small), str(large), str(tmp_path / "absent")], smi=None)
    files = report["files"]
    assert files[str(small)]["content_b64"] == "TkNDTF9QMlBfRElTQUJMRT0xCg=="
    assert files[str(large)] == {
        "exists": True, "mode": "644", "size": hostcheck.SAVE_LIMIT + 1, **ROOTS
    }  # fmt: skip
    assert files[str(tmp_path / "absent")] == {"exists": False}
    pf = hostcheck.evaluate("h1", report, strategy="nccl-profile", kernel_step=False)
    assert [b.check for b in pf.blockers] == ["file-too-large"], pf.blockers
    assert str(large) in pf.summary() and "256 KiB" in pf.summary()


def test_the_save_limit_is_the_controllers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One limit: gpufix passes hostcheck.SAVE_LIMIT to the play, the play's default (for runs
    by hand) is the same number, and the script saves up to the limit it is given, no more."""
    play = yaml.safe_load((ROOT / "playbooks" / "host_check.yml").read_text())[0]
    default = re.fullmatch(
        r"\{\{ gpufix_preflight_save_limit \| default\(([0-9]+)\) \}\}",
        play["vars"]["__gpufix_preflight_save_limit"],
    )
    assert default and int(default.group(1)) == hostcheck.SAVE_LIMIT
    seen: dict = {}

    def fake_run_playbook(playbook: str, inventory: Path, **kwargs: object) -> runner.RunResult:
        seen.update(playbook=playbook, extravars=kwargs["extravars"])
        return runner.RunResult(ident="x", rc=0, status="successful", hosts={})

    monkeypatch.setattr(runner, "run_playbook", fake_run_playbook)
    hostcheck.run_preflight({"h1": {"strategy": "nccl-profile", "files": []}}, tmp_path / "inv")
    assert seen["playbook"] == "host_check.yml"
    assert seen["extravars"]["gpufix_preflight_save_limit"] == hostcheck.SAVE_LIMIT
    check_vars("host_check.yml", seen["extravars"], "test")

    at, over = tmp_path / "at", tmp_path / "over"
    at.write_bytes(b"0123456789")
    over.write_bytes(b"0123456789a")
    files = _run_script(tmp_path, [str(at), str(over)], smi=None, save_limit=10)["files"]
    assert files[str(at)]["content_b64"] == "MDEyMzQ1Njc4OQ=="
    assert files[str(over)] == {"exists": True, "mode": "644", "size": 11, **ROOTS}


def test_gpufix_venv_is_recorded_for_rollback(tmp_path: Path) -> None:
    """Whether gpufix's own venv (roles/ml_stack) was there before a change, and its stack, read
    from the dist-info names (the venv's Python is never run): rollback removes a venv the change
    created and says what it left of one the change moved (gpufix.apply.rollback)."""
    venv = tmp_path / "opt" / "gpufix" / "venv"
    assert _run_script(tmp_path, [], smi=None, venv=venv)["ml_venv"] == {
        "path": str(venv), "exists": False
    }  # fmt: skip
    site = venv / "lib" / "python3.6" / "site-packages"
    for name in ("torch-1.12.1+cu113", "transformers-4.30.2", "accelerate-0.20.3", "numpy-1.19.5"):
        (site / f"{name}.dist-info").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to("/usr/bin/python3.6")  # dangling here: still there
    got = _run_script(tmp_path, [], smi=None, venv=venv)["ml_venv"]
    assert got == {
        "path": str(venv),
        "exists": True,
        "stack": {"torch": "1.12.1+cu113", "transformers": "4.30.2", "accelerate": "0.20.3"},
    }
    full = json.loads((ROOT / "controller/gpufix/schemas/journal-host.schema.json").read_text())
    hoststate = schema_check.validator({**full["$defs"]["hoststate"], "$defs": full["$defs"]})
    assert not list(hoststate.iter_errors({"ml_venv": got}))
    assert list(hoststate.iter_errors({"ml_venv": {**got, "stack": {"torch": 1}}}))
    # what the host reports is data with a shape (host-check.schema.json)
    report = _run_script(tmp_path, [], smi=None, venv=venv)
    assert not schema_errors(report, "host-check")
    for bad in ({"torch": "1.0\n"}, {"numpy": "1.0"}, {"torch": "{{ 7*7 }}"}):
        assert schema_errors({**report, "ml_venv": {**got, "stack": bad}}, "host-check"), bad


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another account needs root")
def test_the_probes_interpreter_is_read_before_the_change(tmp_path: Path) -> None:
    """The probe that verifies a change runs as root: an interpreter another account can write
    blocks the host before anything changes (roles/probe/tasks/trust.yml refuses it too, but
    only after the change)."""
    env = tmp_path / "home" / "alice" / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "lib").mkdir()
    (env / "bin" / "python").write_text("")
    for p in (env, env / "bin", env / "lib"):
        p.chmod(0o755)
    probe = {"check": True, "python": str(env / "bin" / "python"), "pythonpath": ""}
    assert _run_script(tmp_path, [], smi=None, probe=probe)["probe_untrusted"] == []
    os.chown(env, 4242, 4242)
    (env / "lib").chmod(0o775)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    report = _run_script(tmp_path, [], smi=None, probe={**probe, "pythonpath": str(shared)})
    assert report["probe_untrusted"] == [
        {"path": str(env), "why": "owned by uid 4242"},
        {"path": str(env / "lib"), "why": "group-writable"},
        {"path": str(shared), "why": "group-writable, world-writable"},
    ]
    assert not schema_errors(report, "host-check")
    pf = hostcheck.evaluate("h1", report, strategy="nccl-profile", kernel_step=False)
    assert [b.check for b in pf.blockers] == ["probe-interpreter"]
    assert "owned by uid 4242" in pf.summary() and "gpufix_probe_trust_interpreter" in pf.summary()
    # consent, or no probe to follow: nothing read, nothing blocked
    assert "probe_untrusted" not in _run_script(
        tmp_path, [], smi=None, probe={**probe, "trust": True}
    )
    assert "probe_untrusted" not in _run_script(tmp_path, [], smi=None)


def test_apply_asks_the_host_check_for_the_probes_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict = {}

    def fake_run_playbook(playbook: str, inventory: Path, **kwargs: object) -> runner.RunResult:
        seen.update(extravars=kwargs["extravars"])
        return runner.RunResult(ident="x", rc=0, status="successful", hosts={})

    monkeypatch.setattr(runner, "run_playbook", fake_run_playbook)
    hosts = {
        "h1": {"strategy": "nccl-profile", "probe_python": "/opt/venvs/train/bin/python"},
        "h2": {"strategy": "nccl-profile", "probe_python": "python3"},  # PATH's: root's own
    }
    probe_vars = {"gpufix_probe_pythonpath": "/opt/lib", "gpufix_probe_deadline": 60}
    hostcheck.run_preflight(hosts, tmp_path / "inv", probe_vars=probe_vars)
    ev = seen["extravars"]
    assert ev["gpufix_preflight_probe_check"] is True
    assert ev["gpufix_preflight_probe_python"] == {"h1": "/opt/venvs/train/bin/python"}
    assert ev["gpufix_probe_pythonpath"] == "/opt/lib" and "gpufix_probe_deadline" not in ev
    check_vars("host_check.yml", ev, "test")
    with pytest.raises(InvalidInput):
        check_vars("host_check.yml", {"gpufix_preflight_probe_python": {"h1": "$(id)"}}, "test")
    hostcheck.run_preflight(hosts, tmp_path / "inv")  # no probe follows (--no-verify)
    assert "gpufix_preflight_probe_check" not in seen["extravars"]


@pytest.mark.parametrize("value", [0, 300001, -1, "262144", "{{ 7 * 7 }}", True, 1.5])
def test_the_save_limit_is_a_number_in_range(value: object) -> None:
    """What a journal can hold (content_b64 of at most 400000 characters: 300000 bytes)."""
    with pytest.raises(InvalidInput, match="gpufix_preflight_save_limit"):
        check_vars("host_check.yml", {"gpufix_preflight_save_limit": value}, "test")
    check_vars("host_check.yml", {"gpufix_preflight_save_limit": 300000}, "test")


@pytest.mark.parametrize("value", ["10; touch X", "0", "300001", "1.5"])
def test_a_run_by_hand_checks_the_save_limit_before_the_script(tmp_path: Path, value: str) -> None:
    """Real ansible-playbook on this machine (read-only): a bad limit stops the play at its
    assert, before the script runs."""
    out = run_playbook(
        tmp_path,
        ROOT / "playbooks" / "host_check.yml",
        {"gpufix_preflight_save_limit": value, "ansible_become": False},
        check=False,
    )
    assert out.returncode != 0
    assert "must be an integer from 1 to 300000" in out.stdout, out.stdout[-2000:]
    assert "Check locks, dpkg state" not in out.stdout


def test_a_run_by_hand_passes_the_limit_to_the_script(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"x" * 11)
    result = tmp_path / "report.json"
    book = tmp_path / "book.yml"
    book.write_text(
        f"- ansible.builtin.import_playbook: {ROOT / 'playbooks' / 'host_check.yml'}\n"
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.copy:\n"
        "        content: '{{ gpufix_preflight | to_json }}'\n"
        f"        dest: {result}\n"
        "        mode: '0600'\n"
    )
    out = run_playbook(
        tmp_path,
        book,
        {
            "gpufix_preflight_save_limit": 10,
            "gpufix_preflight_files": [str(small)],
            "gpufix_preflight_dpkg_wait": 0,
            "ansible_become": False,
        },
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads(result.read_text())
    saved = report["files"][str(small)]
    assert saved == {"exists": True, "mode": "644", "size": 11, **ROOTS}
    assert schema_errors(report, "host-check") == []  # a real host's report fits the schema


def test_the_script_s_reports_fit_the_schema(tmp_path: Path) -> None:
    """With GPU processes listed, with nvidia-smi failing, with files saved and absent."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_P2P_DISABLE=1\n")
    listing = "echo '4242, python3, 1201'; echo '4243, /usr/bin/python3 train.py, 80'\n"
    for smi in (listing, "echo 'NVIDIA-SMI has failed' >&2; exit 9\n", None):
        report = _run_script(tmp_path, [str(conf), str(tmp_path / "absent")], smi=smi)
        assert schema_errors(report, "host-check") == [], report


def _preflight_of(report: object, monkeypatch: pytest.MonkeyPatch) -> hostcheck.Preflight:
    """run_preflight on what a host reported (the play's run replaced by its result)."""
    hr = runner.HostResult("h1", data={"gpufix_preflight": report})
    result = runner.RunResult(ident="x", rc=0, status="successful", hosts={"h1": hr})
    monkeypatch.setattr(runner, "run_playbook", lambda *a, **k: result)
    want = {"h1": {"strategy": "nccl-profile", "files": []}}
    return hostcheck.run_preflight(want, Path("inv"))["h1"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpu_processes": ["x"]}, "gpu_processes"),  # was an internal error (AttributeError)
        ({"packages": {"nvidia-driver-535": 535}}, "packages/nvidia-driver-535"),
        ({"dpkg": {"locks_held": "all"}}, "dpkg"),
        ({"files": {"/etc/nccl.conf": {"exists": True, "mode": "0644; rm"}}}, "mode"),
        (None, "(document)"),  # {"python": "3.8"} alone passed every check
    ],
)
def test_a_report_that_breaks_the_schema_blocks_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict | None, field: str
) -> None:
    good = _run_script(tmp_path, [], smi=None)
    report = {**good, **change} if change else {"python": "3.8.10"}
    pf = _preflight_of(report, monkeypatch)
    assert [b.check for b in pf.blockers] == ["preflight"] and pf.report == {}
    assert pf.summary().startswith("unusable host check report: ") and field in pf.summary()
    assert _preflight_of(good, monkeypatch).ok


def test_owner_and_group_are_recorded(tmp_path: Path) -> None:
    """By number (what rollback puts back) and, where the host knows them, by name; an id with
    no name (a user since removed) is recorded by number alone."""
    mine, orphan = tmp_path / "daemon.json", tmp_path / "grub"
    mine.write_text("{}\n")
    orphan.write_text("GRUB_DEFAULT=0\n")
    os.chown(orphan, 4242, 4343)
    orphan.chmod(0o640)
    files = _run_script(tmp_path, [str(mine), str(orphan)], smi=None)["files"]
    assert files[str(mine)] == {"exists": True, "mode": "644", "content_b64": "e30K", **ROOTS}
    assert files[str(orphan)] == {
        "exists": True, "mode": "640", "content_b64": "R1JVQl9ERUZBVUxUPTAK",
        "uid": 4242, "gid": 4343,
    }  # fmt: skip


def test_a_wedged_nvidia_smi_is_bounded(tmp_path: Path) -> None:
    """nvidia-smi that never answers (a GPU fallen off the bus) costs the timeout, then a warning."""
    report = _run_script(tmp_path, [], smi="exec sleep 600\n", smi_timeout="1")
    assert report["gpu_processes"] == {"unknown": "nvidia-smi rc 124: no answer in 1 s"}
    pf = hostcheck.evaluate("h1", report, strategy="nccl-profile", kernel_step=False)
    assert pf.ok and "could not list GPU processes" in pf.warnings[0]
    # Killed but its output still open (as a process stuck in the driver, which SIGKILL ends only
    # when it leaves the driver: here a child holds the pipes for 90 s): no wait for the pipes.
    held = _run_script(tmp_path, [], smi="sleep 90 &\nexec sleep 600\n", smi_timeout="1")
    assert held["gpu_processes"] == {"unknown": "nvidia-smi rc 124: no answer in 1 s"}
    listed = _run_script(tmp_path, [], smi="echo '4242, python3, 1024'\n")
    assert listed["gpu_processes"] == [{"pid": "4242", "name": "python3", "used_mib": "1024"}]


def test_the_script_runs_on_every_python_the_host_check_accepts(tmp_path: Path) -> None:
    """ansible-core 2.16 manages Python 2.7 and 3.6+ targets (gpufix.apply.hostcheck), and this
    script runs on the target's own interpreter: vermin checks it against both."""
    script = tmp_path / "host_check.py"
    script.write_text(_script())
    vermin = Path(sys.executable).parent / "vermin"
    out = subprocess.run(
        [str(vermin), "-t=2.7-", "-t=3.6-", "--no-tips", "--violations", str(script)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
