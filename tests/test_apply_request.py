"""A plan file is a request: every plan the engine makes from the recorded hosts survives a round
trip through a file and its re-derivation; the data the check relies on agrees with itself."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from gpufix import inputs
from gpufix.apply import request, rolevars, varspec
from gpufix.apply.rollout import work_plan
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load as load_kb
from gpufix.engine.plan import Interim, Step, load_plans, save_plans
from gpufix.engine.rules import load as load_rules
from gpufix.errors import InvalidInput
from gpufix.planning import constraints_from_dict, plan_host
from gpufix.strategies import NAMES, REGISTRY

HOSTS = sorted(Path("tests/fixtures/hosts").glob("*.json"))
KB, RULES = load_kb(), load_rules()


def _plans(path: Path) -> list:
    facts = json.loads(path.read_text())["facts"]
    out = []
    for s in (None, *NAMES):
        try:
            out.append(
                plan_host(
                    facts,
                    None,
                    Constraints(strategy=s),
                    host="h1",
                    python_envs=[],
                    kb=KB,
                    rules=RULES,
                )
            )
        except InvalidInput:  # infeasible when forced
            continue
    return out


@pytest.mark.parametrize("host", HOSTS, ids=lambda p: p.stem)
def test_every_plan_survives_a_file_and_its_rederivation(host: Path, tmp_path: Path) -> None:
    plans = _plans(host)
    assert plans
    for plan in plans:
        save_plans([plan], tmp_path / "p.json")
        (back,) = load_plans(tmp_path / "p.json")
        assert back == plan
        request.check_plans([back], KB, RULES, "plan file")
        for i, s in enumerate(plan.steps):  # and the role specs accept what the engine says
            rolevars.check_vars(s.playbook, s.vars, f"{host.stem}: steps/{i}", plan_step=True)


def test_first_difference_names_the_field() -> None:
    a = {"steps": [{"vars": {"x": 1, "y": [1, 2]}}], "s": "a"}
    b = json.loads(json.dumps(a))
    assert request.first_difference(a, b) is None
    b["steps"][0]["vars"]["y"].append(3)
    assert request.first_difference(a, b) == "steps/0/vars/y/2"
    b = json.loads(json.dumps(a))
    b["steps"][0]["vars"]["x"] = True  # 1 == True in Python, not in a plan
    assert request.first_difference(a, b) == "steps/0/vars/x"


def test_an_edited_strategy_is_named_before_what_follows_from_it(tmp_path: Path) -> None:
    """A review (2026-12-06): with keys compared in alphabetical order, a plan whose recorded
    strategy constraint was edited was reported as differing at `outcome`."""
    plan = _plans(Path("tests/fixtures/hosts/a100-fm-mismatch.json"))[0]
    assert plan.strategy == "driver-pin"
    save_plans([plan], tmp_path / "p.json")
    doc = json.loads((tmp_path / "p.json").read_text())
    doc["plans"][0]["inputs"]["constraints"]["strategy"] = "kernel-upgrade"
    (tmp_path / "p.json").write_text(json.dumps(doc))
    with pytest.raises(InvalidInput, match=r"differs at h1 \(plans/0/strategy\)"):
        request.check_plans(load_plans(tmp_path / "p.json"), KB, RULES, "plan file")


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ({"reboot_allowed": "yes"}, "wrong type"),
        ({"surprise": True}, "not a planning constraint"),
        ({"strategy": "rm -rf"}, "not a strategy"),
        ({"container_image": "ubuntu:latest"}, "not a valid value"),
        ({"venv_path": "/opt/{{ x }}"}, "not a valid value"),
        ({"multi_gpu_required": 1}, "wrong type"),
        ({"torch": "2.5.1; rm -rf /"}, "not a valid value"),
        ({"torch": "2.5.1\n"}, "not a valid value"),
        ({"torch": 2.5}, "wrong type"),
    ],
)
def test_constraints_are_data(given: dict, why: str) -> None:
    with pytest.raises(InvalidInput, match=why):
        constraints_from_dict(given)


def test_interim_runs_instead_of_the_permanent_steps() -> None:
    (plan, *_) = _plans(Path("tests/fixtures/hosts/bionic-ga-2x3090.json"))
    step = Step("nccl_profile.yml", "p2p off", {"gpufix_nccl_profile_names": ["no-p2p"]})
    with_interim = replace(plan, interim=Interim("nccl-profile", [step], "no P2P for now"))
    work = work_plan(with_interim, interim=True)
    assert work.strategy == "nccl-profile" and work.steps == [step] and not work.reboot_required
    assert work_plan(with_interim, interim=False) is with_interim
    assert not work_plan(plan, interim=True).changes  # no interim: nothing to do


def test_the_schemas_name_the_registered_strategies_and_patterns() -> None:
    plan = inputs.schema("plan")
    assert set(plan["$defs"]["strategy"]["enum"]) == set(REGISTRY)
    host = inputs.schema("journal-host")
    assert set(host["properties"]["strategy"]["enum"]) == set(REGISTRY)
    assert plan["$defs"]["python"]["pattern"] == varspec.PATTERNS["python"]
    assert host["properties"]["host"]["pattern"] == plan["$defs"]["host"]["pattern"]


def test_every_pattern_names_a_declared_variable() -> None:
    declared = {
        n for spec in [*varspec.SHARED.values(), *varspec.ROLE_EXTRAS.values()] for n in spec
    }
    for role in sorted(Path("roles").glob("*/meta/argument_specs.yml")):
        declared |= set(rolevars.role_options(role.parts[1]))
    assert set(varspec.VAR_PATTERNS) <= declared
    assert set(varspec.DICT_PATTERNS) <= declared
    assert set(varspec.ALLOW_EMPTY) <= declared
    assert set(varspec.INT_RANGES) <= declared
    assert {p for p in varspec.VAR_PATTERNS.values()} <= set(varspec.PATTERNS)


@pytest.mark.parametrize("node", ["{{ lookup('pipe', 'id') }}", "h1;id", "", "-h1"])
def test_multi_node_host_names_are_checked_like_plan_hosts(node: str) -> None:
    """probe_multinode.yml takes gpufix_probe_nodes beside the probe role's specs: by pattern."""
    rolevars.check_vars("probe_multinode.yml", {"gpufix_probe_nodes": ["h1"]}, "t")
    with pytest.raises(InvalidInput):
        rolevars.check_vars("probe_multinode.yml", {"gpufix_probe_nodes": ["h1", node]}, "t")


