"""Driver known issues from NVIDIA's release notes (driver_issues.yaml): an affected driver on the
platform the note names, with the probe evidence the problem produces, moves up to the fix;
anything outside the row's range, platform or evidence is left alone.

The host is the recorded HGX A100 (tests/fixtures/hosts/bionic-hwe-8xa100.json: 8 SXM GPUs on
NV12, fabric manager at the driver's version) turned into an HGX H100 the way nvidia-smi reports
one: the product name "NVIDIA H100 80GB HBM3", compute capability 9.0, NV18 between every pair
(Host.nvswitch), an R535 driver with fabric manager at the same version.
"""

from __future__ import annotations

import copy
import json
import shutil
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufix.apply import rolevars
from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import DEFAULT_DIR, load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules
from gpufix.errors import GpufixError

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
ROW = "r535-nvswitch-h100-p2p-ns"
NOTE = "tesla-release-notes-535-183-06"
# R535 is an LTS branch to June 2026 (driver_branches.yaml): before that the fix is the newest
# R535; on the knowledge base's own date it is past support and another branch gets the move.
R535_SUPPORTED = date(2025, 6, 1)


def hgx_h100(driver: str = "535.154.05", *, hopper: bool = True) -> dict[str, Any]:
    f = copy.deepcopy(json.loads((HOSTS / "bionic-hwe-8xa100.json").read_text())["facts"])
    if hopper:
        for gpu in f["gpus"]:
            gpu.update(name="NVIDIA H100 80GB HBM3", compute_capability="9.0")
        m = f["topology"]["matrix"]
        f["topology"]["matrix"] = {a: {b: "NV18" for b in row} for a, row in m.items()}
    f["driver"].update(kernel_module=driver, userspace=driver)
    f["driver"]["userspace_sources"] = {k: driver for k in f["driver"]["userspace_sources"]}
    f["fabricmanager"]["installed"] = driver
    return f


def hung_in_allreduce() -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
            "stalled": {"phase": "allreduce", "ranks": [6, 7]}}  # fmt: skip


def shm_decided() -> dict[str, Any]:
    exp = {"id": "shm-off", "env": {"NCCL_SHM_DISABLE": "1"}, "gpus": None, "verdict": "healthy",
           "stalled": None, "error": None, "elapsed_s": 1.0}  # fmt: skip
    return hung_in_allreduce() | {"experiments": [exp], "decided_by": "shm-off"}


def plan_for(f: dict[str, Any], v: dict[str, Any], day: date | None = None) -> Plan:
    return decide(f, v, Constraints(plan_date=day or KB.checked()))


def row_of(plan: Plan) -> str | None:
    d = plan.extra.get("decision")
    return d["row"] if d else None


def issue_findings(plan: Plan) -> list[str]:
    return [x.id for x in plan.findings if x.id == "driver-known-issue"]


def test_the_table_holds_the_release_note_row() -> None:
    issue = next(i for i in KB.driver_issues if i.id == ROW)
    assert issue.fixed_in == "535.183.06" and issue.nvswitch is True and issue.archs == ("Hopper",)
    assert NOTE in issue.source and "Fixed Issues" in issue.source
    assert issue.matches("535.154.05") and not issue.matches("535.183.06")
    assert not issue.matches("550.54.15")


def test_affected_host_moves_up_within_its_supported_branch() -> None:
    plan = plan_for(hgx_h100(), hung_in_allreduce(), R535_SUPPORTED)
    assert plan.strategy == "driver-pin" and row_of(plan) == "collective-driver-issue"
    step = plan.steps[0]
    assert step.vars["gpufix_driver_branch"] == "535" and "gpufix_driver_version" not in step.vars
    assert step.vars["gpufix_driver_fabricmanager"] is True
    assert "up to the newest R535" in step.description and "535.183.06" in step.description
    assert NOTE in step.description  # the row's source is in the plan text
    assert step.vars["gpufix_driver_min_version"] == "535.183.06"  # the role enforces the fix
    assert any("535.183.06" in r and "gpufix_driver_min_version" in r for r in plan.risks)
    assert issue_findings(plan) == ["driver-known-issue"]
    # The step's vars pass the controller's check as a plan step does before it runs.
    rolevars.check_vars(step.playbook, step.vars, "plan", plan_step=True)


def test_a_move_to_another_branch_carries_no_minimum() -> None:
    """fixed_in is a version of the affected branch: on another branch it means nothing."""
    step = plan_for(hgx_h100(), hung_in_allreduce()).steps[0]
    assert step.vars["gpufix_driver_branch"] != "535"
    assert "gpufix_driver_min_version" not in step.vars


