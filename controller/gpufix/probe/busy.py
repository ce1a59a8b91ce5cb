"""Hosts another gpufix run is changing, read before a probe runs there: its verdict would
describe a host half-changed (driver packages replaced under a loaded module), and its ranks
would hold the GPUs that run's reboot check waits for. Read only: a probe takes no lock."""

from __future__ import annotations

from pathlib import Path

from gpufix import runner
from gpufix.apply.hostlock import LOCK_PATH, HostLock, busy_with, read_local
from gpufix.inputs import one_line


def why(line: str) -> str:
    return (
        f"not probed: another gpufix run is changing this host ({line}, {LOCK_PATH}); "
        "its verdict would describe a host half-changed: probe again once that run has ended"
    )


def held_hosts(
    remote: list[str],
    local: list[str],
    inventory: Path,
    *,
    progress: runner.Progress | None = None,
    forks: int = runner.FORKS,
) -> dict[str, str]:
    """{host: why not probed}. A host whose record cannot be read (no root there, not reached)
    is probed all the same, with a warning: the probe itself finds out whether it answers."""
    out: dict[str, str] = {}
    unread: dict[str, str] = {}
    for name in local:
        try:
            line = busy_with(read_local())
        except OSError as e:
            unread[name] = f"{LOCK_PATH} could not be read: {one_line(str(e.strerror or e), 200)}"
            continue
        if line is not None:
            out[name] = why(line)
    if remote:
        held, lost, cannot = HostLock(inventory, forks=forks, report=progress).peek(remote)
        out.update({h: why(line) for h, line in held.items()})
        unread.update({**lost, **cannot})
    if progress is not None:
        for h, problem in unread.items():
            progress(h, f"warning: {problem}; probing all the same")
    return out
