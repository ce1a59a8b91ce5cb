"""One lock per host in the state directory, so two apply runs never change one host at once.

A lock is a file locks/<host>.lock held with flock(2) for the life of the run (the kernel drops
it when the process dies) and naming its holder (pid and process start time), so a refusal says
who holds it and a file left by a dead or reused pid is taken over, not obeyed.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from gpufix.errors import GpufixError, InvalidInput
from gpufix.paths import private_dir

HOST_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,252}$")


def process_start(pid: int) -> str | None:
    """The start time of a process (field 22 of /proc/PID/stat, clock ticks since boot), or
    None when there is no such process or no /proc. With the pid it names one process for good:
    a reused pid has another start time."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def process_alive(pid: int, start: str | None) -> bool:
    """True when pid runs and, if a start time was recorded, it is the same process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return start is None or process_start(pid) in (None, start)


def me() -> dict[str, Any]:
    return {"pid": os.getpid(), "start": process_start(os.getpid())}


def check_host_name(host: str) -> None:
    """A host name becomes a file name: refuse anything that could leave its directory."""
    if not isinstance(host, str) or not HOST_NAME.fullmatch(host) or host in ("run",):
        raise InvalidInput(
            f"host name {str(host)[:80]!r} cannot be journaled or locked (unexpected characters)"
        )


class HostLocks:
    """Locks for a set of hosts, all or none; a context manager that releases them."""

    def __init__(self, hosts: list[str]) -> None:
        for h in hosts:
            check_host_name(h)
        self.hosts = sorted(set(hosts))
        self._held: dict[str, int] = {}

    def __enter__(self) -> HostLocks:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        directory = private_dir("locks")
        try:
            for h in self.hosts:  # sorted: two runs never wait on each other in a cycle
                self._held[h] = self._take(directory / f"{h}.lock", h)
        except BaseException:
            self.release()
            raise

    def _take(self, path: Path, host: str) -> int:
        for _ in range(5):
            fd = self._try(path, host)
            # the holder may have unlinked the file between our open and our flock: then we
            # hold a lock on a file nobody else can see; take the one at the path instead
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, json.dumps({**me(), "host": host}).encode())
                except OSError as e:
                    os.close(fd)
                    raise GpufixError(
                        f"{host}: cannot write the lock {path}: {e.strerror}"
                    ) from None
                return fd
            os.close(fd)
        raise GpufixError(f"{host}: could not take the lock {path}: try again")

    def _try(self, path: Path, host: str) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as e:
            raise GpufixError(
                f"{host}: cannot open the lock {path} ({e.strerror}): remove it if no gpufix runs"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise GpufixError(
                f"{host}: the lock {path} is not a regular file: remove it if no gpufix runs"
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            if holder and process_alive(holder["pid"], holder.get("start")):
                from gpufix.apply.journal import RUN_ID  # journal imports this module

                run = holder.get("run")
                named = isinstance(run, str) and RUN_ID.fullmatch(run)
                which = f"run {run}" if named else "before its run starts: checking facts"
                raise GpufixError(
                    f"{host} is being changed by another gpufix run (pid {holder['pid']}, "
                    f"{which}): wait for it, or see `gpufix status`"
                ) from None
            raise GpufixError(
                f"{host} is locked ({path}) by a process that cannot be identified: "
                "check that no other gpufix runs, then remove the file"
            ) from None
        return fd

    def label(self, run_id: str | None) -> None:
        """Name the run in each lock file, so a refusal can point at it."""
        for h, fd in self._held.items():
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps({**me(), "host": h, "run": run_id}).encode(), 0)
            except OSError as e:
                raise GpufixError(f"{h}: cannot write its lock: {e.strerror}") from None

    def release(self) -> None:
        directory = private_dir("locks")
        for h, fd in list(self._held.items()):
            try:
                (directory / f"{h}.lock").unlink(missing_ok=True)
            finally:
                os.close(fd)  # closing drops the flock
            del self._held[h]


def _read_holder(fd: int) -> dict[str, Any] | None:
    try:
        data = os.pread(fd, 4096, 0)
        doc = json.loads(data.decode("utf-8") or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    pid, start = doc.get("pid"), doc.get("start")
    # only what gpufix writes names a holder: a pid in range, a start time as text or none
    if type(pid) is not int or not 0 < pid < 2**31 or not isinstance(start, (str, type(None))):
        return None
    return doc
