"""A plan file is a request, not a program: an edited plan is refused (exit 3) before any host
is touched, in check mode too, and no payload in it ever runs (the marker file stays absent).

Every case applies a plan the engine really made, then edited by hand as an attacker would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gpufix.apply.journal import list_runs

from .conftest import CliRun, deep_copy, facts, make_plan, payloads, plan_doc, write

BASE = facts("bionic-ga-2x3090")["facts"]  # kernel-upgrade: make_plan forces it (no verdict)


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in _leaves(v, (*path, k))]
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in _leaves(v, (*path, i))]
    return [(path, node)]


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value


def _mutated(value: Any, marker: Path) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if value is None:
        return payloads(marker)[0]
    return payloads(marker)[0] if value != payloads(marker)[0] else "x"


def _apply(cli: CliRun, plan: Path, inv: Path, *extra: str) -> tuple[int, str]:
    code, _out, err = cli("apply", str(plan), "-i", str(inv), "--yes", *extra)
    return code, err


def _sampled_leaves() -> list[tuple[Any, ...]]:
    doc = plan_doc(make_plan(BASE))["plans"][0]
    out = []
    for n, (path, _) in enumerate(_leaves(doc)):
        in_facts = path[:2] in (("inputs", "facts"), ("extra", "facts"))
        if not in_facts or n % 10 == 0:
            out.append(path)
    return out


@pytest.mark.parametrize("path", _sampled_leaves(), ids=lambda p: "/".join(map(str, p)))
def test_any_edit_is_refused_before_a_host_is_touched(
    path: tuple[Any, ...], cli: CliRun, marker: Path, dead_inventory: Path, tmp_path: Path
) -> None:
    doc = plan_doc(make_plan(BASE))
    leaf = doc["plans"][0]
    for p in path[:-1]:
        leaf = leaf[p]
    _set(doc["plans"][0], path, _mutated(leaf[path[-1]], marker))
    code, err = _apply(cli, write(tmp_path / "plan.json", doc), dead_inventory)
    volatile = path[:2] == ("inputs", "facts") and path[2] in (
        "gpu_processes",
        "kernel_log",
        "module_version",
        "python",
    )
    if volatile:
        # facts that change between two gatherings are not the plan's evidence; a change there
        # may derive the same plan, which then meets the host (which fails at once here)
        assert code in (1, 3, 4), err
    else:
        assert code == 3, err
        assert list_runs() == [], "a refused plan left a run behind"


STEP_EDITS: list[tuple[str, Any]] = [
    ("playbook", "reboot.yml"),
    ("playbook", "rollback.yml"),
    ("playbook", "../../../tmp/evil.yml"),
    ("reboot", False),
    ("vars", {"gpufix_kernel_reboot_allowed": True, "gpufix_kernel_reboot_command": "touch M"}),
    ("vars", {"gpufix_kernel_reboot_allowed": True, "gpufix_kernel_target": "{{ 7*7 }}"}),
    (
        "vars",
        {
            "gpufix_rollback_files": {
                "/etc/shadow": {"exists": True, "mode": "644", "content_b64": "eA=="}
            }
        },
    ),
]


@pytest.mark.parametrize("check", [False, True], ids=["apply", "check"])
@pytest.mark.parametrize(("field", "value"), STEP_EDITS, ids=lambda x: str(x)[:30])
def test_edited_steps_are_refused_in_check_mode_too(
    field: str,
    value: Any,
    check: bool,
    cli: CliRun,
    marker: Path,
    dead_inventory: Path,
    tmp_path: Path,
) -> None:
    doc = plan_doc(make_plan(BASE))
    doc["plans"][0]["steps"][0][field] = deep_copy(value)
    code, err = _apply(
        cli, write(tmp_path / "p.json", doc), dead_inventory, *(["--check"] if check else [])
    )
    assert code == 3, err
    assert "request, not a program" in err or "plans/0" in err
    assert list_runs() == []


@pytest.mark.parametrize("payload_index", range(7))
@pytest.mark.parametrize("field", ["description", "var-value", "var-name", "strategy", "host"])
def test_payloads_in_step_fields_never_run(
    field: str,
    payload_index: int,
    cli: CliRun,
    marker: Path,
    dead_inventory: Path,
    tmp_path: Path,
) -> None:
    payload = payloads(marker)[payload_index]
    doc = plan_doc(make_plan(BASE))
    plan = doc["plans"][0]
    step = plan["steps"][0]
    if field == "description":
        step["description"] = payload
    elif field == "var-value":
        step["vars"]["gpufix_kernel_target"] = payload
    elif field == "var-name":
        step["vars"][payload] = True
    elif field == "strategy":
        plan["strategy"] = payload
    else:
        plan["host"] = payload
    for check in ([], ["--check"]):
        code, err = _apply(cli, write(tmp_path / "p.json", doc), dead_inventory, *check)
        assert code == 3, err
    assert list_runs() == []


@pytest.mark.parametrize("payload_index", range(7))
def test_payloads_in_python_envs_never_reach_a_host(
    payload_index: int, cli: CliRun, marker: Path, dead_inventory: Path, tmp_path: Path
) -> None:
    """python_envs becomes the facts module's arguments: refused by pattern before gathering."""
    doc = plan_doc(make_plan(BASE))
    doc["plans"][0]["inputs"]["python_envs"] = [payloads(marker)[payload_index]]
    code, err = _apply(cli, write(tmp_path / "p.json", doc), dead_inventory)
    assert code == 3 and "python_envs" in err, err


