"""A driver branch whose support ends soon: the plan says so, and a branch that fits as well and
is supported longer is chosen over it.

NVIDIA's "Supported Drivers and CUDA Toolkit Versions" (620 page, Table 2): R595, a production
branch, reaches its end of life in March 2027; R580 (June 2028) and R620 (September 2029) are
long-term support branches. A plan made on 2026-12-05 that pins R595 (moving to it, or keeping
it) is 116 days from that end, inside branches.ENDS_SOON_DAYS (183).
"""

from __future__ import annotations

import json
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import branches
from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
DAY = date(2026, 12, 5)
R595_ENDS = "ends 2027-03-31, 116 days after the plan date 2026-12-05"


def a100_fm_mismatch(driver: str | None = None, torch: str | None = None) -> dict[str, Any]:
    """The recorded jammy HGX A100 whose fabric manager is at another version than the driver
    (tests/fixtures/hosts/a100-fm-mismatch.json): driver-pin keeps or moves the driver."""
    f = json.loads((HOSTS / "a100-fm-mismatch.json").read_text())["facts"]
    if driver:
        f["driver"].update(kernel_module=driver, userspace=driver)
        f["driver"]["userspace_sources"] = {k: driver for k in f["driver"]["userspace_sources"]}
    if torch:
        f["python_envs"][0]["packages"]["torch"] = torch
    return f


def plan_for(f: dict[str, Any], day: date = DAY) -> Plan:
    return decide(f, None, Constraints(plan_date=day))


def soon_risks(plan: Plan) -> list[str]:
    return [r for r in plan.risks if "plan the move to a branch supported longer" in r]


@pytest.mark.parametrize(
    ("branch", "day", "soon"),
    [
        (595, date(2026, 12, 5), True),
        (595, date(2026, 9, 29), True),  # 183 days before 2027-03-31: inside the window
        (595, date(2026, 9, 28), False),  # 184 days
        (595, date(2027, 4, 1), False),  # ended: its own "past NVIDIA's support" line
        (620, date(2026, 12, 5), False),
        (580, date(2028, 1, 1), True),
        (615, date(2026, 12, 5), False),  # new-feature: never supported, no end date
    ],
)
def test_ends_soon_window(branch: int, day: date, soon: bool) -> None:
    row = KB.driver_branch(branch)
    assert row is not None
    assert branches.ends_soon(row, day) is soon
    assert (branches.ends_soon_risk(row, day) is not None) is soon


def test_a_move_to_r595_names_its_end_of_support() -> None:
    """torch built for CUDA 13.2 needs >= 595.45.04 (cuda_toolkits.yaml): on jammy only R595
    fits (R620 is in no archive row), so the plan moves there and says when it ends."""
    plan = plan_for(a100_fm_mismatch(torch="2.15.0+cu132"))
    assert plan.strategy == "driver-pin"
    assert plan.steps[0].vars["gpufix_driver_branch"] == "595"
    [risk] = soon_risks(plan)
    assert "R595 (production branch)" in risk and R595_ENDS in risk
    assert "/620/supported-drivers-and-cuda-toolkit-versions.html" in risk


def test_a_host_kept_on_r595_is_told_its_support_ends() -> None:
    plan = plan_for(a100_fm_mismatch(driver="595.45.04"))
    assert plan.strategy == "driver-pin"
    assert plan.steps[0].vars["gpufix_driver_branch"] == "595"
    [risk] = soon_risks(plan)
    assert R595_ENDS in risk


def test_a_branch_supported_longer_says_nothing() -> None:
    plan = plan_for(a100_fm_mismatch())  # R535 ended: it moves to R580 (LTS to June 2028)
    assert plan.steps[0].vars["gpufix_driver_branch"] == "580"
    assert soon_risks(plan) == []
    assert soon_risks(plan_for(a100_fm_mismatch(driver="595.45.04"), date(2026, 9, 1))) == []


def test_a_longer_supported_branch_of_the_same_fitness_is_preferred() -> None:
    """On 2028-01-01 R580 has 181 days left and R620 years: both LTS, both drive Hopper. With no
    release in the facts (the role resolves the package) the smaller move used to win."""
    want = branches.Wanted(date(2028, 1, 1), None, ("9.0",))
    got = branches.choose(KB, want)
    assert isinstance(got, branches.Choice) and got.branch == 620
    # The release's own archive still comes first: jammy's has R580 and no R620, so R580 stays,
    # and the plan names its end.
    on_jammy = branches.choose(KB, branches.Wanted(date(2028, 1, 1), "jammy", ("9.0",)))
    assert isinstance(on_jammy, branches.Choice) and on_jammy.branch == 580
    assert branches.ends_soon(on_jammy.row, date(2028, 1, 1))


def test_a_host_on_a_soon_ending_branch_is_told_whatever_the_plan_chooses() -> None:
    """A review (2026-12-05): only driver-pin plans said so; a host on R595 whose plan changes
    nothing, or something else, heard nothing of the end four months away."""
    f = json.loads((HOSTS / "focal-4x4090.json").read_text())["facts"]
    f["driver"].update(kernel_module="595.45.04", userspace="595.45.04")
    f["driver"]["userspace_sources"] = {k: "595.45.04" for k in f["driver"]["userspace_sources"]}
    plan = plan_for(f)
    assert plan.strategy != "driver-pin"
    [found] = [x for x in plan.findings if x.id == "driver-branch-ends-soon"]
    assert found.severity == "info" and R595_ENDS in found.message
    assert not [x for x in plan_for(f, date(2026, 9, 1)).findings if "ends-soon" in x.id]
    assert not [x for x in plan_for(f, date(2027, 4, 1)).findings if "ends-soon" in x.id]
