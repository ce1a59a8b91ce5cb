"""gpufix's apply lock on the hosts themselves (playbooks/host_lock.yml), beside the lock in
the controller's state directory: that one cannot see another controller (a second bastion,
an AWX job beside the CLI), nor one machine under two inventory names, and two runs changing
one host at once would interleave packages, reboots and journals.

A record left by a run of this controller (same machine and state directory) whose process is
gone is stale and is taken over; one whose process still runs (the machine under another name)
or that this very run wrote under another name blocks the host, as another controller's does
unless `--force host-lock`. What the file says is data from the host: parsed and bounded, never
trusted to be well formed.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import socket
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufix import runner
from gpufix.apply.journal import now
from gpufix.apply.locks import me, process_alive
from gpufix.inputs import one_line
from gpufix.paths import state_path

FORCE = "host-lock"
LOCK_PATH = "/var/lib/gpufix/apply.lock"  # playbooks/host_lock.yml's
_TOKEN = re.compile(r"^[0-9a-f]{32}$")
_UNREADABLE = "unreadable: "  # host_lock.yml's answer for a file it could not read


def owner() -> str:
    """This controller: the machine and the state directory its journals and locks live in."""
    return f"{socket.gethostname()}:{state_path()}"


@dataclass(frozen=True)
class Holder:
    """What a host's lock record says, as far as it can be read."""

    token: str | None  # None: not a record gpufix could take over
    owner: str
    pid: int
    start: str | None
    line: str  # for people: one bounded line


def describe(text: object) -> Holder:
    try:
        # the host's answer: text, or anything else a changed script could send back
        doc = json.loads(text or "") if text is None or isinstance(text, str) else None
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        return Holder(None, "", 0, None, f"an unreadable record ({one_line(repr(text or ''), 80)})")
    token = doc.get("token")
    token = token if isinstance(token, str) and _TOKEN.fullmatch(token) else None
    who = str(doc["owner"]) if isinstance(doc.get("owner"), str) else ""
    pid_text = str(doc.get("pid", ""))
    start = doc.get("pid_start")
    line = (
        f"{one_line(who or '?', 200)} (pid {one_line(pid_text or '?', 20)}, "
        f"since {one_line(str(doc.get('since', '?')), 40)})"
    )
    pid = int(pid_text) if pid_text.isdigit() and len(pid_text) < 10 else 0
    return Holder(token, who, pid, start if isinstance(start, str) else None, line)


def busy_with(text: object) -> str | None:
    """The holder's line when a record may name a run still changing the host; None for no
    record, or one a run of this controller left and is gone (the next run takes it over)."""
    if text is None:
        return None
    holder = describe(text)
    ours = holder.owner == owner() and holder.token is not None
    if ours and not process_alive(holder.pid, holder.start or None):
        return None
    return holder.line


