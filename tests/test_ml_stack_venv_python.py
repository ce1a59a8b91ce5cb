"""ml_stack refuses a venv made by another Python before any change (roles/ml_stack/tasks/
preflight.yml), run with real ansible-playbook on this machine (check mode: what it refuses
it refuses before any change) against venvs in a temp dir.

A review (2026-12-06): the install's `creates:` kept a venv whatever interpreter made it, so a
plan that chose another Python ran pip in the old one ("No matching distribution"), and a venv
whose python3 went away in a release upgrade failed on every run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from role_check import run_tasks

HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _preflight(tmp: Path, venv: Path) -> subprocess.CompletedProcess[str]:
    return run_tasks(
        tmp,
        "ml_stack",
        "preflight",
        {
            "gpufix_ml_stack_venv": str(venv),
            "gpufix_ml_stack_python": sys.executable,
            "gpufix_ml_stack_check_wheels": False,
            "gpufix_ml_stack_check_driver": False,
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
