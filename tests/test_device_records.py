"""What ran on real GPU machines (docs/device/, bench/device/) still reads through the real CLI:
each facts snapshot passes the schema and plans with the healthy verdict of its machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEVICE = ROOT / "docs" / "device"
# snapshot, and the verdict of a healthy probe on the same machine (one GPU each)
RECORDS = [
    ("h200-facts.snapshot.json", "h200-probe-healthy.json"),
    ("h100-facts.snapshot.json", "h100-probe-healthy.json"),
]


@pytest.mark.parametrize(("snapshot", "verdict"), RECORDS)
def test_a_real_snapshot_plans_none_for_one_healthy_gpu(snapshot: str, verdict: str) -> None:
    args = ["plan", "vm", "--json", "--facts", str(DEVICE / snapshot)]
    args += ["--probe-verdict", str(DEVICE / verdict)]
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", *args],
        capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (plan,) = json.loads(r.stdout)["plans"]
    assert plan["strategy"] == "none"
