"""Remove what gpufix itself left on hosts (playbooks/uninstall.yml): the probe program and its
verdict. A plan's changes stay; `gpufix rollback` undoes those from the journal."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpufix import runner
from gpufix.apply.locks import HostLocks
from gpufix.errors import InvalidInput


@dataclass(frozen=True)
class Removed:
    host: str
    state: str  # removed | nothing-to-remove | would-remove | failed | unreachable
    changed: int
    message: str


def live_hosts(target: str, inventory: Path) -> list[str]:
    from gpufix.inventory import resolve

    targets = resolve(target, inventory)
    recorded = [t.name for t in targets if t.snapshot is not None]
    if recorded:
        raise InvalidInput(f"{', '.join(recorded)}: recorded from a snapshot, not a live host")
    return [t.name for t in targets]


def uninstall(
    hosts: list[str],
    inventory: Path,
    *,
    check: bool,
    report: runner.Progress | None = None,
    forks: int = runner.FORKS,
) -> list[Removed]:
    with HostLocks(hosts):
        res = runner.run_playbook(
            "uninstall.yml",
            inventory,
            limit=",".join(hosts),
            check=check,
            timeout=600,
            forks=forks,
            progress=report,
        )
    out = []
    for h in hosts:
        hr = res.hosts.get(h)
        if hr is None:
            out.append(Removed(h, "failed", 0, f"no result ({res.status})"))
        elif hr.status == "unreachable":
            out.append(Removed(h, "unreachable", 0, hr.message))
        elif hr.status != "ok":
            out.append(Removed(h, "failed", hr.changed, hr.message))
        elif hr.changed:
            paths = [p for r in hr.results for p in r.get("paths") or ()]
            what = f"{'would remove' if check else 'removed'} {', '.join(paths)}" if paths else ""
            out.append(
                Removed(h, "would-remove" if check else "removed", len(paths) or hr.changed, what)
            )
        else:
            out.append(Removed(h, "nothing-to-remove", 0, ""))
    return out
