"""Interim runs still in force on a host: an `apply --interim` run that changed the host, ended
well, and was not rolled back. After the permanent fix verifies at NCCL's defaults, apply names
them with the command that takes each off (docs/apply.md, "Interim and permanent")."""

from __future__ import annotations

from gpufix.apply.journal import FINAL_OK, FileJournal, list_runs
from gpufix.errors import InvalidInput


def in_force(host: str, *, besides: str) -> list[str]:
    """Run ids, newest first, of interim runs on `host` other than run `besides` whose change
    still holds (unreadable runs are skipped: a journal is data, not trusted to exist whole)."""
    out = []
    for run_id in reversed(list_runs()):
        if run_id == besides:
            continue
        try:
            j = FileJournal.open(run_id)
            if j.meta.get("kind") != "interim" or host not in j.hosts:
                continue
            rec = j.host(host)
        except InvalidInput:
            continue
        if rec.get("state") in FINAL_OK and j.changed_any(host):
            out.append(run_id)
    return out


def note(host: str, run_id: str, defaults: str) -> str:
    """What the permanent run's healthy verdict adds when interims still hold a setting."""
    held = in_force(host, besides=run_id)
    if not held:
        return ""
    cmds = "; ".join(f"`gpufix rollback {r} {host} -i INVENTORY`" for r in held)
    return (
        f"; verified with {defaults.replace(',', ', ')} at NCCL's default, which the interim "
        f"still overrides in /etc/nccl.conf: take it off with {cmds}"
    )
