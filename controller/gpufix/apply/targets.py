"""Which machine a run changed under each host name: the inventory's connection settings for
the host, recorded when the run starts. A resume or a rollback goes on only where the
inventory it is given still points the name at the same machine: an inventory given anew, or
edited since, could send the rest of a half-done change, or a rollback of another host's
packages, to a machine the run never looked at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufix.errors import InvalidInput
from gpufix.inputs import one_line

# What says where Ansible connects (the user it logs in as does not change the machine).
KEYS = ("ansible_host", "ansible_port", "ansible_connection")


def addresses(hosts: list[str], inventory: Path) -> dict[str, dict[str, str]]:
    """{host: the connection settings the inventory gives it} (empty: connect by the name)."""
    from gpufix.inventory import resolve

    found = {
        t.name: {k: str(t.vars[k]) for k in KEYS if k in t.vars}
        for t in resolve(",".join(hosts), inventory)
    }
    return {h: found.get(h, {}) for h in hosts}


def check_same(
    records: dict[str, dict[str, Any]], recorded_inventory: Any, inventory: Path, doing: str
) -> None:
    """InvalidInput naming the hosts the inventory now points elsewhere. A record without a
    target (a run from before they were recorded) is held to the run's inventory file."""
    with_target = {h: r["target"] for h, r in records.items() if isinstance(r.get("target"), dict)}
    if len(with_target) < len(records) and (
        not isinstance(recorded_inventory, str)
        or Path(recorded_inventory).resolve() != inventory.resolve()
    ):
        raise InvalidInput(
            f"not {doing}: the run used inventory {one_line(str(recorded_inventory), 200)}, "
            f"not {inventory}: give the run's inventory"
        )
    now = addresses(sorted(with_target), inventory) if with_target else {}
    moved = [h for h, was in with_target.items() if now.get(h) != was]
    if moved:
        h = moved[0]
        raise InvalidInput(
            f"not {doing}: {inventory} points {h} at {_where(h, now[h])}, the run changed "
            f"{_where(h, with_target[h])}"
            + (f" (and {len(moved) - 1} more host(s))" if len(moved) > 1 else "")
            + ": give the run's inventory or re-plan"
        )


def _where(host: str, target: dict[str, str]) -> str:
    if not target:
        return f"{host!r} (no ansible_host)"
    return one_line(", ".join(f"{k}={v}" for k, v in sorted(target.items())), 200)