def test_a_plan_made_before_a_branch_ended_is_stale_after_it() -> None:
    """On 2025-12-01 driver-pin on the bionic host picks R535 (LTSB to June 2026, NVIDIA's
    supported-drivers table, then more than six months ahead); the same file applied on
    2026-12-03 must not install it. The plan re-derives to itself as of its own date, so only
    the date check can refuse it."""
    from datetime import date

    facts = json.loads(Path("tests/fixtures/hosts/bionic-single-gpu.json").read_text())["facts"]
    made = date(2025, 12, 1)
    plan = plan_host(facts, None, Constraints(strategy="driver-pin", plan_date=made),
                     host="h1", python_envs=[], kb=KB, rules=RULES)  # fmt: skip
    branch = [s.vars.get("gpufix_driver_branch") for s in plan.steps if s.vars]
    assert "535" in [str(b) for b in branch], plan.steps
    request.check_plans([plan], KB, RULES, "plan file", today=made)  # its own day: fine
    with pytest.raises(InvalidInput, match=r"stale plan.*made on 2025-12-01"):
        request.check_plans([plan], KB, RULES, "plan file", today=date(2026, 12, 3))
    fresh = plan_host(facts, None, Constraints(strategy="driver-pin", plan_date=date(2026, 12, 2)),
                      host="h1", python_envs=[], kb=KB, rules=RULES)  # fmt: skip
    request.check_plans([fresh], KB, RULES, "plan file", today=date(2026, 12, 3))  # nothing moved


def test_a_plan_dated_after_today_is_refused_or_judged_as_of_today() -> None:
    """A review (2026-12-03): a consistent plan dated in 2099 was never judged as of today, so a
    forged date chose what the engine would not choose now. More than a day ahead: refused; a
    day ahead (a planner in a time zone ahead): judged as of today like a past date."""
    from datetime import date

    facts = json.loads(Path("tests/fixtures/hosts/bionic-single-gpu.json").read_text())["facts"]
    ahead = plan_host(facts, None, Constraints(strategy="driver-pin", plan_date=date(2027, 6, 1)),
                      host="h1", python_envs=[], kb=KB, rules=RULES)  # fmt: skip
    with pytest.raises(InvalidInput, match=r"dated 2027-06-01, after today \(2026-12-03\)"):
        request.check_plans([ahead], KB, RULES, "plan file", today=date(2026, 12, 3))
    # made "tomorrow", 2025-12-29, when R535 is within six months of its end (R580), applied
    # on 2025-12-28, when the engine still picks R535: judged as of today, it differs, so it is
    # refused as stale
    tomorrow = date(2025, 12, 29)
    plan = plan_host(facts, None, Constraints(strategy="driver-pin", plan_date=tomorrow),
                     host="h1", python_envs=[], kb=KB, rules=RULES)  # fmt: skip
    with pytest.raises(InvalidInput, match=r"stale plan.*made on 2025-12-29"):
        request.check_plans([plan], KB, RULES, "plan file", today=date(2025, 12, 28))


