"""`gpufix probe TARGET`: probe each host, or the hosts as one multi-node job, print the verdicts
and say the exit code (0 healthy or not applicable, 4 a host not reached, 5 otherwise, 1 a host
another gpufix run is changing; docs/exit-codes.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpufix import runner
from gpufix.errors import EXIT_ERROR, EXIT_OK, EXIT_UNREACHABLE, EXIT_VERIFY_FAILED
from gpufix.probe.options import ProbeOptions

_FINE = ("healthy", "not-applicable")


def run(
    target: str,
    inventory: Path,
    options: ProbeOptions,
    *,
    as_json: bool,
    progress: runner.Progress | None = None,
    forks: int = runner.FORKS,
) -> int:
    """forks: hosts probed at once; a multi-node probe runs every host at once whatever it is
    (its ranks wait for each other), and uses it only to gather facts."""
    if options.check().multi_node:
        from gpufix.probe.multinode import probe_group

        verdict = probe_group(target, inventory, options, progress=progress, forks=forks)
        _print(verdict if as_json else None, {target: verdict})
        return EXIT_OK if verdict["verdict"] in _FINE else EXIT_VERIFY_FAILED
    from gpufix.probe.remote import probe_hosts

    verdicts = probe_hosts(
        None, inventory, pattern=target, options=options, progress=progress, forks=forks
    )
    _print(verdicts if as_json else None, verdicts)
    held = [v for v in verdicts.values() if v.get("held")]
    if any(v.get("reached") is False and not v.get("held") for v in verdicts.values()):
        return EXIT_UNREACHABLE  # a host gave no verdict at all
    bad = [v for v in verdicts.values() if v.get("verdict") not in _FINE and not v.get("held")]
    if bad:
        return EXIT_VERIFY_FAILED
    return EXIT_ERROR if held else EXIT_OK  # another run is changing a host: not probed


def _print(doc: Any, verdicts: dict[str, dict[str, Any]]) -> None:
    if doc is not None:
        print(json.dumps(doc, indent=2, default=str))
        return
    from gpufix.probe.remote import show

    show(verdicts)
