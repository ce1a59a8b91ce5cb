"""Run every molecule scenario under molecule/ (one test each), against real podman containers.

Select with `pytest -m molecule`. Without podman the tests skip, unless GPUFIX_REQUIRE_PODMAN is
set (CI sets it), in which case they fail: CI must never pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MOLECULE_DIR = ROOT / "molecule"
# One scenario takes ~1 min; a hung container must not hang the suite.
TIMEOUT_S = int(os.environ.get("GPUFIX_MOLECULE_TIMEOUT", "900"))


def scenarios() -> list[str]:
    return sorted(
        p.parent.name
        for p in MOLECULE_DIR.glob("*/molecule.yml")
        if not p.parent.name.startswith("_")
    )


def _venv_bin() -> Path:
    return Path(sys.executable).parent


def test_scenarios_found() -> None:
    assert scenarios(), "no molecule scenarios under molecule/"


@pytest.mark.molecule
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("scenario", scenarios())
def test_scenario(scenario: str) -> None:
    if shutil.which("podman") is None:
        if os.environ.get("GPUFIX_REQUIRE_PODMAN"):
            pytest.fail("podman is required (GPUFIX_REQUIRE_PODMAN is set) but not on PATH")
        pytest.skip("podman not installed; set GPUFIX_REQUIRE_PODMAN to make this a failure")
    molecule = _venv_bin() / "molecule"
    if not molecule.exists():
        molecule = Path(shutil.which("molecule") or "molecule")
    env = dict(os.environ)
    # molecule shells out to ansible-config and friends: the venv's bin must come first.
    env["PATH"] = f"{_venv_bin()}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("NO_COLOR", "1")
    env.setdefault("PY_COLORS", "0")
    proc = subprocess.run(
        [str(molecule), "test", "-s", scenario],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-80:])
    assert proc.returncode == 0, (
        f"molecule test -s {scenario} failed (rc {proc.returncode}):\n{tail}"
    )
