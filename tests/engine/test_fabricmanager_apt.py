"""Fabric manager at another version than the driver, on a branch past NVIDIA's support: when
apt still offers the installed driver's exact version, fabric manager goes to it with no driver
move and no reboot; when the facts do not say, the plan moves the driver (a reboot) only as an
incomplete plan that names the reading that would decide (an expert review, 2026-12-06: the
reboot was chosen on the unknown and the plan never asked for the apt reading). Recorded facts:
a100-fm-mismatch (HGX A100, driver 535.154.05, fabric manager 535.129.03)."""

from __future__ import annotations

import copy
import json
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
ASKED = Constraints(strategy="driver-pin", plan_date=date(2026, 12, 6))  # R535 ended June 2026
decide = partial(engine.decide, kb=load(), rules=load_rules(), constraints=ASKED)


def host(installable: bool | None) -> dict[str, Any]:
    f = copy.deepcopy(json.loads((HOSTS / "a100-fm-mismatch.json").read_text())["facts"])
    if installable is not None:
        f["packages"]["driver_rollback"] = {  # the facts schema's shape
            "package": "libnvidia-compute-535",
            "version": "535.154.05-0ubuntu0.22.04.1",
            "installable": installable,
        }
    return f


def needs(plan: Any) -> list[str]:
    return [n["id"] for n in plan.extra.get("needs") or []]


def test_an_offered_driver_keeps_its_version_and_no_reboot() -> None:
    plan = decide(host(True))
    assert not plan.reboot_required and plan.extra["complete"]
    assert plan.steps[0].vars.get("gpufix_driver_version") == "535.154.05"


def test_an_unread_apt_index_is_asked_for_before_a_driver_move() -> None:
    plan = decide(host(None))
    assert plan.reboot_required and not plan.extra["complete"]
    assert "driver-apt" in needs(plan)
