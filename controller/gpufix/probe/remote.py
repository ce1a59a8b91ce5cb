"""Run the probe program on hosts: directly on this machine, through ansible-runner elsewhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpufix import runner
from gpufix.errors import InvalidInput
from gpufix.inventory import resolve

_LOCAL = ("localhost", "127.0.0.1")


def _args(deadline: int, cpu: bool, world_size: int | None) -> list[str]:
    args = ["--deadline", str(deadline)]
    if cpu:
        args.append("--cpu")
    if world_size:
        args += ["--world-size", str(world_size)]
    return args


def _parse(host: str, stdout: str, error: str) -> dict[str, Any]:
    """The verdict is the last JSON object the program printed."""
    text = stdout.strip()
    start = text.find("{")
    if start >= 0:
        try:
            doc = json.loads(text[start:])
            if isinstance(doc, dict) and doc.get("format") == "gpufix-probe":
                doc.setdefault("host", host)
                return doc
        except json.JSONDecodeError:
            pass
    return {
        "format": "gpufix-probe",
        "version": 1,
        "host": host,
        "verdict": "failed",
        "error": error or "the probe printed no verdict",
    }


def probe_hosts(
    hosts: list[str] | None,
    inventory: Path,
    *,
    pattern: str | None = None,
    deadline: int = 120,
    cpu: bool = False,
    world_size: int | None = None,
    python: str = "python3",
    progress: runner.Progress | None = None,
) -> dict[str, dict[str, Any]]:
    from gpufix.probe.local import program_path, run_local

    targets = resolve(pattern or ",".join(hosts or []), inventory)
    recorded = [t.name for t in targets if t.snapshot is not None]
    if recorded:
        raise InvalidInput(
            f"{', '.join(recorded)}: recorded host(s) from a snapshot; there is nothing to probe"
        )
    args = _args(deadline, cpu, world_size)
    out: dict[str, dict[str, Any]] = {}
    local = [t for t in targets if t.name in _LOCAL or t.vars.get("ansible_connection") == "local"]
    for t in local:
        if progress:
            progress(t.name, "probe (local)")
        py = None if python == "python3" else python
        out[t.name] = (
            run_local(python=py, args=args, timeout=deadline + 30)
            if py
            else run_local(args=args, timeout=deadline + 30)
        )
    remote = [t.name for t in targets if t not in local]
    if remote:
        res = runner.run_script(
            ",".join(remote),
            inventory,
            program_path(),
            args,
            executable=python,
            timeout=deadline + 120,
            progress=progress,
        )
        for name in remote:
            hr = res.hosts.get(name)
            if hr is None:
                out[name] = _parse(name, "", f"no result from ansible ({res.status})")
            elif hr.status == "unreachable":
                out[name] = _parse(name, "", f"unreachable: {hr.message}")
            else:
                out[name] = _parse(name, hr.stdout, hr.message)
    return out


def show(verdicts: dict[str, dict[str, Any]]) -> None:
    from gpufix.cli import render
    from gpufix.probe.local import summarize

    c = render.console()
    for host, v in verdicts.items():
        c.print(f"[bold]{host}[/]: {v.get('verdict')}: {summarize(v)}")
