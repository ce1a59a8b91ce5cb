"""roles/probe runs as root: an interpreter, venv or PYTHONPATH entry another account can write
is refused before the interpreter is first run (tasks/trust.yml). Real ansible-playbook runs on
this machine (connection=local, as root) against venvs made in tmp_path; the refused ones are
never run, which a marker their `python` would write proves."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from role_check import ROOT, run_playbook

OTHER = 4242  # an account that is not the one the tests run as


def _venv(tmp_path: Path, marker: Path) -> Path:
    """A venv's layout whose python only leaves a marker behind (never a real interpreter)."""
    root = tmp_path / "venv"
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = root / "bin" / "python"
    python.write_text(f"#!/bin/sh\ntouch {marker}\necho 3.11\n")
    python.chmod(0o755)
    for p in (root, root / "bin", root / "lib"):
        p.chmod(0o755)
    return root


def run_tasks(
    tmp_path: Path, role: str, tasks_from: str, vars_: dict
) -> subprocess.CompletedProcess[str]:
    """The role's interpreter choice, then its preflight, in check mode."""
    book = tmp_path / "preflight.yml"
    book.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        + "".join(
            f"    - ansible.builtin.include_role: {{name: {role}, tasks_from: {t}}}\n"
            for t in ("interpreter", tasks_from)
        )
    )
    return run_playbook(tmp_path, book, vars_, check=True)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another account needs root")


@needs_root
@pytest.mark.parametrize(
    "make_unsafe",
    [
        lambda root: os.chown(root, OTHER, OTHER),  # a user's ~/venv
        lambda root: os.chown(root / "bin" / "python", OTHER, OTHER),
        lambda root: (root / "lib").chmod(0o775),  # group-writable: the group runs as root
        lambda root: (root / "pyvenv.cfg").chmod(0o666),
        lambda root: os.chown(root / "pyvenv.cfg", OTHER, OTHER),
    ],
)
def test_another_accounts_environment_is_refused_unrun(tmp_path: Path, make_unsafe: object) -> None:
    marker = tmp_path / "ran"
    root = _venv(tmp_path, marker)
    make_unsafe(root)  # type: ignore[operator]
    r = run_tasks(tmp_path, "probe", "preflight", {"gpufix_probe_python": str(root / "bin/python")})
    assert r.returncode != 0
    assert "not running the probe as root with" in r.stdout, r.stdout[-3000:]
    assert not marker.exists()


@needs_root
def test_a_pythonpath_entry_anyone_can_write_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    root = _venv(tmp_path, marker)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: anyone can drop a torch.py there
    r = run_tasks(
        tmp_path,
        "probe",
        "preflight",
        {"gpufix_probe_python": str(root / "bin/python"), "gpufix_probe_pythonpath": str(shared)},
    )
    assert r.returncode != 0 and f"with {shared}:" in r.stdout, r.stdout[-3000:]
    assert not marker.exists()


@needs_root
def test_roots_own_environment_runs_and_trust_overrides(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    root = _venv(tmp_path, marker)
    python = str(root / "bin/python")
    r = run_tasks(tmp_path, "probe", "preflight", {"gpufix_probe_python": python})
    assert "not running the probe as root" not in r.stdout, r.stdout[-3000:]
    assert marker.exists()  # checked, then run
    marker.unlink()
    os.chown(root, OTHER, OTHER)
    r = run_tasks(
        tmp_path,
        "probe",
        "preflight",
        {"gpufix_probe_python": python, "gpufix_probe_trust_interpreter": True},
    )
    assert "not running the probe as root" not in r.stdout and marker.exists(), r.stdout[-3000:]


@needs_root
def test_the_host_check_reads_it_before_the_change(tmp_path: Path) -> None:
    """playbooks/host_check.yml as apply runs it: the probe's interpreter per host, the probe
    role's PYTHONPATH and consent as its own variables."""
    import json
    import re

    marker = tmp_path / "ran"
    root = _venv(tmp_path, marker)
    os.chown(root, OTHER, OTHER)
    book = tmp_path / "check.yml"
    book.write_text(
        f"- ansible.builtin.import_playbook: {ROOT / 'playbooks' / 'host_check.yml'}\n"
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.debug:\n"
        "        msg: \"U={{ gpufix_preflight.probe_untrusted | default('none') | to_json }}\"\n"
    )
    base = {
        "ansible_become": False,
        "gpufix_preflight_dpkg_wait": 0,
        "gpufix_preflight_probe_check": True,
        "gpufix_preflight_probe_python": {"localhost": str(root / "bin" / "python")},
    }
    for extra, want in (
        ({}, [{"path": str(root), "why": f"owned by uid {OTHER}"}]),
        ({"gpufix_probe_trust_interpreter": True}, "none"),
    ):
        r = run_playbook(tmp_path, book, {**base, **extra}, check=True)
        assert r.returncode == 0, r.stdout[-3000:]
        found = re.search(r'"msg": "U=(.*)"\n', r.stdout)
        assert found and json.loads(json.loads(f'"{found.group(1)}"')) == want, r.stdout[-2000:]
    assert not marker.exists()


@needs_root
def test_the_role_and_the_host_check_flag_the_same_paths(tmp_path: Path) -> None:
    """The rule is written twice, in Jinja (tasks/trust.yml: before the probe runs) and in the
    host check's Python (before apply changes anything): one sample set, one answer."""
    import json
    import re
    import sys

    import yaml

    script = yaml.safe_load((ROOT / "playbooks" / "host_check.yml").read_text())[0]["vars"][
        "__gpufix_preflight_script"
    ]
    cases = {
        "root's": lambda root: None,
        "owner": lambda root: os.chown(root, OTHER, OTHER),
        "group": lambda root: (root / "lib").chmod(0o775),
        "world": lambda root: (root / "bin").chmod(0o777),
        "python": lambda root: os.chown(root / "bin" / "python", OTHER, OTHER),
    }
    for name, make in cases.items():
        case = tmp_path / name
        case.mkdir()
        root = _venv(case, case / "ran")
        make(root)
        python = str(root / "bin" / "python")
        r = run_tasks(case, "probe", "preflight", {"gpufix_probe_python": python})
        found = re.search(r"not running the probe as root with (.*?): an account", r.stdout)
        role = set(found.group(1).split(", ")) if found else set()
        probe = json.dumps({"check": True, "python": python, "pythonpath": ""})
        out = subprocess.run(
            [sys.executable, "-c", script, "0", "[]", "true", "1", "10", str(case / "v"), probe],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        check = {u["path"] for u in json.loads(out.stdout)["probe_untrusted"]}
        assert role == check, name
        assert bool(role) is (name != "root's"), name
