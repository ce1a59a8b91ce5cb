"""Every apt and dpkg-selections task waits for a dpkg/apt lock another process holds (apt-daily,
unattended-upgrades after a boot) and retries only while the failure is that lock.

Ansible's apt lock_timeout covers the cache update alone; apt-get install fails at once on a held
dpkg lock (bionic's apt 1.6 has no DPkg::Lock::Timeout), as dpkg --set-selections does. The
behaviour on a real held lock is tested in molecule/pcie_acs (refuse.yml)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_MODULES = ("ansible.builtin.apt", "ansible.builtin.dpkg_selections")


def _tasks(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if any(m in node for m in PACKAGE_MODULES):
            yield node
        for key in ("tasks", "block", "rescue", "always", "pre_tasks", "post_tasks", "handlers"):
            yield from _tasks(node.get(key))


def _files() -> list[Path]:
    return sorted(
        [
            *ROOT.glob("roles/*/tasks/*.yml"),
            *ROOT.glob("roles/*/handlers/*.yml"),
            *ROOT.glob("playbooks/*.yml"),
        ]
    )


def _package_tasks() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in _files():
        for task in _tasks(yaml.safe_load(path.read_text())):
            out.append((f"{path.relative_to(ROOT)}: {task.get('name')}", task))
    return out


def _busy_pattern(where: str) -> str:
    """The lock-message pattern the task's `until` searches for: the role's _gpufix_<role>_apt_busy
    or the playbook's __apt_busy."""
    path, _ = where.split(":", 1)
    if path.startswith("roles/"):
        role = path.split("/")[1]
        data = yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text())
        return str(data[f"_gpufix_{role}_apt_busy"])
    plays = yaml.safe_load((ROOT / path).read_text())
    return str(next(p["vars"]["__apt_busy"] for p in plays if "__apt_busy" in p.get("vars", {})))


def test_there_are_package_tasks_to_check() -> None:
    assert len(_package_tasks()) >= 10


@pytest.mark.parametrize(
    "where,task", _package_tasks(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_package_task_waits_for_a_held_lock(where: str, task: dict[str, Any]) -> None:
    module = next(m for m in PACKAGE_MODULES if m in task)
    if module == "ansible.builtin.apt":
        assert "lock_timeout" in task[module], f"{where}: no lock_timeout"
    reg = task.get("register")
    assert reg, f"{where}: no register for the retry"
    until = str(task.get("until", ""))
    assert until.startswith(f"{reg} is succeeded or {reg}.msg"), f"{where}: until {until!r}"
    assert "is not search(" in until, f"{where}: retries on every failure, not only a held lock"
    assert int(task.get("delay", 0)) > 0 and "retries" in task, f"{where}: no retries/delay"
    pattern = _busy_pattern(where)
    for message in (
        "E: Could not get lock /var/lib/dpkg/lock-frontend - open (11: Resource temporarily unavailable)",
        "dpkg: error: dpkg frontend lock was locked by another process with pid 4242",
        "dpkg: error: dpkg status database is locked by another process",
        "Failed to lock apt for exclusive operation: Failed to lock directory /var/lib/apt/lists/",
    ):
        assert re.search(pattern, message), f"{where}: {pattern!r} misses {message!r}"
    for message in (
        "No package matching 'nvidia-driver-999' is available",
        "Failed to find package 'x'",
    ):
        assert not re.search(pattern, message), f"{where}: {pattern!r} retries on {message!r}"
