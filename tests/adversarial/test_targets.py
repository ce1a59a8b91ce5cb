"""An empty or odd target never widens to the whole inventory: `gpufix apply --strategy S
"$UNSET" --yes` must not touch the fleet. Every command that takes a target refuses it (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import CliRun

BAD = [
    "",
    ",",
    ",,",
    "~[",
    "~.*",
    " host01",
    "host01 ",
    "host01,",
    ",host01",
    "host01:",
    "!",
    "host01\n",
    "h1;id",
    "$(id)",
    "{{ x }}",
]


@pytest.mark.parametrize("target", BAD, ids=repr)
@pytest.mark.parametrize(
    "argv",
    [
        ["plan"],
        ["facts"],
        ["probe"],
        ["apply", "--strategy", "nccl-profile", "--yes"],
        ["uninstall", "--yes"],
    ],
    ids=lambda a: a[0],
)
def test_bad_targets_are_refused(
    argv: list[str], target: str, cli: CliRun, marker: Path, dead_inventory: Path
) -> None:
    code, out, err = cli(*argv, target, "-i", str(dead_inventory))
    assert code == 3, err
    assert out == "" and err.count("\n") == 1


@pytest.mark.parametrize("target", ["host01", "gpu_fleet", "host01,host02", "all:!host02"])
def test_ordinary_targets_still_work(target: str, cli: CliRun) -> None:
    code, _, err = cli("plan", target, "--json")
    assert code == 0, err


def test_a_malformed_inventory_names_its_cause_in_one_line(cli: CliRun, tmp_path: Path) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1: {ansible_host: x\n  bad: [\n")
    code, _, err = cli("plan", "h1", "-i", str(inv))
    assert code == 3 and err.count("\n") == 1
    assert "cannot parse inventory" in err and "line 4" in err and "WARNING" not in err


@pytest.mark.parametrize("name", ["ungrouped", "all"])
def test_a_host_named_like_a_builtin_group_is_a_malformed_inventory(
    name: str, cli: CliRun, tmp_path: Path
) -> None:
    """Ansible refuses it after parsing, with a plain Exception (user trial, 2026-12-06: it
    surfaced as an internal error, exit 1)."""
    inv = tmp_path / "inv.yml"
    inv.write_text(f"all:\n  hosts:\n    {name}:\n      gpufix_snapshot: s.json\n")
    code, _, err = cli("plan", name, "-i", str(inv))
    assert code == 3 and err.count("\n") == 1, err
    assert "cannot parse inventory" in err and "internal error" not in err, err


def test_a_plan_made_inside_a_container_does_not_change_the_container(
    cli: CliRun, dead_inventory: Path, tmp_path: Path
) -> None:
    """Facts gathered inside a container make host-level steps aimed at the container's host;
    apply against the container (the inventory host) refuses them before any run."""
    from gpufix.engine.plan import save_plans

    from .conftest import facts, make_plan

    plan = make_plan(facts("container-acs-4xada")["facts"], strategy="pcie-acs")
    assert plan.steps and {s.target for s in plan.steps} == {"container-host"}, plan.steps
    save_plans([plan], tmp_path / "p.json")
    code, _, err = cli("apply", str(tmp_path / "p.json"), "-i", str(dead_inventory), "--yes")
    assert code == 3 and "container's host" in err, err


def test_an_incomplete_plan_is_refused_with_its_needs(
    cli: CliRun, dead_inventory: Path, tmp_path: Path
) -> None:
    """A multi-node interface stall without interface facts: the socket-ifname step has no
    interface, the plan says so (complete: false), and apply will not guess one."""
    from gpufix.engine.plan import save_plans

    from .conftest import ROOT, Constraints, facts, load_kb, load_rules, plan_host

    f = facts("bionic-ga-2x3090")["facts"]
    f["network"] = {"unknown": "not read"}
    verdict = json.loads((ROOT / "docs/device/h200-probe-healthy.json").read_text())
    # The H200's own readings (torch, NCCL, driver) are not this host's: drop them.
    verdict.update(verdict="hung", causes=[], stalled={"phase": "pg_init", "ranks": [1]},
                   scope="multi-node", failed_layer="interface", hosts=["a", "b"],
                   failed_hosts=["b"], facts={})  # fmt: skip
    plan = plan_host(f, verdict, Constraints(), host="h1", python_envs=[], kb=load_kb(),
                     rules=load_rules())  # fmt: skip
    assert plan.steps and plan.extra["complete"] is False, plan.extra
    save_plans([plan], tmp_path / "p.json")
    code, _, err = cli("apply", str(tmp_path / "p.json"), "-i", str(dead_inventory), "--yes")
    assert code == 3 and "incomplete" in err and "interfaces" in err, err


def test_a_plan_for_a_group_name_is_refused_by_apply(cli: CliRun, tmp_path: Path) -> None:
    """`plan gpu_fleet --facts SNAP -o F` records the group's name as the plan's host; apply
    must not expand it (freshness would gather every host of the group): exit 3, nothing run
    (review, 2026-12-03)."""
    inv = tmp_path / "g.yml"
    inv.write_text(
        "all:\n  children:\n    gpu_fleet:\n      hosts:\n"
        "        a1: {ansible_host: 192.0.2.1}\n        a2: {ansible_host: 192.0.2.2}\n"
    )
    snap = str(Path(__file__).resolve().parents[1] / "fixtures/hosts/focal-4x4090.json")
    plan = tmp_path / "p.json"
    code, _, err = cli("plan", "gpu_fleet", "-i", str(inv), "--facts", snap, "-o", str(plan))
    assert code == 0, err
    code, _, err = cli("apply", str(plan), "-i", str(inv), "--check")
    assert code == 3 and "not a host of" in err and "but a group or pattern" in err, err
    # a host the inventory simply lacks is named as missing, not as a group (review, 2026-12-03)
    other = tmp_path / "o.yml"
    other.write_text("all:\n  hosts:\n    b1: {ansible_host: 192.0.2.3}\n")
    code, _, err = cli("apply", str(plan), "-i", str(other), "--check")
    assert code == 3 and "group or pattern" not in err and "'gpu_fleet'" in err, err


def test_plan_o_writes_no_file_apply_would_refuse(cli: CliRun, tmp_path: Path) -> None:
    """An inventory host name no plan host may have (`h1;id`): plan -o refuses to write it
    (exit 3) instead of writing a file its own apply rejects (review, 2026-12-03)."""
    snap = Path(__file__).resolve().parents[1] / "fixtures/hosts/focal-4x4090.json"
    inv = tmp_path / "i.yml"
    inv.write_text(f'all: {{hosts: {{"h1;id": {{gpufix_snapshot: {snap}}}}}}}\n')
    code, _, err = cli("plan", "all", "-i", str(inv), "-o", str(tmp_path / "p.json"))
    assert code == 3 and "not written" in err, err
    assert not (tmp_path / "p.json").exists()


def test_an_odd_inventory_says_what_is_wrong(cli: CliRun, tmp_path: Path) -> None:
    """A FIFO given as -i is not "not found"; an empty gpufix_snapshot does not make a recorded
    host live (review, 2026-12-03)."""
    import os

    fifo = tmp_path / "inv"
    os.mkfifo(fifo)
    code, _, err = cli("plan", "host01", "-i", str(fifo))
    assert code == 3 and "not a regular file or a directory" in err, err
    inv = tmp_path / "i.yml"
    inv.write_text('all: {hosts: {h1: {gpufix_snapshot: ""}}}\n')
    code, _, err = cli("plan", "h1", "-i", str(inv))
    assert code == 3 and "gpufix_snapshot is empty" in err, err
    for text in ("", "[gpu]\n"):
        inv.write_text(text)
        code, _, err = cli("plan", "all", "-i", str(inv))
        assert code == 3 and "lists no hosts" in err and "known groups" not in err, err


def test_only_ansibles_plain_exception_is_read_as_a_bad_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug inside the parse (a TypeError) is not reported as the user's bad inventory."""
    from ansible.inventory import manager
    from gpufix import inventory
    from gpufix.errors import InvalidInput

    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1: {}\n")

    def broken(*_args: object, **_kwargs: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(manager, "InventoryManager", broken)
    with pytest.raises(TypeError):
        inventory._manager(inv)

    def refuses(*_args: object, **_kwargs: object) -> None:
        raise Exception("can't add group to itself")  # the plain class Ansible raises

    monkeypatch.setattr(manager, "InventoryManager", refuses)
    with pytest.raises(InvalidInput, match="can't add group to itself"):
        inventory._manager(inv)
