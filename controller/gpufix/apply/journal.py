"""The apply journal: where every host of a run stands. `Journal` keeps the records in memory
(check mode uses it as it is: nothing is written); `FileJournal` writes one JSON file per host
per run, atomically, before each call returns, so an interrupted run always says where every
host stands.

Layout: state_dir()/runs/<run-id>/run.json and <run-id>/<host>.json, directories 0700, files
0600. Files read back are data: size-capped, schema-checked (schemas/journal-*.schema.json).
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

from gpufix import inputs
from gpufix.apply import seal
from gpufix.apply.locks import check_host_name, me, process_alive
from gpufix.errors import GpufixError, InvalidInput
from gpufix.paths import private_dir, state_exists, state_path

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
    "would-change",  # check mode: Ansible's --check --diff says the steps would change this
    "no-change",  # check mode: the steps would change nothing
)
FINAL_OK = frozenset({"applied", "reboot-pending", "healthy"})
CHECKED = frozenset({"would-change", "no-change"})
RUN_STATES = ("running", "complete", "stopped", "interrupted", "failed")

# Names that say a value is a credential (a name part, so *_passthrough is not "pass").
_SECRET_NAME = re.compile(
    r"(^|[_.-])(pass(word|wd|phrase)?|secrets?|tokens?|credentials?|private[_-]?key|"
    r"api[_-]?key|access[_-]?key([_-]?id)?|authorization|auth|cookie|session[_-]?id)($|[_.-])"
    r"|[a-z](Token|Secret|Password|Passwd|ApiKey|AccessKey)$",
    re.I,
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@")
_AUTH_HEADER = re.compile(r"(?i)\b(authorization\s*[:=]\s*(?:\w+\s+)?)\S+")
RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}-[0-9a-f]{6}$")
REDACTED = "<redacted>"


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def secret_name(name: object) -> bool:
    return bool(_SECRET_NAME.search(str(name)))


def scrub(obj: Any) -> Any:
    """A copy of obj with credentials replaced, at any depth: the values of secret-named keys,
    passwords inside URLs, Authorization header values inside strings."""
    if isinstance(obj, dict):
        return {k: (REDACTED if secret_name(k) else scrub(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    if isinstance(obj, str):
        return _AUTH_HEADER.sub(r"\1" + REDACTED, _URL_PASSWORD.sub(r"\1:" + REDACTED + "@", obj))
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


def runs_dir() -> Path:
    return private_dir("runs")


def new_run_id() -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


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
        "diffs": [],  # check mode: what would change
        "rollback": None,
        "history": [],
        "started_at": None,
        "updated_at": now(),
    }


class Journal:
    """A run's records in memory: every state change goes through here. This class writes
    nothing (check mode); FileJournal writes each change through before returning."""

    persistent = False

    def __init__(self, run_id: str, meta: dict[str, Any], path: Path | None = None) -> None:
        self.run_id = run_id
        self.meta = meta
        self.path = path
        self._hosts: dict[str, dict[str, Any]] = {}

    @classmethod
    def start(
        cls,
        plans: list[dict[str, Any]],
        *,
        plan_digest: str,
        options: dict[str, Any],
        plan_file: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Journal:
        """A new run over plans (host, strategy, steps); hosts named as journal files allow."""
        for p in plans:
            check_host_name(p["host"])
        run_id = new_run_id()
        holder = me()
        meta = {
            "format": RUN_FORMAT,
            "version": VERSION,
            "run": run_id,
            "plan_digest": plan_digest,
            "plan_file": plan_file,
            "options": scrub(options),
            "hosts": [p["host"] for p in plans],
            "state": "running",
            "pid": holder["pid"],
            "pid_start": holder["start"],
            "created_at": now(),
            "updated_at": now(),
            "summary": None,
            **(extra or {}),
        }
        j = cls._new(run_id, meta)
        for p in plans:
            j._hosts[p["host"]] = new_host_record(
                run_id, p["host"], p["strategy"], p.get("steps") or []
            )
            j._persist_host(p["host"])
        j._persist_meta()
        j._publish()
        return j

    @classmethod
    def _new(cls, run_id: str, meta: dict[str, Any]) -> Journal:
        return cls(run_id, meta)

    # -- state ----------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """running | complete | stopped | failed (an error stopped it; `error` says which) |
        interrupted (Ctrl-C, or a 'running' run whose process is gone, or whose pid now belongs
        to another process)."""
        st = str(self.meta.get("state", "running"))
        pid = self.meta.get("pid")
        alive = process_alive(pid if isinstance(pid, int) else 0, self.meta.get("pid_start"))
        if st == "running" and not alive:
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
                f"host {inputs.one_line(repr(name), 80)} is not in run {self.run_id} "
                f"(hosts: {', '.join(self.hosts)})"
            ) from None

    def records(self) -> list[dict[str, Any]]:
        return [self._hosts[h] for h in self.hosts if h in self._hosts]

    def claim(self) -> None:
        """Take the run over in this process (resume)."""
        holder = me()
        self.meta.update(state="running", pid=holder["pid"], pid_start=holder["start"])
        self.meta.setdefault("resumed_at", []).append(now())
        self._persist_meta()

    def finish(
        self, state: str, summary: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        if state not in RUN_STATES:
            raise ValueError(f"bad run state {state}")
        self.meta["state"] = state
        if summary is not None:
            self.meta["summary"] = summary
        if error is not None:
            self.meta["error"] = error[:1000]
        self._persist_meta()

    def set_state(self, host: str, state: str, reason: str = "") -> None:
        if state not in HOST_STATES:
            raise ValueError(f"bad host state {state}")
        rec = self.host(host)
        rec["state"] = state
        if reason or state in FINAL_OK:
            rec["reason"] = reason
        if rec.get("started_at") is None and state != "pending":
            rec["started_at"] = now()
        rec["history"].append({"at": now(), "state": state, "note": reason})
        self._persist_host(host)

    def update(self, host: str, **fields: Any) -> None:
        rec = self.host(host)
        for k, v in fields.items():
            rec[k] = scrub(v)
        self._persist_host(host)

    def step_started(self, host: str, index: int) -> None:
        rec = self.host(host)
        step = rec["steps"][index]
        step.update(state="started", started_at=now(), ended_at=None, message="")
        rec["state"] = "applying"
        if rec.get("started_at") is None:
            rec["started_at"] = now()
        rec["history"].append({"at": now(), "state": "applying", "note": step["playbook"]})
        self._persist_host(host)

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
        rec = self.host(host)
        rec["steps"][index].update(
            state="done" if ok else "failed",
            ended_at=now(),
            changed=changed,
            files=sorted(set(files or [])),
            message=message,
        )
        if changed:
            rec["changed_any"] = True
        self._persist_host(host)

    def add_verdict(self, host: str, phase: str, verdict: dict[str, Any]) -> None:
        rec = self.host(host)
        rec["verdicts"].append({"at": now(), "phase": phase, **scrub(verdict)})
        self._persist_host(host)

    def changed(self, host: str) -> int:
        return sum(int(s.get("changed") or 0) for s in self.host(host)["steps"])

    def changed_any(self, host: str) -> bool:
        rec = self.host(host)
        return any(s.get("changed") for s in rec["steps"]) or bool(rec.get("changed_any"))

    # -- storage (none here) ----------------------------------------------------------------
    def _persist_host(self, host: str) -> None:
        self._hosts[host]["updated_at"] = now()

    def _persist_meta(self) -> None:
        self.meta["updated_at"] = now()

    def _publish(self) -> None:
        """The run is whole: from now on it is found (a file journal renames it into place)."""


class FileJournal(Journal):
    """A Journal whose every change is on disk before the call returns."""

    persistent = True
    _loaded: dict[str, dict[str, Any]] | None = None  # the files as read, seals included

    @classmethod
    def _new(cls, run_id: str, meta: dict[str, Any]) -> Journal:
        # written under a name no reader takes for a run, then renamed whole: a crash part-way
        # through start() leaves no run directory without its run.json
        path = runs_dir() / f".new-{run_id}"
        path.mkdir(mode=0o700)
        return cls(run_id, meta, path)

    def _publish(self) -> None:
        assert self.path is not None
        final = self.path.with_name(self.run_id)
        os.rename(self.path, final)
        self.path = final
        fd = os.open(final.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)  # the rename itself reaches the disk before any host is changed
        finally:
            os.close(fd)

    @classmethod
    def open(cls, run_id: str) -> FileJournal:
        if run_id in ("latest", "last"):
            runs = list_runs()
            if not runs:
                raise InvalidInput("no apply runs recorded yet")
            run_id = runs[-1]
        if not RUN_ID.fullmatch(run_id):
            raise InvalidInput(
                f"not a run id: {inputs.one_line(repr(run_id), 80)} (see `gpufix status`)"
            )
        if not state_exists():
            raise InvalidInput(f"no run {run_id}: no apply runs recorded yet (in {state_path()})")
        path = runs_dir() / run_id
        meta_path = path / "run.json"
        if not meta_path.is_file():
            raise InvalidInput(f"no run {run_id} under {runs_dir()} (see `gpufix status`)")
        meta = inputs.load_json(meta_path, "journal", schema_name="journal-run")
        loaded = {"run.json": meta}
        meta = {k: v for k, v in meta.items() if k != seal.FIELD}
        if meta["run"] != run_id:
            raise InvalidInput(f"journal file {meta_path}: run: names {meta['run']}, not {run_id}")
        if len(set(meta["hosts"])) != len(meta["hosts"]):
            raise InvalidInput(f"journal file {meta_path}: hosts: a host is named twice")
        j = cls(run_id, meta, path)
        for host in meta["hosts"]:
            hp = j._host_path(host)
            # start() writes every host's file before run.json: one missing is damage, and a
            # directory, FIFO or device there is refused by the input layer, not passed over
            if not hp.exists() and not hp.is_symlink():
                raise InvalidInput(f"journal file {hp} is missing (run.json names {host})")
            rec = inputs.load_json(hp, "journal", schema_name="journal-host")
            if rec["host"] != host or rec["run"] != run_id:
                raise InvalidInput(f"journal file {hp}: names another host or run")
            loaded[hp.name] = rec
            j._hosts[host] = {k: v for k, v in rec.items() if k != seal.FIELD}
        j._loaded = loaded
        return j

    def require_sealed(self, doing: str) -> None:
        """Act on this journal only as this controller wrote it (gpufix.apply.seal): read from
        disk, every file carries its seal. A journal made in memory has nothing to check."""
        loaded = self._loaded
        if not loaded:
            return
        bad = sorted(name for name, doc in loaded.items() if not seal.holds(doc))
        if bad:
            raise InvalidInput(
                f"run {self.run_id}: not {doing}: its journal is not as this controller wrote it "
                f"({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''}: no seal, or changed "
                "since; a journal from another machine, a ticket or an edit is data gpufix does "
                f"not act on, docs/security.md): `gpufix status {self.run_id}` shows what it "
                "records; undo that by hand, or move the run's directory out of runs/ to apply "
                "the plan afresh"
            )

    @classmethod
    def find_for_plan(cls, plan_digest: str) -> FileJournal | None:
        """The newest readable run of this exact plan, if any. A run of another plan that cannot
        be read is passed over; one of this plan is refused: it may hold a host that failed and
        was not rolled back, which a new run must not start over on."""
        for run_id in reversed(list_runs()):
            if _plan_digest_of(run_id) != plan_digest:
                continue
            try:
                return cls.open(run_id)
            except InvalidInput as e:
                raise GpufixError(
                    f"run {run_id} of this plan cannot be read ({e}): repair or remove it "
                    f"under {runs_dir()} before applying the plan again"
                ) from None
        return None

    def _host_path(self, host: str) -> Path:
        check_host_name(host)
        assert self.path is not None
        return self.path / f"{host}.json"

    def _persist_host(self, host: str) -> None:
        super()._persist_host(host)
        doc = seal.sealed_copy(self._hosts[host])
        write_json_atomic(self._host_path(host), doc)
        self._remember(self._host_path(host).name, doc)

    def _persist_meta(self) -> None:
        super()._persist_meta()
        assert self.path is not None
        doc = seal.sealed_copy(self.meta)
        write_json_atomic(self.path / "run.json", doc)
        self._remember("run.json", doc)

    def _remember(self, name: str, doc: dict[str, Any]) -> None:
        """What is on disk now: a journal opened earlier and written since is checked as it is."""
        if self._loaded is not None:
            self._loaded[name] = doc


def list_runs() -> list[str]:
    """Run ids, oldest first (ids start with a UTC timestamp). Reading creates nothing: no state
    directory yet means no runs (one that exists is checked as runs_dir() checks it)."""
    if not state_exists() or not (state_path() / "runs").is_dir():
        return []  # nothing recorded, and nothing made to say so
    return sorted(p.name for p in runs_dir().iterdir() if p.is_dir() and RUN_ID.fullmatch(p.name))


# -- resume state machine ---------------------------------------------------------------------
def step_ran(rec: dict[str, Any]) -> bool:
    """A step of this host started in its run (done, failed or cut short): the run may have
    changed the host."""
    return any(s.get("state") != "pending" for s in rec.get("steps") or [])


def next_action(rec: dict[str, Any]) -> tuple[str, int]:
    """Where a second apply of the same plan picks this host up.

    Returns (action, step index): ("skip", -1) finished well; ("step", i) run steps from i
    (a step that was started and not finished is run again: the playbooks are idempotent);
    ("reboot", -1) steps done, reboot not yet started; ("verify", -1) wait for the host and
    probe it; ("retry", -1) rolled back cleanly: a new run may try again; ("refuse", -1) the
    host failed without a rollback, or a rollback was cut short: a person decides.
    """
    state = rec.get("state", "pending")
    steps = rec.get("steps") or []
    first_open = next((s["index"] for s in steps if s.get("state") != "done"), len(steps))
    if state == "applied" and rec.get("finalize_pending"):
        return ("verify", -1)  # a new kernel booted once under --no-verify, not yet the default
    if state in FINAL_OK or state == "skipped":
        # reboot-pending stays pending until the user allows a reboot; see apply.
        return ("skip", -1)
    if state == "rolled-back":
        return ("retry", -1)
    if state in ("failed", "rolling-back"):
        return ("refuse", -1)
    if state == "rebooting" and not rec.get("rebooted"):
        # journaled before reboot.yml ran; no reboot was recorded (a crash before it, or
        # before its result): reboot (reboot.yml's hosts; a role's own reboot is not this state)
        return ("reboot", -1)
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


def _plan_digest_of(run_id: str) -> str | None:
    """The plan digest a run's own run.json records, when that file alone can be read."""
    try:
        meta = inputs.load_json(
            runs_dir() / run_id / "run.json", "journal", schema_name="journal-run"
        )
    except InvalidInput:
        return None
    digest = meta.get("plan_digest")
    return digest if isinstance(digest, str) else None
