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

import containers
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
MOLECULE_DIR = ROOT / "molecule"
SHARED_CONFIG = ROOT / ".config" / "molecule" / "config.yml"
# A scenario takes 2-10 min on two shared cores (scripts/test.sh runs two at once beside the
# rest); a hung container must still not hang the suite.
TIMEOUT_S = int(os.environ.get("GPUFIX_MOLECULE_TIMEOUT", "2400"))


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


def repeated_settings(shared: dict, scenario: dict, path: str = "") -> list[str]:
    """Settings a scenario file repeats with the shared config's value (molecule merges the
    scenario over the shared config, so a repeated value says nothing)."""
    out = []
    for key, value in scenario.items():
        here = f"{path}.{key}" if path else key
        if key not in shared:
            continue
        if isinstance(value, dict) and isinstance(shared[key], dict):
            out += repeated_settings(shared[key], value, here)
        elif value == shared[key]:
            out.append(here)
    return out


@pytest.mark.parametrize("scenario", scenarios())
def test_scenario_file_holds_only_what_differs(scenario: str) -> None:
    shared = yaml.safe_load(SHARED_CONFIG.read_text())
    own = yaml.safe_load((MOLECULE_DIR / scenario / "molecule.yml").read_text()) or {}
    assert repeated_settings(shared, own) == []


def test_prebuilt_module_in_the_fixture_spec_is_fake_kmods_output() -> None:
    # tests/fixtures/aptrepo/specs/kernel.yml carries the bytes molecule/_shared/fake_kmod.py
    # writes (kmod's modinfo reads them); the two must not drift apart.
    sys.path.insert(0, str(MOLECULE_DIR / "_shared"))
    try:
        from fake_kmod import module  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    spec = yaml.safe_load((ROOT / "tests/fixtures/aptrepo/specs/kernel.yml").read_text())
    (pkg,) = [
        p
        for p in spec["packages"]
        if p.get("name", "").startswith("linux-modules-nvidia-") and "files" in p
    ]
    (content,) = [f["content"] for f in pkg["files"].values()]
    want = module("535.183.01", "5.4.0-150-generic", "Canonical Ltd. Kernel Module Signing")
    assert content.encode() == want


def test_repeated_settings_finds_a_copied_block() -> None:
    shared = {"driver": {"name": "podman"}, "verifier": {"name": "testinfra", "x": 1}}
    own = {"driver": {"name": "podman"}, "verifier": {"name": "testinfra", "x": 2}}
    assert repeated_settings(shared, own) == ["driver.name", "verifier.name"]


@pytest.mark.molecule
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("scenario", scenarios())
def test_scenario(scenario: str) -> None:
    if shutil.which("podman") is None:
        containers.unavailable("podman not installed")
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
    lines = (proc.stdout + proc.stderr).splitlines()
    # The failing task sits in ansible's output, well before molecule's own summary: name the
    # last failures (a scenario's expected refusals print some too) before the tail.
    failures = [x for x in lines if "fatal:" in x or "FAILED!" in x or "UNREACHABLE!" in x][-5:]
    tail = "\n".join(lines[-80:])
    assert proc.returncode == 0, (
        f"molecule test -s {scenario} failed (rc {proc.returncode}):\n"
        + "\n".join(failures)
        + f"\n...\n{tail}"
    )
