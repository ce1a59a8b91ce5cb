"""The rendezvous clock on one machine: two "hosts" are two probe supervisors on this machine
(`--nnodes 2`, the store on 127.0.0.1), real torch on CPU with gloo, no podman.

The case: the first host imports torch slowly (a cold import after a reboot), longer than the
phase deadline. The second host's rank meanwhile tries to reach a store that is not up yet. That
is not a blocked port: both hosts must come out healthy.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
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
