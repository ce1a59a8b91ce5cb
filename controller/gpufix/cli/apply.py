"""`gpufix apply`, `status`, `rollback` and `uninstall`: parse, call gpufix.apply, print.
Registered by gpufix.cli. Exit codes: docs/exit-codes.md and docs/apply.md."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from gpufix.apply import rollout as applymod
from gpufix.apply.diffs import diff_lines
from gpufix.apply.journal import FileJournal, list_runs
from gpufix.cli.common import (
    changes_exit,
    detailed_exitcode_option,
    forks_option,
    inventory_option,
    inventory_path,
    json_option,
    not_empty,
    playbook_timeout_option,
    progress,
    timeout_option,
)
from gpufix.engine.plan import Plan
from gpufix.errors import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_OK,
    GpufixError,
    InvalidInput,
    Unreachable,
)
from gpufix.inputs import one_line
from gpufix.paths import state_path
from gpufix.strategies import NAMES as STRATEGIES

HOST_COLUMNS = ["host", "strategy", "state", "steps", "rebooted", "verdict", "updated", "note"]


def _console(stderr: bool = False) -> Any:
    from gpufix.cli.render import console

    return console(stderr=stderr)


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(one_line(title, 400)), title_justify="left")  # run data in it, too
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*(Text(one_line(x, 400)) for x in r))  # host data: never markup
    return t


def _replan(
    target: str, strategy: str, opts: applymod.Options, torch: str | None = None
) -> list[Plan]:
    from gpufix.engine.context import Constraints
    from gpufix.planning import make_plans

    # reboots are gated by apply's --allow-reboot, not by the plan
    got = make_plans(
        target,
        opts.inventory,
        Constraints(strategy=strategy, reboot_allowed=True, torch=torch),
        progress=progress,
        forks=opts.forks,
        facts_timeout=opts.facts_timeout,
    )
    if got.failures:
        raise GpufixError(
            "; ".join(f"{f.host}: {f.error}" for f in got.failures),
            4 if any(f.unreachable for f in got.failures) else EXIT_ERROR,
        )
    return got.plans


# How long facts gathered by `apply --strategy` count as gathered just now (no second gather).
FRESH_FOR_S = 10.0


def _confirm(plans: list[Plan], yes: bool, as_json: bool, *, required: bool) -> None:
    """Show the plans and ask on a terminal. required: off a terminal --yes is needed
    (re-planned on the spot); a saved plan file off a terminal runs as `terraform apply
    PLANFILE` does."""
    from gpufix.cli import render

    tty = sys.stdin.isatty()
    if yes or (not tty and not required):
        return
    if not tty:
        raise InvalidInput("stdin is not a terminal: add --yes to apply without a prompt")
    c = _console(stderr=as_json)
    for p in plans:
        render.plan(c, p)
    if not click.confirm(f"Apply to {len(plans)} host(s)?", default=False, err=True):
        click.echo("gpufix: not applied", err=True)
        sys.exit(EXIT_OK)


def _print_result(res: applymod.Result, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2, default=str))
        return
    rows = [
        [
            o.host,
            o.strategy,
            o.state,
            str(o.changed),
            "yes" if o.rebooted else "no",
            o.verdict or "-",
            f"{o.elapsed_s:.0f}s",
            o.message,
        ]
        for o in res.outcomes
    ]
    if res.check:
        title = "gpufix apply --check: nothing was changed"
    else:
        what = "resumed run" if res.resumed else "run"
        title = f"gpufix apply: {what} {res.run_id}"
        if res.retry_of:
            title += f" (retrying what run {res.retry_of} rolled back)"
    if res.noop:
        title += ": already applied, nothing to do"
    if res.stopped:
        title += ": rollout stopped (--max-fail)"
    cols = ["host", "strategy", "state", "changed", "rebooted", "verdict", "time", "note"]
    c = _console()
    c.print(_table(title, cols, rows))
    for o in res.outcomes:
        lines = diff_lines(o.diffs)
        if lines:
            c.print(f"--- {o.host}: what would change", markup=False, highlight=False)
            for line in lines:
                c.print(line, markup=False, highlight=False)


def _probe_vars(
    probe_deadline: int, probe_cpu: bool, probe_python: str | None, job_env: tuple[str, ...] = ()
) -> dict[str, Any]:
    out: dict[str, Any] = {"gpufix_probe_deadline": probe_deadline}
    if job_env:
        from gpufix.probe.options import ProbeOptions

        try:  # one-line errors before anything runs, naming the option as apply spells it
            ProbeOptions(job_env=job_env).check()
        except InvalidInput as exc:
            raise InvalidInput(str(exc).replace("--job-env", "--probe-job-env", 1)) from None
        out["gpufix_probe_job_env"] = list(job_env)
    if probe_cpu:
        out["gpufix_probe_cpu"] = True
    if probe_python is not None:
        out["gpufix_probe_python"] = probe_python  # checked against probe.yml's spec by apply
    return out


@click.command("apply")
@click.argument("target", callback=not_empty)
@inventory_option
@click.option(
    "--strategy",
    type=click.Choice([s for s in STRATEGIES if s != "none"]),
    help="Re-plan TARGET (host or group) with this strategy, show it and ask to confirm.",
)
@click.option(
    "--image",
    metavar="REF@sha256:DIGEST",
    callback=not_empty,
    help="The container image the saved plan runs, named again: required when it names one.",
)
@click.option(
    "--torch",
    "torch_release",
    metavar="VERSION",
    callback=not_empty,
    help="The torch release: with --strategy cuda-downgrade, the one to install (as gpufix plan "
    "--torch); with a PLANFILE made with --torch, the same release named again.",
)
@click.option("--interim", is_flag=True, help="Run the plan's interim (no-reboot) steps.")
@click.option("--check", is_flag=True, help="Show per host what would change; change nothing.")
@click.option(
    "--allow-reboot/--no-reboot",
    "allow_reboot",
    default=False,
    show_default=True,
    help="Reboot hosts whose change needs it (otherwise they stop at reboot-pending).",
)
@click.option(
    "--rollback-on-failure/--no-rollback-on-failure",
    default=None,
    help="Put a host back when a step or its probe fails (default: on for kernel steps).",
)
@click.option("--batch", default="25%", show_default=True, help="Hosts per batch: N or N%.")
@click.option("--no-canary", is_flag=True, help="No single-host first batch.")
@click.option(
    "--max-fail",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Stop the rollout once more than N hosts failed.",
)
@click.option(
    "--force",
    type=click.Choice(["gpu-processes", "disk", "host-lock"]),
    multiple=True,
    help="Go on despite this preflight finding (host-lock: another controller's lock).",
)
@click.option("--dpkg-wait", type=click.IntRange(0, 3600), default=120, show_default=True)
@click.option("--reboot-timeout", type=click.IntRange(30, 7200), default=1200, show_default=True)
@click.option("--no-verify", is_flag=True, help="Do not run the probe after the change.")
@click.option("--probe-cpu", is_flag=True, help="Probe with gloo on CPU (hosts without a GPU).")
@click.option(
    "--probe-python",
    metavar="PATH",
    help="Interpreter with torch on the hosts (default: the plan's).",
)
@click.option("--probe-deadline", type=click.IntRange(10, 3600), default=120, show_default=True)
@click.option(
    "--probe-job-env",
    multiple=True,
    metavar="VAR=VALUE",
    help="A setting the training job runs with, for the probe after the change (repeatable).",
)
@click.option("-y", "--yes", is_flag=True, help="Do not ask (required off a TTY with --strategy).")
@forks_option
@timeout_option
@playbook_timeout_option
@detailed_exitcode_option
@json_option
def apply_cmd(
    target: str,
    inventory: str | None,
    strategy: str | None,
    image: str | None,
    torch_release: str | None,
    interim: bool,
    check: bool,
    allow_reboot: bool,
    rollback_on_failure: bool | None,
    batch: str,
    no_canary: bool,
    max_fail: int,
    force: tuple[str, ...],
    dpkg_wait: int,
    reboot_timeout: int,
    no_verify: bool,
    probe_cpu: bool,
    probe_python: str | None,
    probe_deadline: int,
    probe_job_env: tuple[str, ...],
    yes: bool,
    forks: int,
    facts_timeout: int,
    playbook_timeout: int,
    detailed_exitcode: bool,
    as_json: bool,
) -> None:
    """Apply PLANFILE (refused when edited or stale), or --strategy S on a HOST|GROUP.

    Exit 0 applied or nothing to do (2 when something changed, with --detailed-exitcode),
    5 a probe after the change was not healthy, 4 a host unreachable, 3 invalid input, 1 error,
    130 interrupted.
    """
    if strategy and interim:
        raise InvalidInput("--interim applies a saved plan's interim steps: give a PLANFILE")
    if strategy and image:
        raise InvalidInput("--image names a saved plan's image: give a PLANFILE")
    if strategy and (target.endswith(".json") or os.sep in target) and os.path.isfile(target):
        raise InvalidInput(
            f"{target} is a plan file and --strategy plans anew: give a HOST|GROUP with "
            "--strategy, or the plan file alone"
        )
    inv = inventory_path(inventory)
    applymod.parse_batch(batch, 1)
    opts = applymod.Options(
        inventory=inv,
        check=check,
        allow_reboot=allow_reboot,
        rollback_on_failure=rollback_on_failure,
        batch=batch,
        canary=not no_canary,
        max_fail=max_fail,
        force=frozenset(force),
        dpkg_wait=dpkg_wait,
        reboot_timeout=reboot_timeout,
        verify=not no_verify,
        probe_vars=_probe_vars(probe_deadline, probe_cpu, probe_python, probe_job_env),
        interim=interim,
        step_timeout=playbook_timeout,
        forks=forks,
        facts_timeout=facts_timeout,
    )
    if strategy:
        plans = _replan(target, strategy, opts, torch_release)
        gathered = time.monotonic()
        _refusals_first(plans, opts)
        _confirm(plans, yes or check, as_json, required=True)  # a dry run asks nothing
        # facts an operator read over at the prompt are not "just now": another run may have
        # changed the host meanwhile, so they are gathered again under the host locks
        fresh = time.monotonic() - gathered <= FRESH_FOR_S
        res = applymod.apply(plans, opts, report=progress, fresh_facts=fresh)
    else:
        res = _apply_file(
            Path(target), opts, image, torch_release, yes=yes or check, as_json=as_json
        )
    _print_result(res, as_json)
    code = res.exit_code
    sys.exit(changes_exit(True, detailed_exitcode) if code == EXIT_CHANGES else code)


def _apply_file(
    path: Path,
    opts: applymod.Options,
    image: str | None,
    torch: str | None,
    *,
    yes: bool,
    as_json: bool,
) -> Any:
    from gpufix.apply import request
    from gpufix.engine.kb import load as load_kb
    from gpufix.engine.plan import load_plans
    from gpufix.engine.rules import load as load_rules

    if not path.exists():
        raise InvalidInput(
            f"no plan file {one_line(repr(str(path)))}: give a PLANFILE from `gpufix plan -o`, "
            "or --strategy S HOST|GROUP"
        )
    plans = load_plans(path)
    # the engine is the only author of steps: refuse an edited file before showing or asking
    request.check_plans(plans, load_kb(), load_rules(), f"plan file {path}")
    request.check_image(plans, image, f"plan file {path}")
    request.check_torch(plans, torch, f"plan file {path}")
    if opts.interim and not any(p.interim for p in plans):
        raise InvalidInput(f"plan file {path} has no interim steps (plan with a probe verdict)")
    _refusals_first(plans, opts)
    _confirm(plans, yes, as_json, required=False)
    return applymod.apply(plans, opts, plan_file=str(path.resolve()), report=progress)


def _refusals_first(plans: list[Plan], opts: applymod.Options) -> None:
    """What apply would refuse anyway (a recorded snapshot, a group, a host not in the
    inventory) is said before asking to confirm, not after (a review, 2026-12-06)."""
    from gpufix.apply.rollout import validate, work_plan

    validate([work_plan(p, opts.interim) for p in plans], opts.inventory)


def _host_row(rec: dict[str, Any]) -> list[str]:
    steps = rec.get("steps") or []
    done = sum(1 for s in steps if s.get("state") == "done")
    verdicts = rec.get("verdicts") or []
    verdict = (verdicts[-1].get("verdict") or "none") if verdicts else "-"
    if rec.get("state") == "rolled-back":
        verdict = "- (rolled back)"  # an earlier verdict no longer describes the host
    return [
        str(rec.get("host", "?")),
        str(rec.get("strategy", "?")),
        str(rec.get("state", "?")),
        f"{done}/{len(steps)}",
        "yes" if rec.get("rebooted") else "no",
        str(verdict),
        str(rec.get("updated_at", "")),
        str(rec.get("reason", "")),
    ]


def _runs() -> list[tuple[str, FileJournal | None, str]]:
    """Every run, readable or not: one corrupt run does not hide the others."""
    out: list[tuple[str, FileJournal | None, str]] = []
    for run_id in list_runs():
        try:
            out.append((run_id, FileJournal.open(run_id), ""))
        except InvalidInput as exc:
            out.append((run_id, None, str(exc)))
    return out


@click.command("status")
@click.argument("run", required=False)
@json_option
def status_cmd(run: str | None, as_json: bool) -> None:
    """List apply runs, or show where each host of RUN stands ('latest' for the newest)."""
    if run is None:
        runs = _runs()
        if as_json:
            docs = [
                {**j.meta, "state": j.state, "run": r}
                if j
                else {"run": r, "state": "unreadable", "error": e}
                for r, j, e in runs
            ]
            click.echo(json.dumps(docs, indent=2, default=str))
            return
        if not runs:
            click.echo(f"no apply runs recorded yet (in {state_path() / 'runs'})")
            return
        rows = []
        for r, j, e in runs:
            if j is None:
                rows.append([r, "unreadable", "-", "-", e])
                continue
            states = [str(x.get("state", "?")) for x in j.records()]
            counts = ", ".join(f"{states.count(s)} {s}" for s in sorted(set(states)))
            kind = str(j.meta.get("kind") or "permanent")
            rows.append([r, j.state, kind, str(j.meta.get("plan_file") or "-"), counts])
        columns = ["run", "state", "kind", "plan", "hosts"]
        _console().print(_table("gpufix apply runs", columns, rows))
        return
    j = FileJournal.open(run)
    if as_json:
        doc = {"run": {**j.meta, "state": j.state}, "hosts": j.records()}
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    title = f"run {j.run_id} ({j.state}), plan {j.meta.get('plan_file') or '-'}"
    if j.meta.get("error"):
        title += f"; stopped by {j.meta['error']}"
    _console().print(_table(title, HOST_COLUMNS, [_host_row(r) for r in j.records()]))


@click.command("rollback")
@click.argument("run")
@click.argument("host")
@click.option(
    "-i",
    "--inventory",
    metavar="PATH",
    callback=not_empty,
    help="The run's inventory (required: never read from the journal).",
)
@click.option(
    "--allow-reboot/--no-reboot",
    "allow_reboot",
    default=False,
    show_default=True,
    help="Allow the reboot a rollback of a rebooted host needs.",
)
@click.option(
    "--force",
    type=click.Choice(["gpu-processes", "host-lock"]),
    multiple=True,
    help="Reboot even though GPU processes run; take over another controller's host lock.",
)
@click.option(
    "--over-later-runs",
    is_flag=True,
    help="Roll back even though later runs changed HOST (their changes are undone too).",
)
@click.option("--reboot-timeout", type=click.IntRange(30, 7200), default=1200, show_default=True)
@playbook_timeout_option
@detailed_exitcode_option
@json_option
def rollback_cmd(
    run: str,
    host: str,
    inventory: str | None,
    allow_reboot: bool,
    force: tuple[str, ...],
    over_later_runs: bool,
    reboot_timeout: int,
    playbook_timeout: int,
    detailed_exitcode: bool,
    as_json: bool,
) -> None:
    """Replay HOST's journal of RUN backwards: packages, holds, files, boot entry.

    Exit 0 rolled back (2 with --detailed-exitcode), 1 the rollback failed, 3 nothing to roll
    back, a reboot needed without --allow-reboot, or a later run changed HOST since.
    """
    from gpufix.apply.hostlock import FORCE as FORCE_HOST_LOCK
    from gpufix.apply.hostlock import HostLock
    from gpufix.apply.locks import HostLocks
    from gpufix.apply.rollback import check_can_roll_back, later_changes, precheck, rollback
    from gpufix.apply.targets import check_same
    from gpufix.apply.uninstall import live_hosts

    j = FileJournal.open(run)
    if j.state == "running":
        raise GpufixError(f"run {j.run_id} is still running (pid {j.meta.get('pid')})")
    j.host(host)
    j.require_sealed("rolled back")  # it says which files, modes and packages go back, as root
    recorded = j.meta.get("options", {}).get("inventory")
    if not inventory:
        # A journal is data: its inventory path only names what to pass. Ansible runs an
        # executable inventory, and a YAML one's host vars are templated: code either way.
        used = (
            f"used inventory {one_line(recorded, 200)}"
            if isinstance(recorded, str) and recorded
            else "records no inventory"
        )
        raise InvalidInput(
            f"run {j.run_id} {used}: give -i PATH (gpufix never takes the inventory from a "
            "journal, which could name one that runs code)"
        )
    inv = inventory_path(inventory)
    if not inv.is_file() and not inv.is_dir():
        raise InvalidInput(f"inventory {one_line(str(inv), 200)} not found")
    # the host must be one live host of that inventory before its journal says anything more
    if live_hosts(host, inv) != [host]:
        raise InvalidInput(f"{one_line(repr(host))} is not one host of {inv}: give its own name")
    # with something to roll back, on the same machine the run changed under that name
    check_same({host: check_can_roll_back(j, host)}, recorded, inv, f"rolling {host} back")
    with HostLocks([host]):
        # read again under the lock: a rollback of the same host that ended meanwhile has
        # changed the journal (a second one would roll back twice and overwrite its record)
        j = FileJournal.open(j.run_id)
        j.require_sealed("rolled back")
        check_can_roll_back(j, host)
        later = later_changes(j, host)
        if later and not over_later_runs:
            raise InvalidInput(
                f"{host} was changed again by later run(s) {', '.join(later)}: roll those back "
                "first, newest first (restoring this run's state would undo theirs too), or add "
                "--over-later-runs"
            )
        precheck(j, host, allow_reboot)  # what the journal alone says, before the host is locked
        lock = HostLock(inv, force=FORCE_HOST_LOCK in force, report=progress)
        held, lost = lock.take([host])
        if lost:
            raise Unreachable(f"{host}: not rolled back: {lost[host]}")
        if held:
            raise GpufixError(f"{host}: not rolled back: {held[host]}")
        try:
            state = rollback(
                j,
                host,
                inv,
                allow_reboot=allow_reboot,
                force=force,
                report=progress,
                reboot_timeout=reboot_timeout,
                playbook_timeout=playbook_timeout,
            )
        finally:
            lock.release()
    rec = j.host(host)
    if as_json:
        click.echo(json.dumps({"run": j.run_id, "host": host, **rec}, indent=2, default=str))
    else:
        title = f"rollback of {host} in run {j.run_id}"
        _console().print(_table(title, HOST_COLUMNS, [_host_row(rec)]))
    sys.exit(changes_exit(True, detailed_exitcode) if state == "rolled-back" else EXIT_ERROR)


@click.command("uninstall")
@click.argument("target", callback=not_empty)
@inventory_option
@click.option("--check", is_flag=True, help="Say what would be removed; remove nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask (required when stdin is not a TTY).")
@forks_option
@json_option
def uninstall_cmd(
    target: str, inventory: str | None, check: bool, yes: bool, forks: int, as_json: bool
) -> None:
    """Remove gpufix's own files (the probe program and its verdict) from HOST|GROUP.

    A plan's changes stay: `gpufix rollback RUN HOST -i INVENTORY` undoes those. Exit 0 done, 1 failed,
    4 unreachable, 3 invalid input.
    """
    from gpufix.apply.uninstall import live_hosts, uninstall

    inv = inventory_path(inventory)
    hosts = live_hosts(target, inv)
    if not (yes or check):
        if not sys.stdin.isatty():
            raise InvalidInput("stdin is not a terminal: add --yes to uninstall without a prompt")
        if not click.confirm(
            f"Remove gpufix's files from {', '.join(hosts)}?", default=False, err=True
        ):
            sys.exit(EXIT_OK)
    got = uninstall(hosts, inv, check=check, report=progress, forks=forks)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in got], indent=2))
    else:
        rows = [[r.host, r.state, str(r.changed), r.message] for r in got]
        _console().print(_table("gpufix uninstall", ["host", "state", "changed", "note"], rows))
    states = {r.state for r in got}
    sys.exit(4 if "unreachable" in states else (EXIT_ERROR if "failed" in states else EXIT_OK))
