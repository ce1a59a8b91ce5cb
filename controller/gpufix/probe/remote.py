"""Run the probe program on hosts: directly on this machine, through ansible-runner elsewhere."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

from gpufix import inputs, runner
from gpufix.engine.signals import MADE_BY_GPUFIX
from gpufix.errors import InvalidInput
from gpufix.inventory import resolve
from gpufix.probe import busy, stop
from gpufix.probe.options import PYTHON, ProbeOptions

_LOCAL = ("localhost", "127.0.0.1")


def _parse(host: str, stdout: str, error: str) -> dict[str, Any]:
    """The verdict is the last JSON object the program printed. It comes from the host: data,
    checked like a verdict file; one that breaks the schema is no verdict."""
    text = stdout.strip()
    start = text.find("{")
    if start >= 0:
        try:
            doc = json.loads(text[start:])
            if isinstance(doc, dict) and doc.get("format") == "gpufix-probe":
                doc.setdefault("host", host)
                inputs.check_tree(doc, f"probe verdict from {host}")
                inputs.check_probe_verdict(doc, f"probe verdict from {host}")
                return doc
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
            pass
        except InvalidInput as exc:
            error = f"the verdict {host} returned is not one gpufix can read: {exc}"
    # No verdict came back (unreachable, no result, nothing printed): marked so that the engine
    # reads it as no evidence about the GPUs (engine/signals.printed_none).
    return {
        "format": "gpufix-probe",
        "version": 1,
        "host": host,
        "verdict": "failed",
        "error": error or "the probe printed no verdict",
        "notes": [MADE_BY_GPUFIX],
    }


def _inventory_python(host: str, value: object) -> str:
    """The inventory's interpreter for the probe: an absolute path, checked like --python (a
    value from a file is data, never a command line)."""
    if value in (None, ""):
        return "python3"
    text = str(value)
    if not text.startswith("/") or not PYTHON.fullmatch(text):
        raise InvalidInput(f"{host}: gpufix_probe_python {text[:80]!r} is not an absolute path")
    return text


def probe_hosts(
    hosts: list[str] | None,
    inventory: Path,
    *,
    pattern: str | None = None,
    options: ProbeOptions | None = None,
    progress: runner.Progress | None = None,
    forks: int = runner.FORKS,
) -> dict[str, dict[str, Any]]:
    """Probe each host on its own: here for localhost, through ansible-runner elsewhere."""
    from gpufix.probe.local import program_path, run_local

    opts = (options or ProbeOptions()).check()
    targets = resolve(pattern or ",".join(hosts or []), inventory)
    recorded = [t.name for t in targets if t.snapshot is not None]
    if recorded:
        raise InvalidInput(
            f"{', '.join(recorded)}: recorded host(s) from a snapshot; there is nothing to probe"
        )
    args = opts.program_args()
    limit = opts.total_s() + 30
    out: dict[str, dict[str, Any]] = {}
    local = [t for t in targets if t.name in _LOCAL or t.vars.get("ansible_connection") == "local"]
    held = busy.held_hosts(
        [t.name for t in targets if t not in local],
        [t.name for t in local],
        inventory,
        progress=progress,
        forks=forks,
    )
    for name, why in held.items():
        # no verdict, as for a host not reached, but the reason is another run (exit 1, not 4)
        out[name] = {**_parse(name, "", why), "reached": False, "held": True}
    targets = [t for t in targets if t.name not in held]
    local = [t for t in local if t.name not in held]
    for t in local:
        if progress:
            progress(t.name, "probe (local)")
        # --python, else the inventory's gpufix_probe_python (the training environment's, as
        # for a remote host), else this interpreter (it has torch: the test install)
        given = t.vars.get("gpufix_probe_python")
        python = opts.python or (_inventory_python(t.name, given) if given else sys.executable)
        out[t.name] = run_local(python=python, args=args, timeout=limit)
    # --python, else the host's gpufix_probe_python (the probe role's variable), else python3
    by_python: dict[str, list[str]] = {}
    for t in targets:
        if t not in local:
            python = opts.python or _inventory_python(t.name, t.vars.get("gpufix_probe_python"))
            by_python.setdefault(python, []).append(t.name)
    for python, remote in by_python.items():
        # The run's id is on every command line it starts: stop() finds them by it.
        run_id = uuid.uuid4().hex[:12]
        try:
            res = runner.run_script(
                ",".join(remote),
                inventory,
                program_path(),
                [*args, "--run-id", run_id],
                executable=python,
                timeout=limit + 90,
                forks=forks,
                progress=progress,
            )
        except KeyboardInterrupt:
            left = stop.stop(remote, inventory, {"gpufix_probe_run_id": run_id})
            after = f"they end by their own deadline (about {opts.total_s()} s)"
            raise KeyboardInterrupt(stop.interrupted(remote, left, after)) from None
        for name in remote:
            hr = res.hosts.get(name)
            if hr is None:
                out[name] = _parse(name, "", f"no result from ansible ({res.status})")
            elif hr.status == "unreachable":
                # no verdict at all: marked so that nothing reads it as a failed probe
                out[name] = {**_parse(name, "", f"unreachable: {hr.message}"), "reached": False}
            else:
                out[name] = _parse(name, hr.stdout, hr.message)
    for name, v in out.items():  # the program knows the hostname; gpufix plans inventory names
        v["inventory_host"] = name
    return out


def show(verdicts: dict[str, dict[str, Any]]) -> None:
    from gpufix.cli import render
    from gpufix.probe.summary import summarize

    c = render.console()  # no markup: hosts and summaries are text
    for host, v in verdicts.items():
        # The summary starts with the verdict itself ("healthy: 2 ranks ...").
        c.print(f"{host}: {summarize(v)}")
