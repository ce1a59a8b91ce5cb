"""Ubuntu 26.04 LTS (resolute, released 2026-04-23) is a release gpufix plans for: the recorded
noble host with 4x RTX 5090 on R575 and a cu130 torch (tests/fixtures/hosts/noble-4x5090.json)
read as a 26.04 host. Before resolute had rows in ubuntu.yaml and ubuntu_driver_packages.yaml
its driver-pin was refused ("neither the Ubuntu archive nor NVIDIA's repository lists them for
resolute") although the archive carries nvidia-driver-580 and -580-server for it
(packages.ubuntu.com, 580.159.03-0ubuntu0.26.04.1).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpufix.engine.context import Constraints
from gpufix.engine.kb import load as load_kb
from gpufix.engine.rules import load as load_rules
from gpufix.facts import snapshot as F
from gpufix.planning import plan_host

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KB, RULES = load_kb(), load_rules()


def _resolute() -> dict[str, Any]:
    doc = copy.deepcopy(json.loads((HOSTS / "noble-4x5090.json").read_text()))
    f = doc["facts"]
    f["os"] = {
        "id": "ubuntu",
        "version_id": "26.04",
        "codename": "resolute",
        "pretty_name": "Ubuntu 26.04 LTS",
    }
    f["glibc"] = "2.43"
    return doc


def _plan(doc: dict[str, Any], strategy: str | None = None) -> Any:
    assert F.schema_errors(doc) == [], "the edited snapshot must stay valid facts"
    return plan_host(
        doc["facts"], None, Constraints(strategy=strategy), host="r1", python_envs=[],
        kb=KB, rules=RULES,
    )  # fmt: skip


def test_the_release_is_in_the_knowledge_base() -> None:
    row = KB.ubuntu("resolute")
    assert row is not None and KB.ubuntu_by_version("26.04") == row
    assert row.ga_kernel == "7.0" and row.glibc == "2.43"
    origins = {p.origin: p for p in KB.ubuntu_driver_packages("resolute")}
    assert set(origins) == {"ubuntu"}  # NVIDIA's ubuntu2604 repository was not read
    assert 580 in origins["ubuntu"].branches and 580 in origins["ubuntu"].server_branches


def test_driver_pin_on_26_04_comes_from_the_ubuntu_archive_at_r580() -> None:
    plan = _plan(_resolute(), "driver-pin")
    assert plan.strategy == "driver-pin", plan.path
    v = plan.steps[0].vars
    assert v["gpufix_driver_branch"] == "580", v
    assert v["gpufix_driver_source"] == "ubuntu", v
    # 610 is in the archive too, but a new-feature branch is never a target
    assert "610" not in json.dumps(v)


def test_no_kernel_step_on_26_04() -> None:
    """Its GA kernel is 7.0, above accelerate's 5.5.0 check, and no HWE series exists yet."""
    plan = _plan(_resolute())
    kernel = [o for o in plan.options if o.strategy == "kernel-upgrade"]
    assert kernel and not kernel[0].feasible, kernel
