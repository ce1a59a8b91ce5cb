"""ml_stack refuses a venv made by another Python before any change (roles/ml_stack/tasks/
preflight.yml), run with real ansible-playbook on this machine against venvs in a temp dir.

A review (2026-12-06): the install's `creates:` kept a venv whatever interpreter made it, so a
plan that chose another Python ran pip in the old one ("No matching distribution"), and a venv
whose python3 went away in a release upgrade failed on every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _preflight(tmp: Path, venv: Path) -> subprocess.CompletedProcess[str]:
    book = tmp / "preflight.yml"
    task = {"ansible.builtin.include_role": {"name": "ml_stack", "tasks_from": "preflight"}}
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "tasks": [task]}]))
    ev = {
        "ansible_python_interpreter": sys.executable,
        "gpufix_ml_stack_venv": str(venv),
        "gpufix_ml_stack_python": sys.executable,
        "gpufix_ml_stack_check_wheels": False,
        "gpufix_ml_stack_check_driver": False,
    }
    (tmp / "vars.json").write_text(json.dumps(ev))
    bindir = Path(sys.executable).parent
    return subprocess.run(
        [
            str(bindir / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(book),
            "-e",
            f"@{tmp / 'vars.json'}",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env={
            **os.environ,
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        },
    )


def _venv(tmp: Path, python: str | None) -> Path:
    """A venv whose bin/python is a stand-in printing `python`'s version, or a dangling link."""
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    exe = venv / "bin" / "python"
    if python is None:
        exe.symlink_to(tmp / "gone" / "python3")
    else:
        exe.write_text(f"#!/bin/sh\necho {python}\n")
        exe.chmod(0o755)
    return venv


@pytest.mark.parametrize(
    ("python", "says"),
    [("3.6", "runs Python 3.6, but this plan installs for"), (None, "runs no Python")],
)
def test_a_venv_of_another_python_is_refused_before_any_change(
    tmp_path: Path, python: str | None, says: str
) -> None:
    venv = _venv(tmp_path, python)
    before = sorted(p.name for p in (venv / "bin").iterdir())
    res = _preflight(tmp_path, venv)
    assert res.returncode != 0, res.stdout[-1500:]
    out = " ".join(res.stdout.split())
    assert says in out and "Nothing was changed" in out, out[-1500:]
    assert sorted(p.name for p in (venv / "bin").iterdir()) == before


def test_a_venv_of_the_same_python_or_none_passes(tmp_path: Path) -> None:
    assert _preflight(tmp_path, tmp_path / "absent").returncode == 0
    res = _preflight(tmp_path, _venv(tmp_path, HERE))
    assert res.returncode == 0, res.stdout[-1500:]
