"""Resolve host and group names against an Ansible inventory, without running Ansible.

A host may be backed by a recorded snapshot (`gpufix_snapshot: path` in its vars): the
example inventory uses this so `gpufix plan host01` works on a fresh clone with no SSH.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufix.errors import InvalidInput


@dataclass(frozen=True)
class Target:
    name: str
    snapshot: Path | None  # set when the host is recorded, not live
    vars: dict[str, Any]


def _quiet_ansible() -> None:
    """gpufix reports unknown names itself, in one line: keep Ansible's warnings off stderr.
    ansible.constants reads these once, at its first import, so call this before any."""
    os.environ.setdefault("ANSIBLE_HOST_PATTERN_MISMATCH", "ignore")
    os.environ.setdefault("ANSIBLE_LOCALHOST_WARNING", "False")
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_WARNING", "False")


def _manager(inventory: Path) -> Any:
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    return InventoryManager(loader=DataLoader(), sources=[str(inventory)])


def resolve(pattern: str, inventory: Path) -> list[Target]:
    """Hosts matched by a host name, group name or Ansible pattern, in inventory order."""
    if not inventory.is_file() and not inventory.is_dir():
        raise InvalidInput(f"inventory not found: {inventory}")
    _quiet_ansible()
    from ansible.errors import AnsibleError
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    try:
        im = _manager(inventory)
        hosts = im.get_hosts(pattern=pattern)
    except AnsibleError as exc:
        raise InvalidInput(f"bad host pattern {pattern!r}: {exc}") from None
    if not hosts:
        if pattern in ("localhost", "127.0.0.1"):
            return [Target(name=pattern, snapshot=None, vars={"ansible_connection": "local"})]
        raise InvalidInput(
            f"no host or group {pattern!r} in {inventory} "
            f"(known groups: {', '.join(sorted(im.groups)) or 'none'})"
        )
    vm = VariableManager(loader=DataLoader(), inventory=im)
    targets = []
    for h in hosts:
        hv = vm.get_vars(host=h, include_hostvars=False)
        snap = hv.get("gpufix_snapshot")
        snap_path = None
        if snap:
            base = inventory if inventory.is_dir() else inventory.parent
            snap_path = (base / str(snap)).resolve()
        plain = {k: v for k, v in hv.items() if k.startswith(("gpufix_", "ansible_"))}
        targets.append(Target(name=h.name, snapshot=snap_path, vars=plain))
    return targets
