"""Stop what an interrupted probe run started on its hosts (playbooks/probe_stop.yml): Ansible
stops on Ctrl-C, the programs it started on the hosts do not."""

from __future__ import annotations

from pathlib import Path

from gpufix import runner
from gpufix.errors import GpufixError

STOP_S = 60  # one pkill per host
_NOT_DONE = ("failed", "unreachable")


def stop(hosts: list[str], inventory: Path, key: dict[str, str]) -> list[str]:
    """SIGTERM to the programs carrying the run's key (`{"gpufix_probe_store_key": K}` or
    `{"gpufix_probe_run_id": K}`); the hosts where that did not happen. A second Ctrl-C, or a
    run that cannot start, gives up on all of them."""
    try:
        res = runner.run_playbook(
            "probe_stop.yml",
            inventory,
            limit=",".join(hosts),
            extravars=key,
            forks=len(hosts),
            timeout=STOP_S,
        )
    except (KeyboardInterrupt, GpufixError):
        return list(hosts)
    return [h for h in hosts if (r := res.hosts.get(h)) is None or r.status in _NOT_DONE]


def interrupted(hosts: list[str], left: list[str], after: str) -> str:
    """The message of an interrupted run: what was stopped, or what runs on and until when."""
    if not left:
        return f"interrupted: stopped the probe programs on {', '.join(hosts)}"
    return f"interrupted: could not stop the probe programs on {', '.join(left)}: {after}"
