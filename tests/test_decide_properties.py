"""Properties: no facts crash the engine, and no chosen plan is impossible for its host."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

from gpufix import versions
from gpufix.engine.context import Constraints
from gpufix.engine.decide import decide
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.engine.stack import arch_problem, driver_runs_cuda
from gpufix.errors import InvalidInput
from gpufix.strategies import NAMES as STRATEGIES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HOSTS = sorted((Path(__file__).parent / "fixtures" / "hosts").glob("*.json"))
KB = load()
RULES = load_rules()

versionish = st.one_of(
    st.sampled_from(
        [
            "4.15.0-213-generic",
            "5.4.0-150-generic",
            "6.8.0-40-generic",
            "2.27",
            "2.35",
            "470.182.03",
            "535.183.01",
            "1:545.23.08-0ubuntu1",
            "3.6.9",
            "3.10.12",
            "2.7.1+cu118",
            "1.12.1+cu113",
            "garbage",
            "",
            "5",
        ]
    ),
    st.text(max_size=12),
)
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 1 << 40),
    versionish,
    st.fixed_dictionaries(
        {"unknown": st.sampled_from(["nvidia-smi: not found", "timeout after 10s"])}
    ),
    st.lists(st.integers(0, 3), max_size=2),
)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict) and "unknown" not in obj:
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple, value: Any) -> None:
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


@st.composite
def mutated_facts(draw: Any) -> dict[str, Any]:
    host = draw(st.sampled_from(HOSTS))
    facts = copy.deepcopy(json.loads(host.read_text())["facts"])
    paths = _paths(facts)
    for _ in range(draw(st.integers(1, 6))):
        path = draw(st.sampled_from(paths))
        with contextlib.suppress(KeyError, IndexError, TypeError):
            _set(facts, path, draw(leaf))
        paths = _paths(facts) or paths
    return facts


constraints = st.builds(
    Constraints,
    reboot_allowed=st.booleans(),
    multi_gpu_required=st.booleans(),
    strategy=st.one_of(st.none(), st.sampled_from(STRATEGIES)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_facts(), constraints)
def test_engine_never_crashes_and_plans_are_possible(facts: dict[str, Any], c: Constraints) -> None:
    try:
        plan = decide(facts, constraints=c, kb=KB, rules=RULES)
    except InvalidInput as exc:  # only a forced strategy may be refused
        assert c.strategy is not None, exc
        return
    assert plan.strategy in STRATEGIES
    if not c.reboot_allowed:
        assert not plan.reboot_required
    stack = plan.extra.get("stack")
    if stack:
        step = plan.steps[0]
        assert step.vars["gpufix_ml_stack_torch_version"] == stack["torch"]
        assert step.vars["gpufix_ml_stack_torch_variant"] == stack["tag"]
        _assert_stack_possible(facts, f"{stack['torch']}+{stack['tag']}", stack["python"])


def _assert_stack_possible(facts: dict[str, Any], torch: str, python: str) -> None:
    row = KB.torch_release(torch)
    assert row is not None
    cuda_tag = versions.local_tag(torch)
    cuda = versions.cuda_from_tag(cuda_tag)
    assert cuda is not None
    cu = f"{cuda[0]}.{cuda[1]}"
    assert cu in row.cuda
    glibc = facts.get("glibc")
    if isinstance(glibc, str) and versions.parse(glibc):
        assert versions.at_least(glibc, row.glibc_for(cu)), (torch, glibc)  # no torch 2.7 on 2.27
    py = python
    assert (
        versions.major_minor(row.python_min)
        <= versions.major_minor(py)
        <= versions.major_minor(row.python_max)
    )
    driver = (
        (facts.get("driver") or {}).get("kernel_module")
        if isinstance(facts.get("driver"), dict)
        else None
    )
    if isinstance(driver, str) and versions.parse(driver):
        runs, _ = driver_runs_cuda(KB, driver, cuda)
        assert runs is not False, (torch, driver)  # no cu121 on driver 470
    caps = tuple(
        str(g.get("compute_capability"))
        for g in (facts.get("gpus") if isinstance(facts.get("gpus"), list) else [])
        if isinstance(g, dict) and isinstance(g.get("compute_capability"), str)
    )
    assert arch_problem(KB, caps, cuda) is None
