"""Human output: plans shown the way `terraform plan` shows changes, group summaries, fact diffs.

Every string printed here may come from a host, a snapshot or a plan file, so the console never
reads Rich markup or emoji codes in text, and control characters (terminal escapes, carriage
returns, bidi overrides) are shown escaped. Styling is applied with Text and `style=`, never by
markup inside strings.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpufix.engine.plan import Plan

_MARK = {"error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("i", "blue")}
# C0 (but newline and tab), DEL, C1, and the Unicode format characters that reorder or hide text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def _escape_char(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: object) -> str:
    """Text safe for a terminal: control and reordering characters shown as escapes."""
    return _CONTROL.sub(_escape_char, str(text))


def one_line(text: object) -> str:
    """clean(), and newlines and tabs escaped too: a value must not forge a line of output."""
    return clean(text).replace("\n", "\\n").replace("\t", "\\t")


def short(v: Any, limit: int = 80) -> str:
    s = one_line(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


class SafeConsole(Console):
    """A Console that never interprets text: no markup, no emoji codes, control chars escaped.

    Tables and titles are rendered through render_str too, so callers that pass plain strings
    (apply's and the probe's tables) are covered without escaping at every call site."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        kwargs["markup"] = False
        kwargs["emoji"] = False
        kwargs["highlight"] = False
        return super().render_str(clean(text), **kwargs)


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Off a terminal (pipes, CI logs) do not wrap tables at 80 columns.
    width = None if stream.isatty() else _columns()
    return SafeConsole(
        file=stream,
        width=width,
        no_color="NO_COLOR" in os.environ,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=True,
    )


def _columns() -> int:
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and 40 <= int(value) <= 1000 else 160


def labelled(c: Console, label: str, text: str) -> None:
    """`label: text` with the label in bold; both are data (a host name, a summary)."""
    line = Text(one_line(label), style="bold")
    line.append(f": {one_line(text)}")
    c.print(line)


def _heading(c: Console, label: str, value: str | None = None) -> None:
    t = Text(label, style="bold")
    if value is not None:
        t.append(" " + one_line(value))
    c.print(t)


def plan(c: Console, p: Plan) -> None:
    _heading(c, f"gpufix plan for {one_line(p.host)}")
    c.print()
    _heading(c, "Findings")
    if not p.findings:
        c.print("  (none)")
    for f in p.findings:
        mark, colour = _MARK.get(f.severity, ("-", ""))
        line = Text("  ")
        line.append(mark, style=colour)
        line.append(f" {one_line(f.severity):<7} {one_line(f.id)}: {one_line(f.message)}")
        c.print(line)
        ev = ", ".join(f"{one_line(k)}={short(v)}" for k, v in f.evidence.items())
        c.print(Text(f"      evidence: {ev}", style="dim"))
        c.print(Text(f"      source: {one_line(f.source)}", style="dim"))
    c.print()
    _heading(c, "Decision path")
    for step in p.path:
        c.print(f"  - {one_line(step)}")
    c.print()
    t = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    for col in ("strategy", "feasible", "why"):
        t.add_column(col)
    for o in sorted(p.options, key=lambda o: o.rank):
        mark = "→ chosen" if o.strategy == p.strategy else ("yes" if o.feasible else "no")
        t.add_row(one_line(o.strategy), mark, one_line(o.reason))
    _heading(c, "Strategies considered")
    c.print(t)
    c.print()
    _heading(c, "Chosen strategy:", p.strategy)
    _decided(c, p)
    _steps(c, "Steps", p.steps)
    _interim(c, p)
    _needs(c, p)
    _heading(c, "Reboot:", "yes" if p.reboot_required else "no")
    _heading(c, "Expected outcome:", p.outcome)
    if p.risks:
        _heading(c, "Residual risks")
        for r in p.risks:
            c.print(f"  - {one_line(r)}")
    c.print()


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _steps(c: Console, title: str, steps: Sequence[Any]) -> None:
    if not steps:
        return
    _heading(c, title)
    for i, s in enumerate(steps, 1):
        line = Text(f"  {i}. ")
        line.append(one_line(_field(s, "playbook")), style="cyan")
        line.append(f": {one_line(_field(s, 'description'))}")
        c.print(line)
        variables = _field(s, "vars")
        for k, v in variables.items() if isinstance(variables, dict) else ():
            c.print(f"       {one_line(k)} = {short(v)}")


def _decided(c: Console, p: Plan) -> None:
    """The decision-table row behind the chosen strategy, under its heading (not under the
    interim's steps, where it read as the interim's)."""
    decision = p.extra.get("decision")
    if not (isinstance(decision, dict) and decision.get("source")):
        return
    row = one_line(decision.get("row"))
    if decision.get("fix") not in (None, p.strategy):
        # The row matched, but its fix was not chosen (one GPU, not feasible, --strategy).
        fix = one_line(decision.get("fix"))
        c.print(Text(f"  table row {row} (its fix, {fix}, not chosen: see the path)", style="dim"))
        _job_setting(c, decision)
        return
    c.print(Text(f"  decided by: {row}", style="dim"))
    c.print(Text(f"  source: {one_line(decision['source'])}", style="dim"))
    _job_setting(c, decision)


