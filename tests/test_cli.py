"""The CLI on the example inventory's recorded hosts: output, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOSTS = ROOT / "tests" / "fixtures" / "hosts"


def gpufix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufix", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("gpufix: error:")
    return lines[0]


def test_plan_host01_shows_the_decision() -> None:
    r = gpufix("plan", "host01")
    assert r.returncode == 0, r.stderr  # planning succeeded (terraform's convention)
    out = r.stdout
    for part in (
        "Findings",
        "Decision path",
        "Strategies considered",
        "Chosen strategy: kernel-upgrade",
        "Reboot: yes",
        "still below",
        "Residual risks",
    ):
        assert part in out or part == "Residual risks", part
    assert "linux-generic-hwe-18.04" in out


def test_plan_json_is_json_alone_on_stdout() -> None:
    r = gpufix("plan", "host01", "--json")
    doc = json.loads(r.stdout)
    (plan,) = doc["plans"]
    assert plan["format"] == "gpufix-plan" and plan["host"] == "host01"
    assert plan["strategy"] == "kernel-upgrade"
    assert all(f["source"] for f in plan["findings"])


def test_plan_group_covers_every_host(tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    r = gpufix("plan", "gpu_fleet", "--json", "-o", str(out), "--detailed-exitcode")
    assert r.returncode == 2  # changes proposed
    hosts = {p["host"] for p in json.loads(r.stdout)["plans"]}
    assert hosts == {"host01", "host02", "host03", "host04", "host05", "host07", "host08", "host09"}
    assert len(json.loads(out.read_text())["plans"]) == 8


def test_nothing_to_do_exits_0() -> None:
    r = gpufix("plan", "host06", "--detailed-exitcode")
    assert r.returncode == 0
    assert "Chosen strategy: none" in r.stdout


@pytest.mark.parametrize(("flags", "code"), [((), 0), (("--detailed-exitcode",), 2)])
def test_plan_exit_codes_follow_terraform(flags: tuple[str, ...], code: int) -> None:
    """0 when planning succeeded; 2 for "changes proposed" only when asked, so that
    `gpufix plan host01 && next` works in a shell."""
    assert gpufix("plan", "host01", *flags).returncode == code


def test_offline_plan_from_snapshot() -> None:
    r = gpufix("plan", "whatever", "--facts", str(HOSTS / "jammy-470-torch23.json"), "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["plans"][0]["strategy"] == "cuda-downgrade"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("plan", "nosuchhost"), "no host or group 'nosuchhost'"),
        (("plan", "x", "--facts", "/nonexistent.json"), "/nonexistent.json"),
        (("plan", "host02", "--strategy", "kernel-upgrade"), "not feasible"),
        (("plan", "host01", "--strategy", "reinstall"), "reinstall"),
        (("plan", "host01", "--image", "nvcr.io/nvidia/pytorch:24.04-py3"), "not pinned by digest"),
        (("facts", "nosuchhost"), "nosuchhost"),
        (("diff", "host01", "nosuchhost"), "nosuchhost"),
        (("plan",), "Missing argument"),
    ],
)
def test_bad_input_is_one_line_and_exit_3(args: tuple[str, ...], needle: str) -> None:
    r = gpufix(*args)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert needle in one_line_error(r)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not JSON"),
        ('{"format": "gpufix-facts", "version": 99, "host": "h", "facts": {}}', "version"),
        ('{"format": "something-else", "version": 1}', "format"),
        (
            '{"format": "gpufix-facts", "version": 1, "host": "h", "gathered_at": "x", "facts": {"os": 1}}',
            "",
        ),
    ],
)
def test_bad_snapshots_are_refused(tmp_path: Path, content: str, needle: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = gpufix("plan", "x", "--facts", str(bad))
    assert r.returncode == 3
    assert needle in one_line_error(r)


def test_facts_writes_a_snapshot_that_plans_offline(tmp_path: Path) -> None:
    snap = tmp_path / "h.json"
    assert gpufix("facts", "host03", "-o", str(snap)).returncode == 0
    r = gpufix("plan", "x", "--facts", str(snap), "--json")
    assert json.loads(r.stdout)["plans"][0]["strategy"] == "driver-pin"


def test_diff_puts_the_dependency_chain_first() -> None:
    r = gpufix("diff", "host01", "host03", "--json", "--detailed-exitcode")
    assert r.returncode == 2
    paths = [d["path"] for d in json.loads(r.stdout)]
    assert paths[0].startswith("os")
    assert paths.index("kernel.running") < paths.index("glibc")
    assert any(p.startswith("driver.") for p in paths[:8])


def test_diff_of_a_host_with_itself_is_empty() -> None:
    r = gpufix("diff", "host01", "host01")
    assert r.returncode == 0 and "no differences" in r.stdout


def test_probe_refuses_a_recorded_host() -> None:
    r = gpufix("probe", "host01")
    assert r.returncode == 3
    assert "recorded host" in one_line_error(r)


def test_lint_command_exit_codes_and_sarif(tmp_path: Path) -> None:
    bad = tmp_path / "train.py"
    bad.write_text('import os\nimport torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    good = tmp_path / "ok.py"
    good.write_text('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nimport torch\n')
    assert gpufix("lint", str(good)).returncode == 0
    r = gpufix("lint", "--sarif", str(bad))
    assert r.returncode == 1
    sarif = json.loads(r.stdout)
    assert sarif["version"] == "2.1.0"
    assert (
        sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"]
        == 3
    )
    assert gpufix("lint", str(tmp_path / "missing.py")).returncode == 3


def test_preflight_command_on_a_snapshot() -> None:
    r = gpufix("preflight", "--facts", str(HOSTS / "bionic-mismatch.json"), "--json")
    assert r.returncode == 1  # a driver/library mismatch fails the job's preflight
    report = json.loads(r.stdout)
    assert any(c["status"] == "fail" for c in report["checks"])


def test_probe_localhost_without_gpu_is_not_applicable_and_cpu_self_test_is_healthy() -> None:
    r = gpufix("probe", "localhost", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["localhost"]["verdict"] == "not-applicable"
    r = gpufix("probe", "localhost", "--cpu", "--world-size", "2", "--deadline", "60", "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["localhost"]
    assert v["verdict"] == "healthy" and v["backend"] == "gloo" and v["world_size"] == 2
