"""A GPU nvidia-smi could not reach (driver.gpu_errors, facts module 1.3.0) is an error finding
through the real CLI; the field is data the schema checks, like every other fact."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

HOST = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "focal-4x4090.json"
LOST = {"pci_bus_id": "0000:0a:00.0", "message": "GPU is lost", "rc": 15}


def _plan(
    tmp_path: Path, errors: object, *, field: str = "gpu_errors", as_json: bool = True
) -> subprocess.CompletedProcess[str]:
    doc = json.loads(HOST.read_text())
    snap = copy.deepcopy(doc)
    snap["facts"]["gpus"] = snap["facts"]["gpus"][:3]  # nvidia-smi printed the other three
    snap["facts"]["driver"][field] = errors
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    cmd = [sys.executable, "-m", "gpufix", "plan", "h1", "--facts", str(path)]
    cmd += ["--json"] if as_json else []
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_a_lost_gpu_is_an_error_finding_naming_it(tmp_path: Path) -> None:
    r = _plan(tmp_path, [LOST])
    assert r.returncode == 0, r.stderr
    (plan,) = json.loads(r.stdout)["plans"]
    (f,) = [f for f in plan["findings"] if f["id"] == "gpu-unreachable"]
    assert f["severity"] == "error"
    assert "0000:0a:00.0 (GPU is lost, exit 15)" in f["message"]
    assert f["evidence"]["driver.gpu_errors"] == [LOST]
    assert "nvml-api" in f["source"]


def test_no_errors_no_finding(tmp_path: Path) -> None:
    r = _plan(tmp_path, [])
    (plan,) = json.loads(r.stdout)["plans"]
    assert "gpu-unreachable" not in [f["id"] for f in plan["findings"]]


@pytest.mark.parametrize(
    "errors",
    [
        [{**LOST, "pci_bus_id": "0a:00.0; reboot"}],
        [{**LOST, "extra": 1}],
        [{"pci_bus_id": "0000:0a:00.0", "rc": 15}],
        [{**LOST, "rc": "15"}],
        "GPU is lost",
    ],
)
def test_a_malformed_gpu_errors_fact_is_refused_in_one_line(tmp_path: Path, errors: object) -> None:
    r = _plan(tmp_path, errors)
    assert r.returncode == 3, r.stdout
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_host_s_gpu_error_text_is_shown_as_text(tmp_path: Path) -> None:
    """The message is nvidia-smi's output, from the host: terminal escapes and line breaks are
    shown escaped (no fake lines in the plan), and Jinja in it is never run."""
    text = "\x1b[31mlost\ngpufix: all good {{ lookup('pipe', 'id') }}"
    r = _plan(tmp_path, [{**LOST, "message": text}], as_json=False)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\ngpufix: all good" not in r.stdout
    line = next(ln for ln in r.stdout.splitlines() if "gpu-unreachable" in ln)
    assert "\\x1b[31mlost\\ngpufix: all good {{ lookup('pipe', 'id') }}" in line


@pytest.mark.parametrize(
    "entries",
    [
        [{"module": "nvidia; rm -rf /", "path": "/etc/modprobe.d/x.conf"}],
        [{"module": "nvidia", "path": "/etc/modprobe.d/x.conf", "extra": 1}],
        [{"module": "nvidia"}],
    ],
)
def test_a_malformed_modprobe_blacklist_fact_is_refused(tmp_path: Path, entries: object) -> None:
    r = _plan(tmp_path, entries, field="modprobe_blacklist")
    assert r.returncode == 3, r.stdout
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
