"""Shared by the attack tests: a marker file every payload tries to create, the payloads, the
CLI called in-process, plans the engine really made, an inventory whose host nothing reaches."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gpufix.cli import main
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load as load_kb
from gpufix.engine.plan import Plan, save_plans
from gpufix.engine.rules import load as load_rules
from gpufix.planning import plan_host

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
# Documented exit codes (docs/exit-codes.md)
DOCUMENTED = {0, 1, 2, 3, 4, 5, 130}


def payloads(marker: Path) -> list[str]:
    """Jinja that would run a command on the controller, and shell words that would run one
    wherever a value is split by a shell."""
    m = str(marker)
    return [
        "{{ lookup('pipe', 'touch " + m + "') }}",
        "{% set x = lookup('pipe', 'touch " + m + "') %}",
        "$(touch " + m + ")",
        "`touch " + m + "`",
        "x; touch " + m,
        "x' ; touch " + m + " ; '",
        "/usr/bin/python3 timeout=1 python_envs=/bin/sh",
    ]


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    m = tmp_path / "MARKER"
    yield m
    assert not m.exists(), f"a payload ran: {m} was created"


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(ROOT)


CliRun = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> CliRun:
    def run(*argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exc:
            main(list(argv))
        out, err = capsys.readouterr()
        code = int(exc.value.code or 0)
        assert "internal error" not in err and "Traceback" not in err, err
        assert code in DOCUMENTED, (code, err)
        return code, out, err

    return run


def facts(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((HOSTS / f"{name}.json").read_text())
    return doc


def make_plan(host_facts: dict[str, Any], **constraints: Any) -> Plan:
    """A plan with steps: without a verdict the engine chooses no reboot on warnings alone, so
    the recorded bionic hosts' kernel upgrade is asked for, as a user would (--strategy)."""
    constraints.setdefault("strategy", "kernel-upgrade")
    return plan_host(
        host_facts,
        None,
        Constraints(**constraints),
        host="h1",
        python_envs=[],
        kb=load_kb(),
        rules=load_rules(),
    )


@pytest.fixture
def dead_inventory(tmp_path: Path) -> Path:
    """h1 is live to gpufix, but every Ansible run against it fails at once (its interpreter
    is /bin/false): a refusal that comes too late would still run nothing."""
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "all:\n  hosts:\n    h1:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: /bin/false\n"
    )
    return inv


def plan_doc(plan: Plan) -> dict[str, Any]:
    return json.loads(
        json.dumps({"format": "gpufix-plan-file", "version": 2, "plans": [plan.to_dict()]})
    )


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def saved(path: Path, plans: list[Plan]) -> Path:
    save_plans(plans, path)
    return path


def deep_copy(doc: Any) -> Any:
    return copy.deepcopy(doc)


def venv_python() -> str:
    return sys.executable
