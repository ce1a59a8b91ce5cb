"""A compromised GPU host reports hostile facts: a Jinja or shell payload in any string it
reports never runs on the controller, through plan, apply, status or rollback. Values the
engine copies into role variables are refused by the roles' specs before Ansible sees them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gpufix.apply.journal import FileJournal

from .conftest import CliRun, deep_copy, facts, payloads, write


def _string_paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in _string_paths(v, (*path, k))]
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in _string_paths(v, (*path, i))]
    return [path] if isinstance(node, str) else []


def _with(doc: dict[str, Any], path: tuple[Any, ...], value: str) -> dict[str, Any]:
    out = deep_copy(doc)
    node = out["facts"]
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return out


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["bionic-ga-2x3090", "bionic-hwe-8xa100"])
def test_a_payload_in_any_fact_never_runs_through_plan_and_apply(
    fixture: str, cli: CliRun, marker: Path, dead_inventory: Path, tmp_path: Path
) -> None:
    """Every string a host reports, one at a time, set to a Jinja payload, then planned and
    put through apply's checks (request, role specs) in-process. Every 25th case runs
    the real commands, `gpufix plan --facts -o` and `gpufix apply` (the host it meets fails at
    once, so nothing is changed anywhere)."""
    from gpufix.apply import request
    from gpufix.apply.rolevars import check_vars
    from gpufix.engine.context import Constraints
    from gpufix.engine.kb import load as load_kb
    from gpufix.engine.rules import load as load_rules
    from gpufix.errors import InvalidInput
    from gpufix.facts.snapshot import validate
    from gpufix.planning import plan_host

    kb, rules = load_kb(), load_rules()
    snap = facts(fixture)
    snap["host"] = "h1"
    payload = payloads(marker)[0]
    paths = _string_paths(snap["facts"])
    assert len(paths) > 50
    codes: dict[str, int] = {}
    for n, path in enumerate(paths):
        doc = _with(snap, path, payload)
        if n % 25 == 0:
            snap_file = write(tmp_path / "snap.json", doc)
            plan_file = tmp_path / "plan.json"
            plan_file.unlink(missing_ok=True)
            code, _, err = cli("plan", "h1", "--facts", str(snap_file), "-o", str(plan_file))
            assert code in (0, 3), (path, err)
            if code == 0:
                code, _, err = cli("apply", str(plan_file), "-i", str(dead_inventory), "--yes")
                # 3: a role spec refused a copied value; 1/4: the (dead) host was asked
                assert code in (1, 3, 4), (path, err)
            codes[f"cli {code}"] = codes.get(f"cli {code}", 0) + 1
            continue
        try:
            validate(doc)
        except InvalidInput:
            codes["facts schema"] = codes.get("facts schema", 0) + 1
            continue
        plan = plan_host(
            doc["facts"], None, Constraints(), host="h1", python_envs=[], kb=kb, rules=rules
        )
        request.check_plans([plan], kb, rules, "plan")  # genuine: the engine made it
        try:  # what rollout.validate checks per step (its inventory part is the same each time)
            for i, s in enumerate(plan.steps):
                check_vars(s.playbook, s.vars, f"steps/{i}/vars", plan_step=True)
            codes["checks pass"] = codes.get("checks pass", 0) + 1
        except InvalidInput:
            codes["role spec"] = codes.get("role spec", 0) + 1
    assert sum(codes.values()) == len(paths), codes


def _hostile_pythons(f: dict[str, Any], payload: str) -> None:
    f["python_envs"] = []
    for p in f["pythons"]:
        p["path"] = p["path"] + payload


def _hostile_interfaces(f: dict[str, Any], payload: str) -> None:
    for i in f["network"]["interfaces"]:
        if i["name"] != "lo":
            i["name"] = "eth" + payload


@pytest.mark.parametrize(
    ("strategy", "mutate", "variable"),
    [
        ("cuda-downgrade", _hostile_pythons, "gpufix_ml_stack_python"),
        ("nccl-profile", _hostile_interfaces, "gpufix_nccl_profile_socket_ifname"),
    ],
    ids=["python-path", "interface-name"],
)
def test_host_strings_the_engine_copies_are_refused_by_the_role_spec(
    strategy: str,
    mutate: Any,
    variable: str,
    cli: CliRun,
    marker: Path,
    dead_inventory: Path,
    tmp_path: Path,
) -> None:
    from gpufix.engine.plan import save_plans

    from .conftest import make_plan

    hostile = deep_copy(facts("bionic-ga-2x3090")["facts"])
    mutate(hostile, payloads(marker)[0])
    if strategy == "nccl-profile":  # the engine names an interface only from probe evidence
        verdict = json.loads(Path("docs/device/h200-probe-healthy.json").read_text())
        verdict.update(
            verdict="hung",
            stalled={"phase": "pg_init", "ranks": [1]},
            causes=[],
            scope="multi-node",
            failed_layer="interface",
            hosts=["a", "b"],
            failed_hosts=["b"],
            # a multi-node verdict's facts are the run's, not one machine's driver and kernel
            facts={"master": "10.0.0.1:29500", "ifname": None, "ifname_candidates": []},
        )
        plan = _with_verdict(hostile, verdict, strategy)
    else:
        plan = make_plan(hostile, strategy=strategy)
    copied = [s.vars.get(variable) for s in plan.steps]
    assert any(isinstance(v, str) and "lookup" in v for v in copied), plan.steps
    save_plans([plan], tmp_path / "p.json")
    code, _, err = cli("apply", str(tmp_path / "p.json"), "-i", str(dead_inventory), "--yes")
    assert code == 3 and variable in err, err


def _with_verdict(f: dict[str, Any], verdict: dict[str, Any], strategy: str) -> Any:
    from gpufix.engine.context import Constraints
    from gpufix.engine.kb import load as load_kb
    from gpufix.engine.rules import load as load_rules
    from gpufix.planning import plan_host

    return plan_host(
        f,
        verdict,
        Constraints(strategy=strategy),
        host="h1",
        python_envs=[],
        kb=load_kb(),
        rules=load_rules(),
    )


def _hostile_journal(marker: Path) -> FileJournal:
    p = payloads(marker)
    j = FileJournal.start(
        [
            {
                "host": "h1",
                "strategy": "nccl-profile",
                "steps": [{"playbook": "nccl_profile.yml", "vars": {}}],
            }
        ],
        plan_digest="sha256:x",
        options={"inventory": "/nonexistent"},
    )
    j.update(
        "h1",
        before={
            "packages": {"nvidia-driver-535": p[0], p[2]: "1.0"},
            "holds": [p[3]],
            "files": {"/etc/nccl.conf": {"exists": True, "mode": "644", "content_b64": p[0]}},
            "kernel": {"running": p[0]},
        },
        after={"packages": {"nvidia-driver-535": "2", p[4]: "1"}, "holds": []},
    )
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=1, files=["/etc/nccl.conf"], message=p[0])
    j.add_verdict("h1", "after-apply", {"verdict": "hung", "error": p[0]})
    j.set_state("h1", "failed", "[red]" + p[0] + "\x1b[2J")
    j.finish("complete")
    return j


def test_hostile_journal_values_never_run_through_status_or_rollback(
    cli: CliRun, marker: Path, dead_inventory: Path
) -> None:
    j = _hostile_journal(marker)
    code, out, _ = cli("status", j.run_id)
    assert code == 0 and "\x1b" not in out and "[red]" in out  # shown, never interpreted
    code, out, _ = cli("status", j.run_id, "--json")
    assert code == 0 and json.loads(out)["hosts"][0]["state"] == "failed"
    code, _, err = cli("rollback", j.run_id, "h1", "-i", str(dead_inventory))
    assert code == 3, err  # a value breaks rollback.yml's spec: nothing is run
    assert FileJournal.open(j.run_id).host("h1")["state"] == "failed"


def test_a_journal_cannot_make_rollback_write_outside_the_strategy_files(
    cli: CliRun, dead_inventory: Path
) -> None:
    from gpufix.apply.rollback import rollback_vars

    j = FileJournal.start(
        [{"host": "h1", "strategy": "nccl-profile", "steps": [{"playbook": "nccl_profile.yml"}]}],
        plan_digest="sha256:y",
        options={},
    )
    evil = {"exists": True, "mode": "600", "content_b64": "cm9vdDo6MDowOjo6Cg=="}
    j.update("h1", before={"files": {"/etc/shadow": evil, "/root/.ssh/authorized_keys": evil}})
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=1, files=["/etc/shadow"])
    assert rollback_vars(j.host("h1"))["gpufix_rollback_files"] == {}


@pytest.mark.parametrize("host", ["../../etc/passwd", "a/b", "..", "h1\n", "$(id)"])
def test_journal_host_names_cannot_leave_the_run_directory(cli: CliRun, host: str) -> None:
    j = FileJournal.start(
        [{"host": "h1", "strategy": "nccl-profile", "steps": []}], plan_digest="d", options={}
    )
    meta = json.loads((j.path / "run.json").read_text())
    meta["hosts"] = [host]
    (j.path / "run.json").write_text(json.dumps(meta))
    code, _, err = cli("status", j.run_id)
    assert code == 3 and "host" in err
    code, _, _ = cli("rollback", j.run_id, host)
    assert code == 3


def test_a_hostile_driver_origin_is_refused_before_it_becomes_a_role_variable(
    marker: Path,
) -> None:
    """facts 1.2.0's `packages.driver_rollback.origin` becomes gpufix_driver_source when a plan
    keeps the driver: any value but the four the schema names is refused with the snapshot,
    and the role spec refuses anything but ubuntu/nvidia even if it got that far."""
    from gpufix.apply.rolevars import check_vars
    from gpufix.errors import InvalidInput
    from gpufix.facts.snapshot import validate

    doc = facts("bionic-hwe-8xa100")

    def with_origin(origin: str) -> dict[str, Any]:
        out = deep_copy(doc)
        out["facts"]["packages"]["driver_rollback"] = {
            "package": "nvidia-driver-535",
            "version": "535.154.05-0ubuntu0.18.04.1",
            "installable": True,
            "origin": origin,
        }
        return out

    validate(with_origin("nvidia"))  # the shape itself is fine
    check_vars("driver_pin.yml", {"gpufix_driver_branch": "535", "gpufix_driver_source": "nvidia"},
               "steps/0/vars", plan_step=True)  # fmt: skip
    for bad in [*payloads(marker), "ppa ", "Nvidia"]:
        hostile = with_origin(bad)
        with pytest.raises(InvalidInput):
            validate(hostile)
        with pytest.raises(InvalidInput):
            check_vars(
                "driver_pin.yml",
                {"gpufix_driver_branch": "535", "gpufix_driver_source": bad},
                "steps/0/vars",
                plan_step=True,
            )
    assert not marker.exists()


def test_a_journal_cannot_name_the_inventory_rollback_runs(
    cli: CliRun, marker: Path, tmp_path: Path
) -> None:
    """A run's journal recorded its inventory path, and `gpufix rollback RUN HOST` without -i
    handed it to Ansible, which runs an executable inventory as a script (and templates a YAML
    one's host vars): a journal from a ticket or a backup could run a command as root (attack
    review, 2026-12-06). The path only names what to pass now."""
    script = tmp_path / "inventory.sh"
    script.write_text(f'#!/bin/sh\ntouch {marker}\necho \'{{"all": {{"hosts": ["h1"]}}}}\'\n')
    script.chmod(0o755)
    j = FileJournal.start(
        [{"host": "h1", "strategy": "nccl-profile", "steps": []}],
        plan_digest="sha256:x",
        options={"inventory": str(script)},
    )
    j.finish("complete")
    code, _, err = cli("rollback", j.run_id, "h1")
    assert code == 3 and err.count("\n") == 1, err
    assert f"used inventory {script}: give -i PATH" in err
    assert not marker.exists()
