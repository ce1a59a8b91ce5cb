"""The apply journal: one JSON file per host per run, rewritten atomically before and after
each step, so an interrupted run always says where every host stands.

Layout: state_dir()/runs/<run-id>/run.json and <run-id>/<host>.json, directories 0700.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Any

from gpufix.errors import InvalidInput
from gpufix.paths import state_dir

FORMAT = "gpufix-journal"
RUN_FORMAT = "gpufix-run"
VERSION = 1

# Host states, in the order a healthy run passes through them.
HOST_STATES = (
    "pending",  # nothing done yet
    "preflight",  # checking the host
    "blocked",  # preflight said no; nothing changed
    "applying",  # a step is running (see steps[].state)
    "applied",  # steps done; no reboot or probe needed or asked for
    "reboot-pending",  # steps done; the plan needs a reboot the user did not allow
    "rebooting",
    "verifying",  # probe running
    "healthy",  # probe said healthy
    "failed",  # a step failed or the probe was not healthy
    "rolling-back",
    "rolled-back",
    "unreachable",
    "skipped",  # nothing to do, or left untouched (--max-fail stopped the rollout)
)
FINAL_OK = frozenset({"applied", "reboot-pending", "healthy"})
RUN_STATES = ("running", "complete", "stopped", "interrupted")

# Never journal a variable whose name says it is a credential.
_SECRET_NAME = re.compile(r"pass(word)?|secret|token|credential|private_key|api_key", re.I)
_RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}-[0-9a-f]{6}$")
_HOST_NAME = re.compile(r"^[A-Za-z0-9_.:@\-\[\]]+$")


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def scrub(obj: Any) -> Any:
    """A copy of obj with the values of secret-named keys replaced, at any depth."""
    if isinstance(obj, dict):
        return {
            k: ("<redacted>" if _SECRET_NAME.search(str(k)) else scrub(v)) for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    return obj


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON so a reader sees the old file or the new one, never half of one:
    temp file in the same directory, fsync, rename, fsync the directory."""
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=2, sort_keys=True, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InvalidInput(f"cannot read journal {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"journal {path} is corrupt: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"journal {path} is corrupt: not an object")
    return data


def runs_dir() -> Path:
    path = state_dir() / "runs"
    path.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def new_run_id() -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def new_host_record(run: str, host: str, strategy: str, steps: list[dict[str, Any]]) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": run,
        "host": host,
        "strategy": strategy,
        "state": "pending",
        "reason": "",
        "steps": [
            {
                "index": i,
                "playbook": s["playbook"],
                "description": s.get("description", ""),
                "vars": scrub(s.get("vars") or {}),
                "reboot": bool(s.get("reboot")),
                "state": "pending",
                "changed": 0,
                "files": [],
                "message": "",
            }
            for i, s in enumerate(steps)
        ],
        "before": {},  # packages, holds, files, kernel: what rollback restores
        "after": {},
        "rebooted": False,
        "verdicts": [],
        "rollback": None,
        "history": [],
        "started_at": None,
        "updated_at": now(),
    }


