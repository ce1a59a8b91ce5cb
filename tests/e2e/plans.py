"""Plan files for the lab, made the way a user makes them: `gpufix plan HOSTS --strategy S -o`
on the hosts' real facts (a plan file is a request the engine re-derives: docs/security.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab import Lab


def make_plans(
    lab: Lab, hosts: list[str], strategy: str, out: Path, *extra: str
) -> list[dict[str, Any]]:
    r = lab.gpufix(
        "plan",
        ",".join(hosts),
        "-i",
        str(lab.inventory),
        "--strategy",
        strategy,
        "-o",
        str(out),
        "--json",
        *extra,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    plans: list[dict[str, Any]] = json.loads(r.stdout)["plans"]
    assert [p["host"] for p in plans] == hosts and all(p["strategy"] == strategy for p in plans)
    return plans
