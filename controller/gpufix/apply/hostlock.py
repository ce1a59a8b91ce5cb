"""gpufix's apply lock on the hosts themselves (playbooks/host_lock.yml), beside the lock in
the controller's state directory: that one cannot see another controller (a second bastion,
an AWX job beside the CLI), and two controllers changing one host at once would interleave
packages, reboots and journals.

A holder from this controller (same machine and state directory) is stale by construction:
apply holds the state directory's own lock for that host, so no live run of ours holds it; it
is taken over. Another controller's holder blocks the host unless `--force host-lock`. What the
file says is data from the host: parsed and bounded, never trusted to be well formed.
"""

from __future__ import annotations

import json
import re
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufix import runner
from gpufix.apply.journal import now
from gpufix.apply.locks import me
from gpufix.inputs import one_line
from gpufix.paths import state_path

FORCE = "host-lock"
LOCK_PATH = "/var/lib/gpufix/apply.lock"  # playbooks/host_lock.yml's
_TOKEN = re.compile(r"^[0-9a-f]{32}$")


def owner() -> str:
    """This controller: the machine and the state directory its journals and locks live in."""
    return f"{socket.gethostname()}:{state_path()}"


def describe(text: str | None) -> tuple[str | None, str, str]:
    """(token, owner, one line for people) of a holder's file text, whatever it holds."""
    try:
        doc = json.loads(text or "")
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return None, "", f"an unreadable record ({one_line(repr(text or ''), 80)})"
    token = doc.get("token")
    token = token if isinstance(token, str) and _TOKEN.fullmatch(token) else None
    who = str(doc["owner"]) if isinstance(doc.get("owner"), str) else ""
    line = (
        f"{one_line(who or '?', 200)} (pid {one_line(str(doc.get('pid', '?')), 20)}, "
        f"since {one_line(str(doc.get('since', '?')), 40)})"
    )
    return token, who, line


@dataclass
class HostLock:
    """This run's lock on a set of hosts: take() once, release() at the end of the run."""

    inventory: Path
    forks: int = runner.FORKS
    force: bool = False
    report: runner.Progress | None = None
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    taken: list[str] = field(default_factory=list)

    def _record(self) -> dict[str, Any]:
        return {"token": self.token, "owner": owner(), "pid": str(me()["pid"]), "since": now()}

    def _play(self, hosts: list[str], action: str, takeover: str = "") -> runner.RunResult:
        return runner.run_playbook(
            "host_lock.yml",
            self.inventory,
            limit=",".join(hosts),
            extravars={
                "gpufix_host_lock_action": action,
                "gpufix_host_lock_holder": self._record(),
                "gpufix_host_lock_takeover": takeover,
            },
            timeout=300,
            forks=self.forks,
            progress=self.report,
        )

    def take(self, hosts: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """Lock hosts; returns ({host: why} held by another controller, {host: why} not
        reached). Taken hosts are in self.taken."""
        held: dict[str, str] = {}
        lost: dict[str, str] = {}
        if not hosts:
            return held, lost
        res = self._play(hosts, "take")
        again: dict[str, list[str]] = {}
        for h in hosts:
            got = self._result(res, h, held, lost)
            if got is None:
                continue
            if got.get("taken"):
                self.taken.append(h)
                continue
            token, who, line = describe(got.get("holder"))
            if token and (who == owner() or self.force):
                again.setdefault(token, []).append(h)  # stale (ours) or overridden
            elif not token:
                held[h] = (
                    f"the host's apply lock {LOCK_PATH} holds {line}: once no gpufix run is "
                    "changing this host, remove that file there and apply again"
                )
            else:
                held[h] = (
                    f"another gpufix run holds this host: {line}; let it finish, or if it is "
                    f"gone, apply again with --force {FORCE}"
                )
        for token, group in again.items():
            res = self._play(group, "take", takeover=token)
            for h in group:
                got = self._result(res, h, held, lost)
                if got is not None and got.get("taken"):
                    self.taken.append(h)
                elif got is not None:
                    held[h] = "the lock changed hands while it was taken over: apply again"
        return held, lost

    def peek(self, hosts: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """For a dry run, which takes no lock: ({host: why} held by another controller's run,
        {host: why} not reached). Its diffs would mean nothing while that run changes the host."""
        held: dict[str, str] = {}
        lost: dict[str, str] = {}
        if not hosts:
            return held, lost
        res = self._play(hosts, "peek")
        for h in hosts:
            got = self._result(res, h, held, lost)
            text = got.get("holder") if got is not None else None
            if text is None:
                continue
            token, who, line = describe(text)
            if who != owner() or not token:
                held[h] = (
                    f"another gpufix run holds this host: {line}; its diffs would mean nothing now"
                )
        return held, lost

    def release(self) -> None:
        """Release what take() got; a host that cannot be reached keeps a record of ours,
        which the next apply from this controller takes over."""
        if not self.taken:
            return
        res = self._play(self.taken, "release")
        for h in self.taken:
            hr = res.hosts.get(h)
            if (hr is None or hr.status != "ok") and self.report is not None:
                why = hr.message if hr else f"no result ({res.status})"
                self.report(h, f"warning: the host's apply lock stays: {one_line(why, 200)}")
        self.taken = []

    @staticmethod
    def _result(
        res: runner.RunResult, h: str, held: dict[str, str], lost: dict[str, str]
    ) -> dict[str, Any] | None:
        """The play's report for h, or None with the reason in lost (not reached) or held (the
        lock could not be taken there)."""
        hr = res.hosts.get(h)
        got = hr.data.get("gpufix_host_lock") if hr is not None else None
        if isinstance(got, dict) and hr is not None and hr.status == "ok":
            return got
        why = one_line((hr.message if hr is not None else "") or f"no result ({res.status})", 300)
        if hr is None or hr.status == "unreachable" or runner.python_unmanageable(why):
            lost[h] = f"not reached for the host's apply lock: {why}"
        else:
            held[h] = f"the host's apply lock could not be taken: {why}"
        return None
