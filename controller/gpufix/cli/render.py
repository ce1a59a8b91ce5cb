"""Human output: plans shown the way `terraform plan` shows changes, and fact diffs."""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from gpufix.engine.plan import Plan

_MARK = {"error": "[red]✗[/]", "warning": "[yellow]![/]", "info": "[blue]i[/]"}


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Off a terminal (pipes, CI logs) do not wrap tables at 80 columns.
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "160"))
    return Console(
        file=stream,
        width=width,
        no_color="NO_COLOR" in os.environ,
        highlight=False,
        soft_wrap=True,
    )


def plan(c: Console, p: Plan) -> None:
    c.print(f"[bold]gpufix plan for {p.host}[/]")
    c.print()
    c.print("[bold]Findings[/]")
    if not p.findings:
        c.print("  (none)")
    for f in p.findings:
        ev = ", ".join(f"{k}={short(v)}" for k, v in f.evidence.items())
        c.print(f"  {_MARK.get(f.severity, '-')} {f.severity:<7} {f.id}: {f.message}")
        c.print(f"      [dim]evidence: {ev}[/]")
        c.print(f"      [dim]source: {f.source}[/]")
    c.print()
    c.print("[bold]Decision path[/]")
    for line in p.path:
        c.print(f"  - {line}")
    c.print()
    t = Table(title=None, show_header=True, header_style="bold", box=None, padding=(0, 2))
    t.add_column("strategy")
    t.add_column("feasible")
    t.add_column("why")
    for o in sorted(p.options, key=lambda o: o.rank):
        mark = "→ chosen" if o.strategy == p.strategy else ("yes" if o.feasible else "no")
        t.add_row(o.strategy, mark, o.reason)
    c.print("[bold]Strategies considered[/]")
    c.print(t)
    c.print()
    c.print(f"[bold]Chosen strategy:[/] {p.strategy}")
    if p.steps:
        c.print("[bold]Steps[/]")
        for i, s in enumerate(p.steps, 1):
            c.print(f"  {i}. [cyan]{s.playbook}[/]: {s.description}")
            for k, v in s.vars.items():
                c.print(f"       {k} = {short(v)}")
    c.print(f"[bold]Reboot:[/] {'yes' if p.reboot_required else 'no'}")
    c.print(f"[bold]Expected outcome:[/] {p.outcome}")
    if p.risks:
        c.print("[bold]Residual risks[/]")
        for r in p.risks:
            c.print(f"  - {r}")
    c.print()


def short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 80 else s[:77] + "..."
