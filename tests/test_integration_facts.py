"""Facts from a real podman container through ansible-runner, then a plan from them.

The container is the locally built "Debian userland with a bionic identity" image
(tests/images/build.sh). A stub nvidia-smi copied in prints recorded output of a 4x RTX 4090
host, so the GPU parsers run on the real module path; everything else is what the container is.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import containers
import pytest

ROOT = Path(__file__).resolve().parents[1]
IMAGE = containers.IMAGE
OUTPUTS = ROOT / "tests" / "fixtures" / "tool_outputs"
GPUFIX = [str(ROOT / ".venv" / "bin" / "gpufix")]

pytestmark = pytest.mark.integration


def _podman_ready() -> bool:
    if not shutil.which("podman"):
        return False
    return subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode == 0


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    if not _podman_ready():
        containers.unavailable(f"podman or {IMAGE} missing (run tests/images/build.sh)")
    name = f"gpufix-it-{uuid.uuid4().hex[:8]}"
    containers.start(name, IMAGE)
    try:
        stub = tmp_path_factory.mktemp("stub") / "nvidia-smi"
        stub.write_text(
            "#!/bin/sh\n"
            "# stand-in for nvidia-smi: recorded output of a 4x RTX 4090 host\n"
            'case "$*" in\n'
            f"  *topo*-p2p*) cat <<'EOF'\n{(OUTPUTS / 'p2p_r_4x4090.txt').read_text()}EOF\n;;\n"
            f"  *topo*) cat <<'EOF'\n{(OUTPUTS / 'topo_4x4090_plx.txt').read_text()}EOF\n;;\n"
            f"  *query-gpu*) cat <<'EOF'\n{(OUTPUTS / 'query_4x4090.csv').read_text()}EOF\n;;\n"
            "  *query-compute-apps*) ;;\n"
            "  *) echo 'NVIDIA-SMI stub'; exit 0;;\n"
            "esac\n"
        )
        stub.chmod(0o755)
        subprocess.run(["podman", "cp", str(stub), f"{name}:/usr/bin/nvidia-smi"], check=True)
        inv = tmp_path_factory.mktemp("inv") / "hosts.yml"
        inv.write_text(
            "all:\n  hosts:\n"
            f"    {name}:\n"
            "      ansible_connection: containers.podman.podman\n"
            "      ansible_python_interpreter: /usr/bin/python3\n"
            "    gone-host:\n"
            "      ansible_connection: containers.podman.podman\n"
            "      ansible_host: gpufix-it-does-not-exist\n"
        )
        yield name, inv
    finally:
        containers.remove(name)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPUFIX, *args], capture_output=True, text=True, timeout=180, check=False
    )


def test_facts_from_a_real_container(container: tuple[str, Path]) -> None:
    name, inv = container
    r = run("facts", name, "-i", str(inv))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    f = doc["facts"]
    assert doc["host"] == name
    assert f["os"]["codename"] == "bionic" and f["os"]["version_id"] == "18.04"
    assert len(f["gpus"]) == 4 and f["gpus"][0]["compute_capability"] == "8.9"
    assert f["topology"]["worst"] in ("PIX", "PXB")
    assert f["containers"]["in_container"] is True
    # what the container cannot know is unknown with a reason, never a crash
    assert "unknown" in f["driver"]["kernel_module"]


def test_plan_from_live_facts(container: tuple[str, Path], tmp_path: Path) -> None:
    name, inv = container
    out = tmp_path / "plan.json"
    r = run("plan", name, "-i", str(inv), "--json", "-o", str(out))
    assert r.returncode in (0, 2), r.stderr
    plan = json.loads(r.stdout)["plans"][0]
    assert plan["host"] == name
    assert {o["strategy"] for o in plan["options"]} >= {"kernel-upgrade", "cuda-downgrade", "none"}
    assert json.loads(out.read_text())["plans"][0]["facts_digest"] == plan["facts_digest"]


def test_unreachable_host_is_one_line_and_exit_4(container: tuple[str, Path]) -> None:
    _, inv = container
    r = run("facts", "gone-host", "-i", str(inv))
    assert r.returncode == 4
    assert r.stderr.strip().count("\n") == 0 and "gone-host" in r.stderr
    assert "Traceback" not in r.stderr


def test_plan_with_probe_runs_the_probe_on_the_host(container: tuple[str, Path]) -> None:
    """`gpufix plan HOST --probe` ships the probe through ansible-runner and plans with its verdict.
    The container has no torch and no real GPU, so whatever the probe says must be a verdict it
    can give on such a host, and the plan must carry it."""
    name, inv = container
    r = run("plan", name, "-i", str(inv), "--probe", "--json")
    assert r.returncode in (0, 2), r.stderr
    plan = json.loads(r.stdout)["plans"][0]
    assert plan["probe_verdict"] in ("not-applicable", "failed")
    if plan["probe_verdict"] == "failed":
        assert any(f["id"] == "probe-failed" for f in plan["findings"])


def test_probing_an_unreachable_host_is_exit_4_and_no_verdict(
    container: tuple[str, Path], tmp_path: Path
) -> None:
    """A review (2026-12-03): it said `failed in None on ranks []` with exit 5, and its --json
    output went to `plan --probe-verdict` as a schema error about 'backend'."""
    _, inv = container
    r = run("probe", "gone-host", "-i", str(inv))
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "gone-host: no verdict: unreachable" in r.stdout and "None" not in r.stdout
    r = run("probe", "gone-host", "-i", str(inv), "--json")
    assert r.returncode == 4
    verdict = tmp_path / "v.json"
    verdict.write_text(r.stdout)
    snap = Path(__file__).parent / "fixtures" / "hosts" / "bionic-single-gpu.json"
    r = run("plan", "gone-host", "--facts", str(snap), "--probe-verdict", str(verdict))
    assert r.returncode == 3 and "the probe never reached gone-host" in r.stderr, r.stderr


def test_probe_takes_the_hosts_gpufix_probe_python_from_the_inventory(
    container: tuple[str, Path], tmp_path: Path
) -> None:
    """A review (2026-12-03): docs/operations.md names the inventory's gpufix_probe_python, and
    `gpufix probe` ran python3 whatever it said. A value that is not an absolute path is data
    gpufix refuses, not a command line."""
    name, _ = container
    inv = tmp_path / "inv.yml"
    host = (
        f"    {name}:\n      ansible_connection: containers.podman.podman\n"
        "      ansible_python_interpreter: /usr/bin/python3\n"
    )
    inv.write_text(
        f"all:\n  hosts:\n{host}      gpufix_probe_python: /opt/no-such-venv/bin/python\n"
    )
    r = run("probe", name, "-i", str(inv), "--json")
    assert r.returncode == 5, (r.stdout, r.stderr)
    assert "/opt/no-such-venv/bin/python" in json.loads(r.stdout)[name]["error"]
    inv.write_text(f"all:\n  hosts:\n{host}      gpufix_probe_python: 'python3; id'\n")
    r = run("probe", name, "-i", str(inv))
    assert r.returncode == 3 and "is not an absolute path" in r.stderr, r.stderr
