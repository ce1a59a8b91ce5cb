"""Put a host back from its journal (playbooks/rollback.yml), as carefully as apply changes it:
a rollback that reboots needs --allow-reboot and a host with no GPU work running; what the
journal says is data, so every value is checked before the playbook sees it."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpufix import runner, strategies
from gpufix.apply import hostcheck
from gpufix.apply.journal import FileJournal, Journal, list_runs, now, runs_dir, step_ran
from gpufix.apply.rolevars import unsafe_saved_file
from gpufix.apply.varspec import SAVED_FILE_KEYS
from gpufix.errors import GpufixError, InvalidInput, Unreachable
from gpufix.inputs import one_line


def rollback_vars(rec: dict[str, Any]) -> dict[str, Any]:
    """Extravars for playbooks/rollback.yml from a host's journal record (pure). Only the
    strategy's watched files are restored: a journal cannot make rollback write anywhere else."""
    before = rec.get("before") or {}
    after = rec.get("after") or {}
    # only the packages the host check reads (what strategies install): whatever else a
    # journal names, rollback does not move it
    tracked = hostcheck.TRACKED_PACKAGES.match
    pkgs_before = {n: v for n, v in (before.get("packages") or {}).items() if tracked(n)}
    pkgs_after = {n: v for n, v in (after.get("packages") or {}).items() if tracked(n)}
    install = {n: v for n, v in pkgs_before.items() if pkgs_after and pkgs_after.get(n) != v}
    remove = sorted(n for n in pkgs_after if n not in pkgs_before)
    holds_before = {n for n in before.get("holds") or [] if tracked(n)}
    holds_after = {n for n in after["holds"] if tracked(n)} if "holds" in after else holds_before
    strategy = strategies.REGISTRY.get(str(rec.get("strategy")))
    files = {
        # the owner's and group's names are for people; rollback puts back the numbers
        path: {k: saved[k] for k in SAVED_FILE_KEYS if k in saved}
        for path, saved in _to_restore(rec)
        if not unsafe_saved_file(saved)
    }
    kernel_before = (before.get("kernel") or {}).get("running") if _kernel_may_move(rec) else None
    venv_before, venv_after = before.get("ml_venv") or {}, after.get("ml_venv") or {}
    # the host runs another kernel than before the run: it was rebooted, whether or not the
    # journal heard of it (a role's own reboot inside a step whose result was lost to a crash)
    rebooted = bool(rec.get("rebooted")) or _kernel_changed(rec)
    return {
        "gpufix_rollback_install": install,
        "gpufix_rollback_remove": remove,
        "gpufix_rollback_unhold": sorted(holds_after - holds_before),
        "gpufix_rollback_hold": sorted(holds_before - holds_after),
        "gpufix_rollback_files": files,
        "gpufix_rollback_kernel": kernel_before or "",
        "gpufix_rollback_reboot": rebooted,
        # a restored kernel command line takes effect only at the next boot
        "gpufix_rollback_reboot_after": rebooted
        and bool(strategy and strategy.reboot_after_restore),
        # gpufix's own venv, created by this run: only a record that says both
        "gpufix_rollback_ml_venv_remove": venv_before.get("exists") is False
        and venv_after.get("exists") is True,
    }


