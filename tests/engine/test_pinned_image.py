"""`--image REF@sha256:D` is what container-fallback runs: the plan describes that image, by
what the knowledge base records for its tag, or says it is unchecked; it never describes the
table's own pick instead (re-read review, 2026-12-06: the reason named pytorch:25.01 for a
pinned 24.04 and for an image gpufix does not know)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
DIGEST = "@sha256:" + "c" * 64


def _option(image: str, host: str = "jammy-4xp100-torch28") -> Any:
    facts = json.loads((HOSTS / f"{host}.json").read_text())["facts"]
    plan = decide(facts, None, Constraints(strategy="container-fallback", container_image=image))
    return plan, {o.strategy: o for o in plan.options}["container-fallback"]


def test_a_known_tag_is_described_by_its_own_record() -> None:
    plan, option = _option("nvcr.io/nvidia/pytorch:24.04-py3" + DIGEST)
    assert option.feasible and option.reason.startswith("the image pinned with --image runs")
    assert "torch 2.3.0a0+6ddf5cf, CUDA 12.4" in plan.outcome and "25.01" not in plan.outcome


def test_an_unknown_image_is_said_to_be_unchecked() -> None:
    plan, option = _option("registry.example.org/team/train:7" + DIGEST)
    assert option.feasible and "unchecked" in option.reason and "25.01" not in option.reason
    assert "not checked against this host" in plan.outcome
    assert plan.steps[0].vars["gpufix_container_runtime_image"].startswith("registry.example.org")