def test_python_envs_must_be_the_interpreters_the_facts_came_from(
    cli: CliRun, marker: Path, dead_inventory: Path, tmp_path: Path
) -> None:
    doc = plan_doc(make_plan(BASE))
    doc["plans"][0]["inputs"]["python_envs"] = ["/tmp/python3"]  # a valid path, not the facts'
    code, err = _apply(cli, write(tmp_path / "p.json", doc), dead_inventory)
    assert code == 3 and "interpreters the recorded facts" in err, err


def test_a_self_consistent_plan_with_a_hostile_fact_is_refused_by_the_role_spec(
    cli: CliRun, marker: Path, dead_inventory: Path, tmp_path: Path
) -> None:
    """The engine itself copies a host's python path into gpufix_ml_stack_python: the plan is
    genuine, but the value breaks the role's spec, so apply refuses it before Ansible sees it."""
    from gpufix.engine.plan import save_plans

    hostile = deep_copy(facts("bionic-ga-2x3090")["facts"])
    hostile["python_envs"] = []
    hostile["pythons"] = [
        {
            "path": "/usr/bin/python3.8{{ lookup('pipe','touch " + str(marker) + "') }}",
            "version": "3.8.0",
        }
    ]
    plan = make_plan(hostile, strategy="cuda-downgrade")
    assert "lookup" in str(plan.steps[0].vars.get("gpufix_ml_stack_python")), plan.steps[0].vars
    path = tmp_path / "p.json"
    save_plans([plan], path)
    for check in ([], ["--check"]):
        code, err = _apply(cli, path, dead_inventory, *check)
        assert code == 3 and "gpufix_ml_stack_python" in err, err
    assert list_runs() == []


def test_plans_of_an_older_format_or_without_inputs_are_refused(
    cli: CliRun, dead_inventory: Path, tmp_path: Path
) -> None:
    doc = plan_doc(make_plan(BASE))
    old = deep_copy(doc)
    old["version"] = 1
    code, err = _apply(cli, write(tmp_path / "old.json", old), dead_inventory)
    assert code == 3 and "re-plan" in err
    bare = deep_copy(doc)
    bare["plans"][0]["inputs"] = {}
    code, err = _apply(cli, write(tmp_path / "bare.json", bare), dead_inventory)
    assert code == 3 and "records no inputs" in err


DIGEST_A, DIGEST_B = "a" * 64, "b" * 64
IMAGE = f"nvcr.io/nvidia/pytorch:25.01-py3@sha256:{DIGEST_A}"


def _swap(doc: Any, old: str, new: str) -> Any:
    """The edit an attacker makes: the same string everywhere, so the file stays consistent and
    re-derives to itself."""
    return json.loads(json.dumps(doc).replace(old, new))