def _to_restore(rec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The strategy's watched files that the run wrote or that differ after it, as saved."""
    before, after = rec.get("before") or {}, rec.get("after") or {}
    strategy = strategies.REGISTRY.get(str(rec.get("strategy")))
    watched = set(strategy.watched_files) if strategy else set()
    written = {f for s in rec.get("steps") or [] for f in s.get("files") or []}
    out = []
    for path, saved in (before.get("files") or {}).items():
        if not isinstance(saved, dict) or path not in watched:
            continue
        after_saved = (after.get("files") or {}).get(path)
        if path in written or (after_saved is not None and after_saved != saved):
            out.append((path, saved))
    return out


def files_kept(rec: dict[str, Any]) -> str:
    """The watched files rollback leaves as the run left them, with why, or ""."""
    out = [
        f"{path} ({why})" for path, saved in _to_restore(rec) if (why := unsafe_saved_file(saved))
    ]
    if not out:
        return ""
    return one_line(
        f"{', '.join(out)} not written back (gpufix restores only root's files that are not "
        "set-id or writable by group or others): put back by hand what the run changed there"
    )


def venv_kept(rec: dict[str, Any]) -> str:
    """What rollback leaves of a venv the run moved but did not create (pip's changes are not
    replayed): a line for the journal and the operator, or ""."""
    before = (rec.get("before") or {}).get("ml_venv") or {}
    after = (rec.get("after") or {}).get("ml_venv") or {}
    if not (before.get("exists") and after.get("exists")):
        return ""
    old, new = before.get("stack") or {}, after.get("stack") or {}
    moved = [f"{n} {old.get(n, 'absent')} -> {new.get(n, 'absent')}" for n in sorted({*old, *new})
             if old.get(n) != new.get(n)]  # fmt: skip
    if not moved:
        return ""
    return one_line(
        f"{after.get('path') or 'the ML venv'} stays as the run left it ({', '.join(moved)}): "
        "rollback does not reinstall Python packages; put the earlier versions back with pip"
    )


KERNEL_PLAYBOOK = "kernel_upgrade.yml"


def _kernel_changed(rec: dict[str, Any]) -> bool:
    """The host checks before and after the run read two different running kernels."""
    ran_before = ((rec.get("before") or {}).get("kernel") or {}).get("running")
    ran_after = ((rec.get("after") or {}).get("kernel") or {}).get("running")
    return bool(ran_before and ran_after and ran_before != ran_after)


def _kernel_may_move(rec: dict[str, Any]) -> bool:
    """Whether the run could have changed the kernel the host boots: it rebooted, ran a kernel
    step (a one-shot GRUB entry), or changed a linux-image package. Otherwise rollback leaves
    GRUB alone (an NCCL profile's rollback has no business with the saved default)."""
    steps = rec.get("steps") or []
    if rec.get("rebooted") or any(s.get("playbook") == KERNEL_PLAYBOOK for s in steps):
        return True
    if not rec.get("after"):
        return True  # a step failed before the after-state was read: what it did is not known
    if _kernel_changed(rec):
        return True  # rebooted into another kernel, recorded or not
    before = (rec.get("before") or {}).get("packages") or {}
    after = rec["after"].get("packages") or {}
    images = {n for n in (*before, *after) if str(n).startswith("linux-image-")}
    return any(before.get(n) != after.get(n) for n in images)


def reboots(ev: dict[str, Any]) -> bool:
    return bool(ev["gpufix_rollback_reboot"] or ev["gpufix_rollback_reboot_after"])


def check_can_roll_back(journal: Journal, host: str) -> dict[str, Any]:
    rec = journal.host(host)
    if rec["state"] == "rolled-back":
        raise InvalidInput(f"{host} was already rolled back in run {journal.run_id}")
    if rec["state"] == "pending" or not step_ran(rec):
        raise InvalidInput(f"{host} had no step run in {journal.run_id}: nothing to roll back")
    if not rec.get("before"):
        raise GpufixError(
            f"{host}: the journal of {journal.run_id} has no 'before' state (preflight did not "
            "finish), so there is nothing to restore from"
        )
    return rec


def _touches(ev: dict[str, Any]) -> set[str]:
    """What a rollback with these vars would put back: package names, files, the kernel."""
    pkgs = {*ev["gpufix_rollback_install"], *ev["gpufix_rollback_remove"]}
    pkgs |= {*ev["gpufix_rollback_unhold"], *ev["gpufix_rollback_hold"]}
    out = {f"package {n}" for n in pkgs} | {f"file {p}" for p in ev["gpufix_rollback_files"]}
    return out | ({"the boot kernel"} if ev["gpufix_rollback_kernel"] else set())


def precheck(
    journal: Journal, host: str, allow_reboot: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What can be said from the journal alone, before any host is contacted: the record and
    its rollback.yml variables, or why not."""
    from gpufix.apply.rolevars import check_vars

    rec = check_can_roll_back(journal, host)
    ev = rollback_vars(rec)
    # the journal is data: refuse a value that breaks rollback.yml's spec before any change
    check_vars("rollback.yml", ev, f"the journal of {host} in run {journal.run_id}")
    if reboots(ev) and not allow_reboot:
        raise InvalidInput(
            f"rolling {host} back needs a reboot (it was rebooted into the change): "
            "add --allow-reboot"
        )
    return rec, ev


def _machine(name: str, rec: dict[str, Any]) -> tuple[str, str]:
    """The machine a journaled host is: its recorded address and port, else its name (a record
    without a target, or an inventory that connects by the name)."""
    target: dict[str, Any] = rec["target"] if isinstance(rec.get("target"), dict) else {}
    return (str(target.get("ansible_host") or name), str(target.get("ansible_port") or ""))


def later_changes(journal: Journal, host: str) -> list[str]:
    """Later runs that changed what this rollback would put back on the same machine (a
    package, a file, the boot kernel; by target address where recorded, so under any name) and
    were not rolled back: restoring this run's `before` would undo their change too, with no
    record of it. A later run that cannot be read, or whose changes were not read back, is named
    as well; so is any later change when this run's own were not read back (the rollback would
    read the host now, with theirs in it)."""
    rec = journal.host(host)
    mine, unread = _machine(host, rec), not rec.get("after")
    ours = _touches(rollback_vars(rec))
    out = []
    for run_id in (r for r in list_runs() if r > journal.run_id):
        meta = runs_dir() / run_id / "run.json"
        if not meta.exists() and not meta.is_symlink():
            continue  # Journal.start writes run.json last, before anything runs: never started
        try:
            later = FileJournal.open(run_id)
        except GpufixError:
            out.append(f"{run_id} (unreadable)")
            continue
        for name in later.hosts:
            other = later.host(name)
            if _machine(name, other) != mine:
                continue  # another machine
            if other["state"] == "rolled-back" or not step_ran(other):
                continue
            if unread:
                out.append(f"{run_id} (this run's own changes were not read back)")
            elif not other.get("before") or not other.get("after"):
                out.append(f"{run_id} (its changes were not read)")
            elif both := sorted(ours & _touches(rollback_vars(other))):
                out.append(f"{run_id} ({', '.join(both[:3])})")
            else:
                continue
            break
    return out


def _gpu_work(
    host: str, inventory: Path, force: Iterable[str], report: runner.Progress | None
) -> None:
    """Refuse to reboot a host that runs GPU work (unless --force gpu-processes), or that cannot
    be read."""
    got = hostcheck.before_reboot([host], inventory, force=force, progress=report)[host]
    hold = hostcheck.reboot_hold(got)
    if hold is not None:
        error = Unreachable if got.unreachable else GpufixError
        raise error(f"{host}: not rolling back with a reboot: {hold.message}")


def read_after(
    journal: Journal, host: str, inventory: Path, report: runner.Progress | None
) -> dict[str, Any]:
    """A step failed before apply read the host back: read it now, or the rollback would not
    know what the step installed and would say "rolled back" leaving all of it. A host that
    cannot be read is not rolled back blind."""
    rec = journal.host(host)
    strategy = str(rec.get("strategy"))
    got = hostcheck.run_preflight(
        {host: {"strategy": strategy}},
        inventory,
        dpkg_wait=0,
        force=hostcheck.FORCEABLE,
        progress=report,
    )[host]
    if got.unreachable or not got.report.get("packages"):
        why = got.blockers[0].message if got.blockers else "no package list"
        raise (Unreachable if got.unreachable else GpufixError)(
            f"{host}: not rolling back: what the failed step changed cannot be read ({why})"
        )
    journal.update(host, after=got.report)
    return journal.host(host)


def rollback(
    journal: Journal,
    host: str,
    inventory: Path,
    *,
    allow_reboot: bool,
    force: Iterable[str] = (),
    report: runner.Progress | None = None,
    reboot_timeout: int = 1200,
    playbook_timeout: int = runner.PLAYBOOK_TIMEOUT_S,
) -> str:
    """Replay a host's journal backwards. Returns the host's new state. `playbook_timeout`
    limits rollback.yml's run; one that reboots gets `reboot_timeout` on top."""
    from gpufix.apply.rolevars import check_vars

    rec, ev = precheck(journal, host, allow_reboot)
    if not rec.get("after"):
        rec = read_after(journal, host, inventory, report)
        ev = rollback_vars(rec)
        check_vars("rollback.yml", ev, f"the state of {host} read back for the rollback")
    if reboots(ev):
        _gpu_work(host, inventory, force, report)
    journal.set_state(host, "rolling-back", "restoring packages, holds and files")
    res = runner.run_playbook(
        "rollback.yml",
        inventory,
        limit=host,
        extravars={**ev, "gpufix_reboot_timeout": reboot_timeout},
        timeout=playbook_timeout + (reboot_timeout if reboots(ev) else 0),
        progress=report,
    )
    hr = res.hosts.get(host)
    done = {
        "at": now(),
        "install": ev["gpufix_rollback_install"],
        "remove": ev["gpufix_rollback_remove"],
        "files": sorted(ev["gpufix_rollback_files"]),
        "rebooted": reboots(ev),
        "ml_venv_removed": ev["gpufix_rollback_ml_venv_remove"],
    }
    kept = "; ".join(k for k in (venv_kept(rec), files_kept(rec)) if k)
    if kept:
        done["kept"] = kept
    if hr is not None and hr.status == "ok":
        journal.update(host, rollback={**done, "ok": True})
        # the verdict before the rollback no longer describes the host
        journal.add_verdict(host, "rolled-back", {"verdict": None})
        journal.set_state(
            host, "rolled-back", "restored from the journal" + (f"; {kept}" if kept else "")
        )
        return "rolled-back"
    msg = hr.message if hr else f"no result ({res.status})"
    journal.update(host, rollback={**done, "ok": False, "message": msg})
    journal.set_state(host, "failed", f"rollback failed: {msg}")
    return "failed"


def file_content(saved: dict[str, Any]) -> bytes:
    return base64.b64decode(saved.get("content_b64") or "")
