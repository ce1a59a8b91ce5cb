"""Generated JSON fed to `plan --facts`, `plan --probe-verdict` and `apply PLANFILE`: the exit
code is always a documented one, never "internal error", and every call returns within a bound.

The apply cases start from a plan the engine made and replace one part of it with generated
JSON, so the fuzzer reaches the checks behind the file format (schema, request, role specs)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import ROOT, CliRun, facts, make_plan, plan_doc

BOUND_S = 20.0  # one call, on a loaded 2-core machine; a hang would blow far past it
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["gpufix-facts", "gpufix-probe", "gpufix-plan", "{{ 7*7 }}", "$(id)", "../x"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)


def _timed(cli: CliRun, *argv: str) -> int:
    t0 = time.monotonic()
    code, _, _ = cli(*argv)  # asserts: documented code, no internal error, no traceback
    assert time.monotonic() - t0 < BOUND_S
    return code


def _near_facts(value: Any, key: str) -> dict[str, Any]:
    doc = facts("bionic-ga-2x3090")
    if key == "(root)":
        return value if isinstance(value, dict) else {"facts": value}
    doc["facts"][key] = value
    return doc


FACT_KEYS = ["(root)", *sorted(facts("bionic-ga-2x3090")["facts"])]


@SETTINGS
@given(value=json_values, key=st.sampled_from(FACT_KEYS))
def test_plan_facts(value: Any, key: str, cli: CliRun, tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(_near_facts(value, key)))
    assert _timed(cli, "plan", "x", "--facts", str(path), "--json") in (0, 3)


VERDICT = json.loads((ROOT / "docs/device/h200-probe-healthy.json").read_text())


@SETTINGS
@given(value=json_values, key=st.sampled_from(["(root)", *sorted(VERDICT)]))
def test_plan_probe_verdict(value: Any, key: str, cli: CliRun, tmp_path: Path) -> None:
    doc: Any = dict(VERDICT)
    if key == "(root)":
        doc = value
    else:
        doc[key] = value
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(doc))
    snap = str(ROOT / "tests/fixtures/hosts/bionic-ga-2x3090.json")
    code = _timed(cli, "plan", "x", "--facts", snap, "--probe-verdict", str(path), "--json")
    assert code in (0, 3)


PLAN = plan_doc(make_plan(facts("bionic-ga-2x3090")["facts"]))
PLAN_PATHS = [
    (),
    ("plans",),
    ("plans", 0),
    ("plans", 0, "steps"),
    ("plans", 0, "steps", 0),
    ("plans", 0, "steps", 0, "vars"),
    ("plans", 0, "inputs"),
    ("plans", 0, "inputs", "verdict"),
    ("plans", 0, "inputs", "constraints"),
    ("plans", 0, "inputs", "python_envs"),
    ("plans", 0, "interim"),
    ("plans", 0, "verify"),
    ("plans", 0, "findings"),
    ("plans", 0, "strategy"),
]


@SETTINGS
@given(value=json_values, where=st.sampled_from(PLAN_PATHS))
def test_apply_planfile(
    value: Any, where: tuple[Any, ...], cli: CliRun, tmp_path: Path, dead_inventory: Path
) -> None:
    doc: Any = json.loads(json.dumps(PLAN))
    if not where:
        doc = value
    else:
        node = doc
        for p in where[:-1]:
            node = node[p]
        node[where[-1]] = value
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    code = _timed(cli, "apply", str(path), "-i", str(dead_inventory), "--yes", "--check")
    # 3 refused; 1/4 only if the edit changed nothing the checks look at (the dead host fails)
    assert code in (1, 3, 4)
