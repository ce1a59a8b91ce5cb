"""`gpufix plan TARGET --facts FILE` plans for TARGET, the name apply will reach; the snapshot's
own host name is recorded in the plan's inputs and said in a risk line, and the plan file still
re-derives to itself (apply's edit check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpufix.apply.request import check_plans
from gpufix.engine.kb import load as load_kb
from gpufix.engine.plan import load_plans
from gpufix.engine.rules import load as load_rules
from gpufix.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[1]
SNAP = ROOT / "tests" / "fixtures" / "hosts" / "bionic-ga-2x3090.json"


def _plan(tmp_path: Path, target: str, *extra: str) -> tuple[dict, Path]:
    out = tmp_path / "plan.json"
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "plan", target, "--facts", str(SNAP), "-o", str(out),
         "--json", *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["plans"][0], out


def test_the_plan_is_for_target_and_says_where_the_facts_came_from(tmp_path: Path) -> None:
    recorded = json.loads(SNAP.read_text())["host"]
    assert recorded != "gpu-node-7"
    plan, out = _plan(tmp_path, "gpu-node-7")
    assert plan["host"] == "gpu-node-7"
    assert plan["inputs"]["facts_host"] == recorded
    assert any(f"recorded on '{recorded}'" in r for r in plan["risks"]), plan["risks"]
    check_plans(load_plans(out), load_kb(), load_rules(), "plan.json")  # re-derives to itself


def test_same_name_records_nothing_extra(tmp_path: Path) -> None:
    recorded = json.loads(SNAP.read_text())["host"]
    plan, _ = _plan(tmp_path, recorded)
    assert plan["host"] == recorded and "facts_host" not in plan["inputs"]
    assert not any("facts were recorded" in r for r in plan["risks"])


def test_a_target_that_is_no_host_name_keeps_the_snapshots_name(tmp_path: Path) -> None:
    recorded = json.loads(SNAP.read_text())["host"]
    plan, _ = _plan(tmp_path, "all:!web")  # an inventory pattern, not one host
    assert plan["host"] == recorded and "facts_host" not in plan["inputs"]


def test_a_verdict_recorded_on_the_snapshots_name_is_this_machines(tmp_path: Path) -> None:
    recorded = json.loads(SNAP.read_text())["host"]
    verdict = json.loads((ROOT / "docs" / "device" / "h200-probe-healthy.json").read_text())
    verdict.update(host=recorded, facts={})
    verdict.pop("inventory_host", None)
    v = tmp_path / "v.json"
    v.write_text(json.dumps(verdict))
    plan, _ = _plan(tmp_path, "gpu-node-7", "--probe-verdict", str(v))
    assert not any("probe verdict was recorded on" in r for r in plan["risks"]), plan["risks"]


@pytest.mark.parametrize("edit", ["other-host", "gpu-node-7", "$(touch /tmp/x)"])
def test_an_edited_facts_host_is_refused(tmp_path: Path, edit: str) -> None:
    _, out = _plan(tmp_path, "gpu-node-7")
    doc = json.loads(out.read_text())
    doc["plans"][0]["inputs"]["facts_host"] = edit
    out.write_text(json.dumps(doc))
    with pytest.raises(InvalidInput):
        check_plans(load_plans(out), load_kb(), load_rules(), "plan.json")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("inventory_host", "gpu-node-7\n"),
        ("inventory_host", "gpu node 7"),
        ("inventory_host", ""),
        ("host", "gpu-node-7\x1b]0;owned\x07"),
        ("host", "h" * 300),
    ],
)
def test_a_verdicts_host_names_are_data_with_a_shape(
    tmp_path: Path, field: str, value: str
) -> None:
    """A user trial (2026-12-06): any string passed as the verdict's host names. They are data
    (compared, printed escaped), never code: one printable word of bounded length."""
    verdict = json.loads((ROOT / "docs" / "device" / "h200-probe-healthy.json").read_text())
    verdict.update(facts={}, **{field: value})
    v = tmp_path / "v.json"
    v.write_text(json.dumps(verdict))
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "plan", "gpu-node-7", "--facts", str(SNAP),
         "--probe-verdict", str(v)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "\x1b" not in r.stderr and field in r.stderr, r.stderr


def test_a_multi_node_verdict_names_each_host_once(tmp_path: Path) -> None:
    """A review (2026-12-07): "recorded on 'nodeA,nodeB, nodeA, nodeB'" joined the group name
    and its hosts."""
    verdict = json.loads((ROOT / "docs" / "device" / "h200-probe-healthy.json").read_text())
    verdict.update(host="nodeA,nodeB", scope="multi-node", hosts=["nodeA", "nodeB"],
                   failed_layer=None, failed_hosts=[], facts={})  # fmt: skip
    verdict.pop("inventory_host", None)
    v = tmp_path / "v.json"
    v.write_text(json.dumps(verdict))
    plan, _ = _plan(tmp_path, "gpu-node-7", "--probe-verdict", str(v))
    (line,) = [r for r in plan["risks"] if "probe verdict was recorded on" in r]
    assert "recorded on 'nodeA, nodeB', not on 'gpu-node-7'" in line, line