def _job_setting(c: Console, decision: dict[str, Any]) -> None:
    """The job-setting row (evidence job-env-off): the job's settings the probe found to break
    the run, the culprit or all of them when no one alone was named (extra.decision), so the
    text says what to take out; the path names them only on a host with several GPUs."""
    if decision.get("evidence") != "experiment:job-env-off":
        return
    culprit, job_env = decision.get("job_env_culprit"), decision.get("job_env")
    settings = [culprit] if culprit else job_env if isinstance(job_env, list) else []
    what = " ".join(one_line(s) for s in settings)
    if len(settings) == 1:
        line = f"the job's setting {what} breaks the run here: take it out of the job"
    elif settings:
        line = f"the run was healthy without the job's settings {what}: take them out of the job"
    else:
        line = "one of the job's own settings breaks the run here: take it out of the job"
    c.print(Text(f"  {line}"))


def _needs(c: Console, p: Plan) -> None:
    """What would decide or complete the plan (plan contract: extra.needs, extra.complete)."""
    needs = [n for n in p.extra.get("needs") or [] if isinstance(n, dict)]
    if not needs:
        return
    if p.extra.get("complete") is False:
        _heading(c, "INCOMPLETE:", "apply refuses this plan until these are gathered")
    else:
        _heading(c, "Would decide better")
    for n in needs:
        c.print(f"  - {one_line(n.get('id'))}: {one_line(n.get('how'))}")


def _interim(c: Console, p: Plan) -> None:
    """The no-reboot mitigation beside the permanent fix (plan contract: `interim`)."""
    interim = getattr(p, "interim", None) or p.extra.get("interim")
    if not interim:
        return
    name, outcome = _field(interim, "strategy"), _field(interim, "outcome")
    _heading(c, "Interim (now, no reboot):", f"{name}: {outcome}")
    _steps(c, "Interim steps", _field(interim, "steps") or [])


def key_findings(p: Plan, limit: int = 3) -> str:
    """A fleet summary's cell: the ids of the most severe findings, in the plan's order."""
    if not p.findings:
        return "-"
    rank = min(_SEVERITY_ORDER.get(f.severity, 3) for f in p.findings)
    top = [f for f in p.findings if _SEVERITY_ORDER.get(f.severity, 3) == rank]
    more = len(p.findings) - min(len(top), limit)
    ids = ", ".join(one_line(f.id) for f in top[:limit])
    return f"{one_line(top[0].severity)}: {ids}" + (f" (+{more})" if more else "")


def needs_ids(p: Plan) -> str:
    """What would still decide or complete the plan (extra.needs ids), "-" when nothing."""
    needs = p.extra.get("needs") if isinstance(p.extra, dict) else None
    ids = [str(n.get("id")) for n in needs or [] if isinstance(n, dict) and n.get("id")]
    return one_line(", ".join(ids)) if ids else "-"


def plan_summary(c: Console, plans: Sequence[Plan]) -> None:
    """One row per host: what a fleet operator reads first."""
    t = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    for col in ("host", "strategy", "reboot", "steps", "needs", "key findings"):
        t.add_column(col, overflow="fold")
    for p in plans:
        t.add_row(
            one_line(p.host),
            one_line(p.strategy),
            "yes" if p.reboot_required else "no",
            str(len(p.steps)),
            needs_ids(p),
            key_findings(p),
        )
    changes = sum(p.changes for p in plans)
    _heading(c, f"gpufix plan: {len(plans)} hosts, {changes} with changes")
    c.print(t)


def comparison(c: Console, cmp: Any) -> None:
    """A `facts.diff.Comparison`: one table, differences first, one line each on why they
    matter (a column for two hosts; below the table for more, where columns are narrow)."""
    diffs = cmp.differences
    if not diffs:
        c.print(f"no differences in what matters for start-up hangs ({len(cmp.rows)} aspects)")
    why_column = len(cmp.hosts) <= 2 and c.width >= 120
    t = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    t.add_column("")
    t.add_column("aspect", no_wrap=True)
    for h in cmp.hosts:
        t.add_column(short(h, 30), overflow="fold")
    if why_column:
        t.add_column("why it matters", overflow="fold")
    for i, r in enumerate(cmp.rows):
        if i == len(diffs) and diffs:
            t.add_section()
        why = [one_line(r.why) if r.differs else ""] if why_column else []
        style = "bold" if r.differs else "dim"
        mark = "≠" if r.differs else ""
        t.add_row(mark, one_line(r.label), *(short(v, 36) for v in r.values), *why, style=style)
    c.print(t)
    if not diffs:
        return
    if not why_column:
        c.print()
        for r in diffs:
            c.print(f"  {one_line(r.label)}: {one_line(r.why)}")
    c.print(f"{len(diffs)} of {len(cmp.rows)} aspects differ; --all lists every fact")


def raw_diff(c: Console, hosts: Sequence[str], rows: Sequence[tuple[str, Sequence[Any]]]) -> None:
    """Every differing fact path (`gpufix diff --all`)."""
    c.print()
    _heading(c, f"All facts that differ ({len(rows)})")
    t = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    t.add_column("fact", overflow="fold")
    for h in hosts:
        t.add_column(short(h, 30), overflow="fold")
    for path, values in rows:
        t.add_row(one_line(path), *(short(v, 60) for v in values))
    c.print(t)