@pytest.mark.parametrize(
    "text", ["not a date", "\uff12\uff10\uff12\uff16-12-06", "20261206", "2026-12-6"]
)
def test_a_plan_date_that_is_not_a_date_is_named_as_such(text: str) -> None:
    """A user trial (2026-12-06): such a date was reported as "after today", a string compared
    with today's; a full-width or compact ISO date is not YYYY-MM-DD either."""
    from dataclasses import replace
    from datetime import date

    facts = json.loads(Path("tests/fixtures/hosts/bionic-single-gpu.json").read_text())["facts"]
    plan = plan_host(facts, None, Constraints(strategy="driver-pin", plan_date=date(2026, 12, 1)),
                     host="h1", python_envs=[], kb=KB, rules=RULES)  # fmt: skip
    inputs = {**plan.inputs, "constraints": {**plan.inputs["constraints"], "plan_date": text}}
    with pytest.raises(InvalidInput, match=r"plan_date: not YYYY-MM-DD") as e:
        request.check_plans([replace(plan, inputs=inputs)], KB, RULES, "plan file")
    assert "after today" not in str(e.value)


def test_a_plan_whose_interim_moved_since_it_was_made_is_stale(monkeypatch) -> None:
    """Same strategy, steps and reboot, another interim today: `apply --interim` would run a
    mitigation the engine no longer picks, so the date check must look at the interim too."""
    from datetime import date

    (plan, *_) = _plans(Path("tests/fixtures/hosts/bionic-ga-2x3090.json"))
    made = replace(plan, inputs={**plan.inputs, "constraints": {"plan_date": "2026-06-20"}})
    step = Step("nccl_profile.yml", "p2p off", {"gpufix_nccl_profile_names": ["no-p2p"]})
    moved = replace(made, interim=Interim("nccl-profile", [step], "no P2P for now"))
    monkeypatch.setattr(request, "rederive", lambda p, *a, **k: moved)
    assert request._moved_since(made, KB, RULES, "plan file", date(2026, 12, 3)) == "2026-06-20"
    monkeypatch.setattr(request, "rederive", lambda p, *a, **k: made)
    assert request._moved_since(made, KB, RULES, "plan file", date(2026, 12, 3)) is None


@pytest.mark.parametrize("bdf", ["0000:00:01.0", "10000:e0:1a.0", "auto"])
def test_pcie_acs_takes_bridges_in_any_pci_domain(bdf: str) -> None:
    """A review: the facts keep VMD domains (10000:e0:1a.0), so a plan may name one; the spec
    refused it at apply, after the plan was made. pciutils takes 32-bit domains."""
    rolevars.check_vars("pcie_acs.yml", {"gpufix_pcie_acs_bridges": [bdf]}, "t", plan_step=True)


@pytest.mark.parametrize("bdf", ["1:00:01.0", "123456789:00:01.0", "0000:00:01.8", "00:01.0;x"])
def test_pcie_acs_refuses_what_is_no_pci_address(bdf: str) -> None:
    with pytest.raises(InvalidInput):
        rolevars.check_vars("pcie_acs.yml", {"gpufix_pcie_acs_bridges": [bdf]}, "t", plan_step=True)


def test_a_plan_with_the_users_torch_release_survives_its_rederivation(tmp_path: Path) -> None:
    facts = json.loads(Path("tests/fixtures/hosts/jammy-470-torch23.json").read_text())["facts"]
    c = Constraints(strategy="cuda-downgrade", torch="2.5.1")
    plan = plan_host(facts, None, c, host="h1", python_envs=[], kb=KB, rules=RULES)
    assert plan.steps[0].vars["gpufix_ml_stack_torch_version"] == "2.5.1"
    save_plans([plan], tmp_path / "p.json")
    (back,) = load_plans(tmp_path / "p.json")
    assert back.inputs["constraints"]["torch"] == "2.5.1"
    request.check_plans([back], KB, RULES, "plan file")


def test_a_plan_file_from_before_the_torch_constraint_is_not_an_edit(tmp_path: Path) -> None:
    """Constraints added later are left out of a plan while unset: a file written before them
    re-derives to the same plan (a review: every older file was refused as edited)."""
    facts = json.loads(Path("tests/fixtures/hosts/jammy-470-torch23.json").read_text())["facts"]
    plan = plan_host(facts, None, Constraints(), host="h1", python_envs=[], kb=KB, rules=RULES)
    assert "torch" not in plan.inputs["constraints"]
    save_plans([plan], tmp_path / "p.json")
    request.check_plans(load_plans(tmp_path / "p.json"), KB, RULES, "plan file")


def test_a_plan_with_a_chosen_torch_release_is_applied_only_when_it_is_named_again(
    tmp_path: Path,
) -> None:
    facts = json.loads(Path("tests/fixtures/hosts/jammy-470-torch23.json").read_text())["facts"]
    c = Constraints(strategy="cuda-downgrade", torch="2.5.1")
    plans = [plan_host(facts, None, c, host="h1", python_envs=[], kb=KB, rules=RULES)]
    for named in (None, "2.4.1"):
        with pytest.raises(
            InvalidInput, match=r"installs torch 2\.5\.1, a release chosen with --torch"
        ):
            request.check_torch(plans, named, "plan file p.json")
    request.check_torch(plans, "2.5.1", "plan file p.json")
    plain = [plan_host(facts, None, Constraints(), host="h1", python_envs=[], kb=KB, rules=RULES)]
    with pytest.raises(InvalidInput, match="names no torch release"):
        request.check_torch(plain, "2.5.1", "plan file p.json")
