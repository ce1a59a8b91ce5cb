"""The rendezvous clock on one machine: two "hosts" are two probe supervisors on this machine
(`--nnodes 2`, the store on 127.0.0.1), real torch on CPU with gloo, no podman.

The case: the first host imports torch slowly (a cold import after a reboot), longer than the
phase deadline. The second host's rank meanwhile tries to reach a store that is not up yet. That
is not a blocked port: both hosts must come out healthy.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import probe_env
from gpufix.probe import program_path
from workers import leftovers

pytest.importorskip("torch", reason="needs torch (CPU build is enough)")
pytestmark = pytest.mark.slow

PHASE = 5.0
SLOW_IMPORT = 3 * PHASE  # the first host's extra import time, well past the phase deadline


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_slow_first_host_is_not_a_blocked_rendezvous(tmp_path: Path) -> None:
    port = free_port()
    args = [
        sys.executable, str(program_path()), "--cpu", "--no-single-gpu",
        "--world-size", "1", "--nnodes", "2", "--master-addr", "127.0.0.1",
        "--master-port", str(port), "--ifname", "lo", "--phase-deadline", str(PHASE),
        "--import-deadline", "90", "--deadline", "150",
    ]  # fmt: skip
    procs = []
    for node in (0, 1):
        work = tmp_path / f"node{node}"
        work.mkdir()
        # Only the first host's rank 0 is slow to import torch.
        fault = f"slow:import_torch:0:{SLOW_IMPORT}" if node == 0 else None
        procs.append(
            subprocess.Popen(
                [*args, "--node-rank", str(node)],
                env=probe_env(work, fault),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    verdicts = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert out.startswith("{"), err[-2000:]
        verdicts.append(json.loads(out))
    assert leftovers(str(tmp_path)) == [], "worker processes left behind"

    assert [v["verdict"] for v in verdicts] == ["healthy", "healthy"], [
        (v.get("stalled"), v.get("error")) for v in verdicts
    ]
    rendezvous = [p for p in verdicts[1]["phases"] if p["phase"] == "rendezvous"]
    # the second host waited past the phase deadline, and that was right
    assert rendezvous and rendezvous[0]["end"] - rendezvous[0]["start"] > PHASE


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_run_that_has_not_ended_is_neither_joined_nor_called_a_firewall(tmp_path: Path) -> None:
    """An earlier run (its second host never came) still serves the store on the first host when
    a new run starts on the same port. Before, the new run's second host joined the old store:
    the old run's host and the new run's second host formed one group and both said healthy,
    while the new first host failed with a blocked rendezvous."""
    port = free_port()

    # Deadlines for a loaded 2-core machine (a review of the tests' races): torch's import may
    # take over 10 s, and the earlier run holds its store (phase + import deadline) until it is
    # stopped, not for a window the new runs' imports could outlast.
    def start(node: int, key: str, phase: int, deadline: int, name: str) -> subprocess.Popen[str]:
        work = tmp_path / name
        work.mkdir()
        argv = [
            sys.executable, str(program_path()), "--cpu", "--no-single-gpu",
            "--world-size", "1", "--nnodes", "2", "--node-rank", str(node),
            "--master-addr", "127.0.0.1", "--master-port", str(port), "--store-key", key,
            "--phase-deadline", str(phase), "--import-deadline", "30",
            "--deadline", str(deadline), "--no-experiments",
        ]  # fmt: skip
        return subprocess.Popen(
            argv,
            env=probe_env(work),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    old = start(0, "old", 120, 300, "old")
    for _ in range(600):  # its store is up once the port listens
        if listening(port) or old.poll() is not None:
            break
        time.sleep(0.1)
    assert listening(port), "the earlier run never served its store"
    new = [start(0, "new", 4, 60, "new0"), start(1, "new", 4, 60, "new1")]
    verdicts = []
    for p in new:
        out, err = p.communicate(timeout=120)
        assert out.startswith("{"), err[-2000:]
        verdicts.append(json.loads(out))
    assert old.poll() is None, "the earlier run ended before the new ones: its store is gone"
    old.send_signal(signal.SIGTERM)
    out, err = old.communicate(timeout=60)
    assert out.startswith("{"), err[-2000:]
    assert leftovers(str(tmp_path)) == [], "worker processes left behind"

    old_v, (first, second) = json.loads(out), verdicts
    assert old_v["verdict"] != "healthy" and second["verdict"] != "healthy"
    assert (first["verdict"], first["failed_in"]["phase"]) == ("failed", "rendezvous")
    assert [c["id"] for c in first["causes"]] == ["store-port-busy"]
    assert first["node"]["store_key"] == "new"


def test_a_store_key_is_a_plain_word(tmp_path: Path) -> None:
    argv = [
        sys.executable, str(program_path()), "--cpu", "--nnodes", "2",
        "--master-addr", "127.0.0.1", "--store-key", "a/b; rm -rf /",
    ]  # fmt: skip
    p = subprocess.run(
        argv,
        env=probe_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 3 and "--store-key must be" in p.stdout + p.stderr
