"""The playbooks the engine calls Debian-only (engine/os_family.py DEBIAN_ONLY) are exactly those
whose roles assert a Debian-family host in their preflight, and that assert refuses another OS
before any change: a plan for a RHEL host says so up front because apply would stop there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from gpufix.engine.os_family import DEBIAN_ONLY
from role_check import ROOT, run_tasks

ASSERT = re.compile(r"ansible_facts\['os_family'\]\s*==\s*'Debian'")


def _roles(book: Path) -> set[str]:
    """Roles a playbook runs, by `roles:` or include_role/import_role."""
    text = book.read_text()
    found = {r["role"] for play in yaml.safe_load(text) or [] for r in play.get("roles") or []}
    found |= set(re.findall(r"(?:include|import)_role:\s*\n\s*name:\s*([a-z_]+)", text))
    return found


def _asserts_debian(role: str) -> bool:
    preflight = ROOT / "roles" / role / "tasks" / "preflight.yml"
    return preflight.exists() and bool(ASSERT.search(preflight.read_text()))


STEP_BOOKS = sorted(
    {
        m
        for p in (ROOT / "controller" / "gpufix" / "strategies").glob("*.py")
        for m in re.findall(r'"([a-z_]+\.yml)"', p.read_text())
    }
)


def test_step_playbooks_are_found() -> None:
    assert {"driver_pin.yml", "nccl_profile.yml", "pcie_acs.yml"} <= set(STEP_BOOKS)


@pytest.mark.parametrize("book", STEP_BOOKS)
def test_debian_only_matches_the_roles_asserts(book: str) -> None:
    roles = _roles(ROOT / "playbooks" / book)
    assert roles, book
    refuses = all(_asserts_debian(r) for r in roles)
    assert refuses == (book in DEBIAN_ONLY), (book, roles)


@pytest.mark.slow
@pytest.mark.parametrize("role", ["pcie_acs", "driver", "kernel"])
def test_preflight_refuses_another_os_before_any_change(tmp_path: Path, role: str) -> None:
    # Extra variables outrank the gathered facts when the role templates ansible_facts.
    facts = {"os_family": "RedHat", "distribution": "RedHat", "distribution_version": "8.8"}
    r = run_tasks(tmp_path, role, "preflight", {"ansible_facts": facts})
    assert r.returncode != 0, r.stdout[-2000:]
    assert "Ubuntu (Debian family) hosts only" in r.stdout, r.stdout[-2000:]
    assert "changed=0" in r.stdout


READ_ONLY = {"ansible.builtin.assert", "ansible.builtin.include_vars", "ansible.builtin.stat",
             "ansible.builtin.slurp", "ansible.builtin.set_fact"}  # fmt: skip


def _module(task: dict[str, object]) -> str:
    return next(k for k in task if k.startswith("ansible."))


@pytest.mark.parametrize("role", ["container_runtime", "driver", "kernel", "ml_stack", "pcie_acs"])
def test_the_os_assert_comes_before_any_change(role: str) -> None:
    """main.yml loads variables, then imports preflight.yml; in preflight.yml nothing before
    the Debian-family assert can change the host."""
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    first = next(
        i for i, t in enumerate(tasks) if t.get("ansible.builtin.import_tasks") == "preflight.yml"
    )
    for t in tasks[:first]:
        assert (
            _module(t) == "ansible.builtin.include_vars"
            or t.get("ansible.builtin.import_tasks") == "vars.yml"
        ), (role, t.get("name"))
    pre = yaml.safe_load((ROOT / "roles" / role / "tasks" / "preflight.yml").read_text())
    at = next(i for i, t in enumerate(pre) if ASSERT.search(yaml.safe_dump(t)))
    assert all(_module(t) in READ_ONLY for t in pre[:at]), role
    vars_tasks = ROOT / "roles" / role / "tasks" / "vars.yml"
    if vars_tasks.exists():
        for t in yaml.safe_load(vars_tasks.read_text()):
            assert _module(t) in READ_ONLY, (role, t.get("name"))
