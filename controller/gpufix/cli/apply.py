"""`gpufix apply`, `gpufix status` and `gpufix rollback`: parse, call gpufix.apply.rollout, print.
Registered by gpufix.cli. Exit codes: docs/apply.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from gpufix.apply import rollout as applymod
from gpufix.apply.journal import Journal, list_runs
from gpufix.cli.common import (
    changes_exit,
    detailed_exitcode_option,
    inventory_path,
    json_option,
    progress,
)
from gpufix.engine.plan import Plan, load_plans
from gpufix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, GpufixError, InvalidInput
from gpufix.strategies import NAMES as STRATEGIES


def _console(stderr: bool = False) -> Any:
    from gpufix.cli.render import console

    return console(stderr=stderr)


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*r)
    return t


def _replan(target: str, strategy: str, inventory: Path) -> list[Plan]:
    from gpufix.engine.context import Constraints
    from gpufix.planning import make_plans

    # reboots are gated by apply's --allow-reboot, not by the plan
    got = make_plans(
        target, inventory, Constraints(strategy=strategy, reboot_allowed=True), progress=progress
    )
    if got.failures:
        raise GpufixError(
            "; ".join(f"{f.host}: {f.error}" for f in got.failures),
            4 if any(f.unreachable for f in got.failures) else EXIT_ERROR,
        )
    return got.plans


def _confirm(plans: list[Plan], yes: bool, as_json: bool) -> None:
    from gpufix.cli import render

    c = _console(stderr=as_json)
    for p in plans:
        render.plan(c, p)
    if yes:
        return
    if not sys.stdin.isatty():
        raise InvalidInput("stdin is not a terminal: add --yes to apply without a prompt")
    if not click.confirm(f"Apply to {len(plans)} host(s)?", default=False, err=True):
        click.echo("gpufix: not applied", err=True)
        sys.exit(EXIT_OK)


def _print_result(res: applymod.Result, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
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
    what = "check" if res.check else ("resumed run" if res.resumed else "run")
    title = f"gpufix apply: {what} {res.run_id or '(no journal in check mode)'}"
    if res.noop:
        title += ": already applied, nothing to do"
    if res.stopped:
        title += ": rollout stopped (--max-fail)"
    cols = ["host", "strategy", "state", "changed", "rebooted", "verdict", "time", "note"]
    _console().print(_table(title, cols, rows))


@click.command("apply")
@click.argument("target")
@click.option("-i", "--inventory", metavar="PATH", help="Ansible inventory.")
@click.option(
    "--strategy",
    type=click.Choice([s for s in STRATEGIES if s != "none"]),
    help="Re-plan TARGET (host or group) with this strategy, show it and ask to confirm.",
)
@click.option("--check", is_flag=True, help="Run the playbooks in check mode with diffs.")
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
    type=click.Choice(["gpu-processes", "disk"]),
    multiple=True,
    help="Go on despite this preflight finding.",
)
@click.option("--dpkg-wait", type=click.IntRange(0, 3600), default=120, show_default=True)
@click.option("--reboot-timeout", type=click.IntRange(30, 7200), default=600, show_default=True)
@click.option("--no-verify", is_flag=True, help="Do not run the probe after the change.")
@click.option("--probe-cpu", is_flag=True, help="Probe with gloo on CPU (hosts without a GPU).")
@click.option("--probe-python", metavar="PATH", help="Interpreter with torch on the hosts.")
@click.option("--probe-deadline", type=click.IntRange(10, 3600), default=120, show_default=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask (required when stdin is not a TTY).")
@detailed_exitcode_option
@json_option
def apply_cmd(
    target: str,
    inventory: str | None,
    strategy: str | None,
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
    yes: bool,
    detailed_exitcode: bool,
    as_json: bool,
) -> None:
    """Apply PLANFILE exactly (refused when stale), or --strategy S on a HOST|GROUP.

    Exit 0 applied or nothing to do (2 when something changed, with --detailed-exitcode),
    5 a probe after the change was not healthy, 4 a host unreachable, 3 invalid input, 1 error.
    """
    inv = inventory_path(inventory)
    applymod.parse_batch(batch, 1)
    probe_vars: dict[str, Any] = {"gpufix_probe_deadline": probe_deadline}
    if probe_cpu:
        probe_vars["gpufix_probe_cpu"] = True
    if probe_python:
        probe_vars["gpufix_probe_python"] = probe_python
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
        probe_vars=probe_vars,
    )
    if strategy:
        plans = _replan(target, strategy, inv)
        _confirm(plans, yes, as_json)
        res = applymod.apply(plans, opts, report=progress, fresh_facts=True)
    else:
        path = Path(target)
        if not path.is_file():
            raise InvalidInput(
                f"no plan file {target!r}: give a PLANFILE from `gpufix plan -o`, "
                "or --strategy S HOST|GROUP"
            )
        plans = load_plans(path)
        res = applymod.apply(plans, opts, plan_file=str(path.resolve()), report=progress)
    _print_result(res, as_json)
    code = res.exit_code
    sys.exit(changes_exit(True, detailed_exitcode) if code == EXIT_CHANGES else code)


def _host_row(rec: dict[str, Any]) -> list[str]:
    steps = rec.get("steps") or []
    done = sum(1 for s in steps if s.get("state") == "done")
    verdicts = rec.get("verdicts") or []
    return [
        rec.get("host", "?"),
        rec.get("strategy", "?"),
        rec.get("state", "?"),
        f"{done}/{len(steps)}",
        "yes" if rec.get("rebooted") else "no",
        (verdicts[-1].get("verdict") or "none") if verdicts else "-",
        rec.get("updated_at", ""),
        rec.get("reason", ""),
    ]


@click.command("status")
@click.argument("run", required=False)
@json_option
def status_cmd(run: str | None, as_json: bool) -> None:
    """List apply runs, or show where each host of RUN stands ('latest' for the newest)."""
    if run is None:
        runs = [Journal.open(r) for r in list_runs()]
        if as_json:
            click.echo(
                json.dumps(
                    [{**j.meta, "state": j.state, "run": j.run_id} for j in runs],
                    indent=2,
                    default=str,
                )
            )
            return
        rows = []
        for j in runs:
            states = [r.get("state", "?") for r in j.records()]
            counts = ", ".join(f"{states.count(s)} {s}" for s in sorted(set(states)))
            rows.append([j.run_id, j.state, str(j.meta.get("plan_file") or "-"), counts])
        _console().print(_table("gpufix apply runs", ["run", "state", "plan", "hosts"], rows))
        return
    j = Journal.open(run)
    if as_json:
        click.echo(
            json.dumps(
                {"run": {**j.meta, "state": j.state}, "hosts": j.records()}, indent=2, default=str
            )
        )
        return
    cols = ["host", "strategy", "state", "steps", "rebooted", "verdict", "updated", "note"]
    title = f"run {j.run_id} ({j.state}), plan {j.meta.get('plan_file') or '-'}"
    _console().print(_table(title, cols, [_host_row(r) for r in j.records()]))


@click.command("rollback")
@click.argument("run")
@click.argument("host")
@click.option("-i", "--inventory", metavar="PATH", help="Inventory (default: the run's).")
@click.option("--reboot-timeout", type=click.IntRange(30, 7200), default=600, show_default=True)
@detailed_exitcode_option
@json_option
def rollback_cmd(
    run: str,
    host: str,
    inventory: str | None,
    reboot_timeout: int,
    detailed_exitcode: bool,
    as_json: bool,
) -> None:
    """Replay HOST's journal of RUN backwards: packages, holds, files, boot entry.

    Exit 0 rolled back (2 with --detailed-exitcode), 1 the rollback failed, 3 nothing to roll back.
    """
    j = Journal.open(run)
    if j.state == "running":
        raise GpufixError(f"run {j.run_id} is still running (pid {j.meta.get('pid')})")
    rec = j.host(host)
    if rec["state"] == "rolled-back":
        raise InvalidInput(f"{host} was already rolled back in run {j.run_id}")
    inv = Path(inventory) if inventory else Path(j.meta.get("options", {}).get("inventory", ""))
    if not inv.is_file() and not inv.is_dir():
        raise InvalidInput(f"inventory {inv} of run {j.run_id} not found: give -i PATH")
    state = applymod.rollback(j, host, inv, report=progress, reboot_timeout=reboot_timeout)
    rec = j.host(host)
    if as_json:
        click.echo(json.dumps({"run": j.run_id, "host": host, **rec}, indent=2, default=str))
    else:
        _console().print(
            _table(
                f"rollback of {host} in run {j.run_id}",
                ["host", "strategy", "state", "steps", "rebooted", "verdict", "updated", "note"],
                [_host_row(rec)],
            )
        )
    sys.exit(changes_exit(True, detailed_exitcode) if state == "rolled-back" else EXIT_ERROR)