class Journal:
    """One run's directory. Every mutation is written through before the call returns."""

    def __init__(self, run_id: str, path: Path, meta: dict[str, Any]) -> None:
        self.run_id = run_id
        self.path = path
        self.meta = meta
        self._hosts: dict[str, dict[str, Any]] = {}

    # -- creating and finding runs --------------------------------------------------------
    @classmethod
    def create(
        cls,
        plans: list[dict[str, Any]],
        *,
        plan_digest: str,
        options: dict[str, Any],
        plan_file: str | None = None,
    ) -> Journal:
        run_id = new_run_id()
        path = runs_dir() / run_id
        path.mkdir(mode=0o700)
        meta = {
            "format": RUN_FORMAT,
            "version": VERSION,
            "run": run_id,
            "plan_digest": plan_digest,
            "plan_file": plan_file,
            "options": scrub(options),
            "hosts": [p["host"] for p in plans],
            "state": "running",
            "pid": os.getpid(),
            "created_at": now(),
            "updated_at": now(),
            "summary": None,
        }
        j = cls(run_id, path, meta)
        for p in plans:
            _check_host_name(p["host"])
            rec = new_host_record(run_id, p["host"], p["strategy"], p.get("steps") or [])
            j._hosts[p["host"]] = rec
            write_json_atomic(j._host_path(p["host"]), rec)
        j._write_meta()
        return j

    @classmethod
    def open(cls, run_id: str) -> Journal:
        if run_id in ("latest", "last"):
            runs = list_runs()
            if not runs:
                raise InvalidInput("no apply runs recorded yet")
            run_id = runs[-1]
        if not _RUN_ID.match(run_id):
            raise InvalidInput(f"not a run id: {run_id!r} (see `gpufix status`)")
        path = runs_dir() / run_id
        meta_path = path / "run.json"
        if not meta_path.is_file():
            raise InvalidInput(f"no run {run_id} under {runs_dir()} (see `gpufix status`)")
        meta = _read_json(meta_path)
        if meta.get("format") != RUN_FORMAT:
            raise InvalidInput(f"{meta_path} is not a gpufix run journal")
        j = cls(run_id, path, meta)
        for host in meta.get("hosts", []):
            hp = j._host_path(host)
            if hp.is_file():
                j._hosts[host] = _read_json(hp)
        return j

    @classmethod
    def find_for_plan(cls, plan_digest: str) -> Journal | None:
        """The newest run of this exact plan, if any."""
        for run_id in reversed(list_runs()):
            try:
                j = cls.open(run_id)
            except InvalidInput:
                continue
            if j.meta.get("plan_digest") == plan_digest:
                return j
        return None

    # -- state ----------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """running | complete | stopped | interrupted (a 'running' run whose process is gone)."""
        st = str(self.meta.get("state", "running"))
        if st == "running" and not _pid_alive(int(self.meta.get("pid") or 0)):
            return "interrupted"
        return st

    @property
    def hosts(self) -> list[str]:
        return list(self.meta.get("hosts", []))

    def host(self, name: str) -> dict[str, Any]:
        try:
            return self._hosts[name]
        except KeyError:
            raise InvalidInput(
                f"host {name!r} is not in run {self.run_id} (hosts: {', '.join(self.hosts)})"
            ) from None

    def records(self) -> list[dict[str, Any]]:
        return [self._hosts[h] for h in self.hosts if h in self._hosts]

    def claim(self) -> None:
        """Take the run over in this process (resume)."""
        self.meta["state"] = "running"
        self.meta["pid"] = os.getpid()
        self.meta.setdefault("resumed_at", []).append(now())
        self._write_meta()

    def finish(self, state: str, summary: dict[str, Any] | None = None) -> None:
        if state not in RUN_STATES:
            raise ValueError(f"bad run state {state}")
        self.meta["state"] = state
        if summary is not None:
            self.meta["summary"] = summary
        self._write_meta()

    def set_state(self, host: str, state: str, reason: str = "") -> None:
        if state not in HOST_STATES:
            raise ValueError(f"bad host state {state}")
        rec = self.host(host)
        rec["state"] = state
        if reason or state in FINAL_OK:
            rec["reason"] = reason
        if rec["started_at"] is None and state != "pending":
            rec["started_at"] = now()
        rec["history"].append({"at": now(), "state": state, "note": reason})
        self._write_host(host)

    def update(self, host: str, **fields: Any) -> None:
        rec = self.host(host)
        for k, v in fields.items():
            rec[k] = scrub(v)
        self._write_host(host)

    def step_started(self, host: str, index: int) -> None:
        rec = self.host(host)
        step = rec["steps"][index]
        step.update(state="started", started_at=now(), ended_at=None, message="")
        rec["state"] = "applying"
        if rec["started_at"] is None:
            rec["started_at"] = now()
        rec["history"].append({"at": now(), "state": "applying", "note": step["playbook"]})
        self._write_host(host)

    def step_finished(
        self,
        host: str,
        index: int,
        *,
        ok: bool,
        changed: int = 0,
        files: list[str] | None = None,
        message: str = "",
    ) -> None:
        step = self.host(host)["steps"][index]
        step.update(
            state="done" if ok else "failed",
            ended_at=now(),
            changed=changed,
            files=sorted(set(files or [])),
            message=message,
        )
        self._write_host(host)

    def add_verdict(self, host: str, phase: str, verdict: dict[str, Any]) -> None:
        rec = self.host(host)
        rec["verdicts"].append({"at": now(), "phase": phase, **scrub(verdict)})
        self._write_host(host)

    # -- files ----------------------------------------------------------------------------
    def _host_path(self, host: str) -> Path:
        return self.path / f"{host}.json"

    def _write_host(self, host: str) -> None:
        rec = self._hosts[host]
        rec["updated_at"] = now()
        write_json_atomic(self._host_path(host), rec)

    def _write_meta(self) -> None:
        self.meta["updated_at"] = now()
        write_json_atomic(self.path / "run.json", self.meta)


def _check_host_name(host: str) -> None:
    # The name becomes a file name; refuse anything that could leave the run directory.
    if not _HOST_NAME.match(host) or host in (".", "..", "run"):
        raise InvalidInput(f"host name {host!r} cannot be journaled (unexpected characters)")


def list_runs() -> list[str]:
    """Run ids, oldest first (ids start with a UTC timestamp)."""
    return sorted(p.name for p in runs_dir().iterdir() if p.is_dir() and _RUN_ID.match(p.name))


# -- resume state machine ---------------------------------------------------------------------
def next_action(rec: dict[str, Any]) -> tuple[str, int]:
    """Where a second apply of the same plan picks this host up.

    Returns (action, step index): ("skip", -1) finished well; ("step", i) run steps from i
    (a step that was started and not finished is run again: the playbooks are idempotent);
    ("reboot", -1) steps done, reboot not yet started; ("verify", -1) wait for the host and
    probe it; ("refuse", -1) the host failed or a rollback was cut short: a person decides.
    """
    state = rec.get("state", "pending")
    steps = rec.get("steps") or []
    first_open = next((s["index"] for s in steps if s.get("state") != "done"), len(steps))
    if state in FINAL_OK or state == "skipped":
        # reboot-pending stays pending until the user allows a reboot; see apply.
        return ("skip", -1)
    if state in ("failed", "rolling-back", "rolled-back"):
        return ("refuse", -1)
    if state in ("rebooting", "verifying"):
        return ("verify", -1)
    if first_open < len(steps):
        return ("step", first_open)
    if state == "unreachable" and rec.get("rebooted"):
        return ("verify", -1)
    if state in ("applying", "unreachable") and steps:
        # every step done; the crash came between the last step and the reboot decision
        return ("reboot", -1)
    return ("step", 0)
