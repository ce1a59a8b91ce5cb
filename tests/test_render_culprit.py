"""The text plan names the job's setting the probe found to break the run (row job-setting), on a
host with one GPU too, where the decision path stops at "one GPU" (a review: the setting was only
in `--json`, under extra.decision)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli import HOSTS, ROOT, gpufix

DEVICE = ROOT / "docs" / "device"
CULPRIT = "NCCL_SOCKET_IFNAME==gpufix-none0"


def _plan(facts: Path, verdict: Path, *extra: str) -> tuple[str, dict[str, Any]]:
    """The text plan, and extra.decision of the same plan in --json."""
    args = ("plan", "vm", "--facts", str(facts), "--probe-verdict", str(verdict), *extra)
    text = gpufix(*args)
    assert text.returncode == 0, text.stderr
    js = gpufix(*args, "--json")
    assert js.returncode == 0, js.stderr
    decision: dict[str, Any] = json.loads(js.stdout)["plans"][0]["extra"]["decision"]
    return text.stdout, decision


def test_one_gpu_plan_names_the_culprit() -> None:
    """Recorded on a real H200 (one GPU): NCCL_SOCKET_IFNAME broke the job's run."""
    out, decision = _plan(
        DEVICE / "h200-facts.snapshot.json", DEVICE / "h200-probe-job-env-culprit.json"
    )
    assert "decided by: job-setting" in out, out
    assert f"the job's setting {CULPRIT} breaks the run here: take it out of the job" in out
    assert "NCCL_ALGO=Ring" not in out  # the other setting is not to blame
    assert decision["job_env_culprit"] == CULPRIT
    assert decision["job_env"] == ["NCCL_ALGO=Ring", CULPRIT]


def _no_culprit(tmp_path: Path) -> Path:
    """The same verdict before any run without one setting: both settings are suspects. No
    facts of the H200 in it, so it plans as the two-GPU host's evidence."""
    v = json.loads((DEVICE / "h200-probe-job-env-culprit.json").read_text())
    v.update(facts={}, job_env_culprit=None, experiments=v["experiments"][:1], notes=[])
    path = tmp_path / "v.json"
    path.write_text(json.dumps(v))
    return path


@pytest.mark.parametrize("extra", [(), ("--strategy", "cuda-downgrade")], ids=["chosen", "forced"])
def test_several_settings_without_a_culprit_are_all_named(
    extra: tuple[str, ...], tmp_path: Path
) -> None:
    """Two GPUs, no one setting named: all of them, whether or not the row's fix was chosen."""
    out, decision = _plan(HOSTS / "bionic-ga-2x3090.json", _no_culprit(tmp_path), *extra)
    assert (
        f"the run was healthy without the job's settings NCCL_ALGO=Ring {CULPRIT}: "
        "take them out of the job" in out
    ), out
    assert "job_env_culprit" not in decision
    assert decision["job_env"] == ["NCCL_ALGO=Ring", CULPRIT]
