"""What the controller asks of the facts module: options the module declares, and a time budget
for all its commands that ends inside the gathering run's own limit (--timeout)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufix import runner

MODULE = Path(__file__).resolve().parents[1] / "plugins" / "modules" / "gpufix_facts.py"


def _declared_options() -> set[str]:
    tree = ast.parse(MODULE.read_text())
    (doc,) = [
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "DOCUMENTATION"
    ]
    return set(yaml.safe_load(doc)["options"])


@pytest.mark.parametrize(("timeout", "budget"), [(120, 60), (600, 60), (30, 15), (3, 1), (1, 1)])
def test_the_module_budget_ends_inside_the_run(monkeypatch, timeout: int, budget: int) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(runner, "_run", lambda **kw: seen.update(kw))
    runner.gather_facts("h1", Path("inv"), python_envs=["/opt/venv/bin/python"], timeout=timeout)
    args = json.loads(seen["module_args"])
    assert set(args) <= _declared_options()
    assert args["total_timeout"] == budget and args["timeout"] <= budget
    assert seen["timeout"] == timeout