@pytest.mark.parametrize("path", ["/usr", "/etc", "/opt/../etc"])
def test_a_plan_file_cannot_choose_where_a_stack_is_installed(
    path: str, cli: CliRun, dead_inventory: Path, tmp_path: Path
) -> None:
    """No option sets the ML stack's venv; a file that moves it (to the system Python's prefix,
    where pip would install as root) is refused before any host is touched."""
    doc = plan_doc(make_plan(BASE, strategy="cuda-downgrade"))
    assert "/opt/gpufix/venv" in json.dumps(doc)
    code, err = _apply(cli, write(tmp_path / "p.json", _swap(doc, "/opt/gpufix/venv", path)),
                       dead_inventory, "--check")  # fmt: skip
    assert code == 3 and "venv_path" in err, err
    assert list_runs() == []


def test_a_plan_file_cannot_choose_the_image_root_pulls(
    cli: CliRun, dead_inventory: Path, tmp_path: Path
) -> None:
    host = facts("jammy-4xp100-torch28")["facts"]
    doc = plan_doc(make_plan(host, strategy="container-fallback", container_image=IMAGE))
    assert IMAGE in json.dumps(doc)
    plan = write(tmp_path / "p.json", doc)
    evil = f"evil.example.com/miner:latest@sha256:{DIGEST_B}"
    forged = write(tmp_path / "f.json", _swap(doc, IMAGE, evil))
    for args in ((plan,), (forged,), (forged, "--image", IMAGE), (plan, "--image", evil)):
        code, err = _apply(cli, args[0], dead_inventory, "--check", *args[1:])
        # a forged file's outcome no longer re-derives (an image the knowledge base does not
        # know is described as such): refused there, or at the image check
        refused = "container image" in err or (args[0] == forged and "not what gpufix" in err)
        assert code == 3 and refused, (args, err)
    code, err = _apply(cli, plan, dead_inventory, "--check", "--image", IMAGE)
    assert code != 3, err  # named again: it goes on to the (dead) host


def test_a_plan_of_another_knowledge_base_is_refused_as_stale(
    cli: CliRun, dead_inventory: Path, tmp_path: Path
) -> None:
    """The knowledge-base check names its own cause, before the plan is derived again (a
    mutation review, 2026-12-05: with the check off, the file was still refused, by the diff)."""
    doc = plan_doc(make_plan(BASE))
    doc["plans"][0]["kb_digest"] = "sha256:" + "0" * 64
    code, err = _apply(cli, write(tmp_path / "p.json", doc), dead_inventory)
    assert code == 3 and "made with another knowledge base" in err, err
    assert list_runs() == []


def test_recorded_facts_that_make_the_strategy_infeasible_are_an_edit(
    cli: CliRun, dead_inventory: Path, tmp_path: Path
) -> None:
    """The engine refuses the edited inputs (kernel-upgrade on a host already on the HWE
    kernel): the refusal is the edited file's, not a statement about a host nobody read (a
    review: "strategy kernel-upgrade is not feasible for h1: already on 5.4.0-150-generic")."""
    doc = plan_doc(make_plan(BASE))
    doc["plans"][0]["inputs"]["facts"]["kernel"]["running"] = "5.4.0-150-generic"
    code, err = _apply(cli, write(tmp_path / "p.json", doc), dead_inventory, "--check")
    assert code == 3, err
    assert "not what gpufix derives from its recorded inputs" in err, err
    assert "request, not a program" in err and "kernel-upgrade is not feasible with them" in err
    assert "already on" not in err and "not feasible for" not in err, err
    assert list_runs() == []


def test_a_host_named_twice_is_refused_before_any_plan_is_rederived(
    cli: CliRun, tmp_path: Path, dead_inventory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,289 copies of one plan took 38 s of re-derivation before "more than once" (attack
    review, 2026-12-06): the file is refused as it is read."""
    from gpufix.apply import request

    doc = plan_doc(make_plan(BASE))
    doc["plans"] *= 500
    derived: list[Any] = []
    real = request.rederive
    monkeypatch.setattr(request, "rederive", lambda *a, **k: derived.append(a) or real(*a, **k))
    code, _, err = cli("apply", str(write(tmp_path / "p.json", doc)), "-i", str(dead_inventory))
    assert code == 3 and err.count("\n") == 1
    assert "p.json names host(s) more than once: h1" in err
    assert derived == [] and list_runs() == []