@pytest.mark.parametrize(
    "bad", ["535.183.06; reboot", "{{ lookup('pipe','id') }}", "535", "r535.1"]
)
def test_a_minimum_that_is_not_a_driver_version_is_refused(bad: str) -> None:
    with pytest.raises(GpufixError) as err:
        rolevars.check_vars(
            "driver_pin.yml",
            {"gpufix_driver_branch": "535", "gpufix_driver_min_version": bad},
            "plan",
            plan_step=True,
        )
    assert "gpufix_driver_min_version" in str(err.value) and "driver_version" in str(err.value)


def test_affected_host_on_an_unsupported_branch_moves_to_a_supported_one() -> None:
    plan = plan_for(hgx_h100(), hung_in_allreduce())
    assert plan.strategy == "driver-pin" and row_of(plan) == "collective-driver-issue"
    step = plan.steps[0]
    branch = int(step.vars["gpufix_driver_branch"])
    assert branch > 535 and KB.driver_branch(f"{branch}.0") is not None
    assert KB.driver_branch(f"{branch}.0").supported_on(KB.checked())  # type: ignore[union-attr]
    assert "past NVIDIA's support" in step.description and NOTE in step.description


def test_gpu_pair_evidence_matches_the_row() -> None:
    """The bug's shape as the probe writes it: pairs with GPU 6 or 7 hang, the others are
    healthy, so `suspects` names them (a healthy pair in `decided_by` decides nothing)."""
    exps = [
        {"id": f"gpus-{a}-{b}", "env": {}, "gpus": [a, b], "stalled": None, "error": None,
         "verdict": "hung" if {a, b} & {6, 7} else "healthy", "elapsed_s": 1.0}
        for a, b in ((0, 1), (2, 3), (4, 5), (6, 7), (0, 6), (0, 7))
    ]  # fmt: skip
    v = hung_in_allreduce() | {"experiments": exps, "suspects": {"gpus": [6, 7], "links": []}}
    plan = plan_for(hgx_h100(), v, R535_SUPPORTED)
    assert plan.strategy == "driver-pin" and row_of(plan) == "gpu-pair-driver-issue"


def test_fixed_version_installed_is_not_affected() -> None:
    plan = plan_for(hgx_h100("535.183.06"), hung_in_allreduce(), R535_SUPPORTED)
    assert issue_findings(plan) == []
    assert row_of(plan) != "collective-driver-issue"
    assert not any(NOTE in s.description for s in plan.steps)


@pytest.mark.parametrize("platform", ["hgx-a100", "h100-pcie-pairs"])
def test_other_platform_is_not_affected(platform: str) -> None:
    f = hgx_h100(hopper=platform != "hgx-a100")
    if platform == "h100-pcie-pairs":  # no NVSwitch: PCIe cards, NVLink bridge pairs
        for gpu in f["gpus"]:
            gpu["name"] = "NVIDIA H100 PCIe"
        m = f["topology"]["matrix"]
        f["topology"]["matrix"] = {a: {b: "SYS" for b in row} for a, row in m.items()}
    plan = plan_for(f, hung_in_allreduce(), R535_SUPPORTED)
    assert issue_findings(plan) == []
    assert row_of(plan) != "collective-driver-issue"


def test_evidence_the_row_does_not_show_leaves_the_driver() -> None:
    """The platform and range match, so the finding warns, but SHM off turning the run healthy is
    not this problem: the table's SHM row decides, not a driver move."""
    plan = plan_for(hgx_h100(), shm_decided(), R535_SUPPORTED)
    assert issue_findings(plan) == ["driver-known-issue"]
    assert plan.strategy != "driver-pin" and row_of(plan) == "shm-off-host"


def _with_row(tmp_path: Path, **change: object) -> Path:
    d = tmp_path / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    row = {**yaml.safe_load((DEFAULT_DIR / "driver_issues.yaml").read_text())[0], **change}
    (d / "driver_issues.yaml").write_text(yaml.safe_dump([row]))
    return d


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fixed_in": "535.154.05"}, "fixed_in 535.154.05 lies inside affected"),
        ({"affected": "<535.183.06"}, "is not a range inside R535"),
        ({"affected": ">=550,<550.90"}, "is not a range inside R535"),
        ({"archs": ["Hoper"]}, "unknown architecture 'Hoper'"),
        ({"nvswitch": "yes"}, "must be true or false"),
        ({"shows": ["experiment:p2p-of"]}, "experiment:p2p-of"),
        ({"fixed_in": 535.183}, "quoted version"),
    ],
)
def test_a_row_with_bad_data_stops_the_load(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    with pytest.raises(GpufixError) as err:
        load(_with_row(tmp_path, **change))
    text = str(err.value)
    assert "driver_issues.yaml row 1" in text and message in text and "\n" not in text
