"""A recorded host snapshot with its GPUs and torch swapped, for engine tests that need one model
on a known host (tests/fixtures/hosts)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"


def recorded(snapshot: str, torch: str, gpu: str, compute_capability: str) -> dict[str, Any]:
    f = copy.deepcopy(json.loads((HOSTS / f"{snapshot}.json").read_text())["facts"])
    for g in f["gpus"]:
        g.update(name=gpu, compute_capability=compute_capability)
    f["python_envs"][0]["packages"]["torch"] = torch
    return f