def read_local() -> str | None:
    """This machine's own record (a probe of localhost reads it without Ansible), or None when
    there is none. OSError when it cannot be read (another account's, not a regular file)."""
    try:
        fd = os.open(LOCK_PATH, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{LOCK_PATH} is not a regular file")
        return fh.read(4096).decode("utf-8", "replace")


@dataclass
class HostLock:
    """This run's lock on a set of hosts: take() once, release() at the end of the run."""

    inventory: Path
    forks: int = runner.FORKS
    force: bool = False
    report: runner.Progress | None = None
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    taken: list[str] = field(default_factory=list)
    # every host a take was sent to: one cut short (Ctrl-C, a time limit) may have written our
    # record there, and release() removes only records that carry our token
    sent: list[str] = field(default_factory=list)

    def _record(self) -> dict[str, Any]:
        mine = me()
        return {
            "token": self.token,
            "owner": owner(),
            "pid": str(mine["pid"]),
            "pid_start": str(mine["start"] or ""),
            "since": now(),
        }

    def _play(
        self, hosts: list[str], action: str, takeover: str = "", wait: int = 0
    ) -> runner.RunResult:
        rounds = math.ceil(len(hosts) / max(1, self.forks))
        return runner.run_playbook(
            "host_lock.yml",
            self.inventory,
            limit=",".join(hosts),
            extravars={
                "gpufix_host_lock_action": action,
                "gpufix_host_lock_holder": self._record(),
                "gpufix_host_lock_takeover": takeover,
                "gpufix_host_lock_wait": wait,
            },
            # a connection and two short tasks per host, after the wait
            timeout=120 + 60 * rounds + wait,
            forks=self.forks,
            progress=self.report,
        )

    def _why_held(self, h: Holder) -> str | None:
        """None when the record may be taken over; else why not, for the operator."""
        if h.token is None:
            return (
                f"the host's apply lock {LOCK_PATH} holds {h.line}: once no gpufix run is "
                "changing this host, remove that file there and apply again"
            )
        if h.token == self.token:
            return "this run holds this machine already, under another inventory name"
        if h.owner == owner():
            if process_alive(h.pid, h.start or None):
                return (
                    f"another run of this controller holds this machine ({h.line}): the same "
                    "machine under another inventory name?"
                )
            return None  # a run of ours that is gone
        if self.force:
            return None
        return (
            f"another gpufix run holds this host: {h.line}; let it finish, or if it is gone, "
            f"apply again with --force {FORCE}"
        )

    def take(
        self, hosts: list[str], booting: Iterable[str] = (), wait: int = 0
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Lock hosts; returns ({host: why} held by another run, {host: why} not reached).
        Taken hosts are in self.taken. Hosts in `booting` (a resumed run's, left rebooting) are
        given `wait` seconds to answer first; the others are not waited for."""
        held: dict[str, str] = {}
        lost: dict[str, str] = {}
        if not hosts:
            return held, lost
        self.sent += [h for h in hosts if h not in self.sent]
        late = [h for h in hosts if h in set(booting)] if wait > 0 else []
        first: dict[str, runner.RunResult] = {}
        for group, secs in (([h for h in hosts if h not in late], 0), (late, wait)):
            if group:
                played = self._play(group, "take", wait=secs)
                first.update({h: played for h in group})
        again: dict[str, list[str]] = {}
        for h in hosts:
            got = self._result(first[h], h, held, lost)
            if got is None:
                continue
            if got.get("taken") is True:
                self.taken.append(h)
                continue
            holder = describe(got.get("holder"))
            why = self._why_held(holder)
            if why is None and holder.token is not None:
                again.setdefault(holder.token, []).append(h)
            else:
                held[h] = why or "the host's apply lock is held"
        for token, group in again.items():
            res = self._play(group, "take", takeover=token)
            for h in group:
                got = self._result(res, h, held, lost)
                if got is not None and got.get("taken") is True:
                    self.taken.append(h)
                elif got is not None:
                    held[h] = "the lock changed hands while it was taken over: apply again"
        return held, lost

    def peek(self, hosts: list[str]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """Read the records, take no lock and write nothing: ({host: holder's line} for hosts
        another run holds, {host: why} not reached, {host: why} whose record could not be read,
        no root there for one)."""
        held: dict[str, str] = {}
        lost: dict[str, str] = {}
        unread: dict[str, str] = {}
        if not hosts:
            return held, lost, unread
        res = self._play(hosts, "peek")
        for h in hosts:
            got = self._result(res, h, unread, lost, verb="read")
            text = got.get("holder") if got is not None else None
            if isinstance(text, str) and text.startswith(_UNREADABLE):
                # the script could not read the file (a FIFO, no permission): not a holder
                unread[h] = f"the host's apply lock could not be read: {one_line(text, 200)}"
                continue
            line = busy_with(text)
            if line is not None:
                held[h] = line
        return held, lost, unread

    def release(self) -> None:
        """Remove our record wherever a take was sent (the script removes only a record with
        our token); a host that cannot be reached keeps it, and the next apply from this
        controller takes it over. A second Ctrl-C here leaves the records, not the first error."""
        if not self.sent:
            return
        try:
            res = self._play(self.sent, "release")
        except KeyboardInterrupt:
            self._warn(self.sent, "interrupted")
            return
        finally:
            hosts, self.sent, self.taken = self.sent, [], []
        for h in hosts:
            hr = res.hosts.get(h)
            if hr is None or hr.status != "ok":
                self._warn([h], hr.message if hr else f"no result ({res.status})")

    def _warn(self, hosts: list[str], why: str) -> None:
        if self.report is not None:
            for h in hosts:
                self.report(h, f"warning: the host's apply lock may stay: {one_line(why, 200)}")

    @staticmethod
    def _result(
        res: runner.RunResult,
        h: str,
        held: dict[str, str],
        lost: dict[str, str],
        verb: str = "taken",
    ) -> dict[str, Any] | None:
        """The play's report for h, or None with the reason in lost (not reached) or held (the
        lock could not be taken there)."""
        hr = res.hosts.get(h)
        got = hr.data.get("gpufix_host_lock") if hr is not None else None
        if isinstance(got, dict) and hr is not None and hr.status == "ok":
            return got
        why = one_line((hr.message if hr is not None else "") or f"no result ({res.status})", 300)
        # a host that did not answer within the wait for its reboot is not reached either
        late = why.startswith("timed out waiting for")
        if hr is None or hr.status == "unreachable" or late or runner.python_unmanageable(why):
            lost[h] = f"not reached for the host's apply lock: {why}"
        else:
            held[h] = f"the host's apply lock could not be {verb}: {why}"
        return None
