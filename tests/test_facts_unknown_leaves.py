"""Which facts values may be {"unknown": ...} on their own: docs/facts.md lists those that
cannot, and the list is the schema's. Three reviews (2026-12-07) wrote os.id_like,
topology.raw and env.CUDA_VISIBLE_DEVICES unknown from the docs' "most single values may be"
and were refused; those three are accepted now, and a plan is made from them."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules
from gpufix.facts.snapshot import schema, schema_errors
from gpufix.workload.preflight import check_visible_devices

ROOT = Path(__file__).resolve().parents[1]
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
decide = partial(engine.decide, kb=load(), rules=load_rules())


def _fixed_leaves(node: Any, path: str, out: list[str]) -> None:
    """Leaf values whose schema has no {"unknown": ...} branch anywhere below them."""
    if not isinstance(node, dict):
        return
    for key, sub in (node.get("properties") or {}).items():
        where = f"{path}.{key}" if path else key
        if "#/$defs/unknown" in json.dumps(sub):
            _fixed_leaves(sub, where, out)
        else:
            out.append(where)
    for alt in node.get("anyOf", []) + node.get("oneOf", []):
        _fixed_leaves(alt, path, out)
    if "items" in node:
        _fixed_leaves(node["items"], f"{path}[]", out)


def fixed_leaves() -> list[str]:
    out: list[str] = []
    _fixed_leaves(schema()["properties"]["facts"], "", out)
    return sorted(dict.fromkeys(out))


def test_the_docs_list_the_values_that_cannot_be_unknown() -> None:
    text = (ROOT / "docs" / "facts.md").read_text()
    block = re.search(r"<!-- fixed-leaves -->\n(.*?)\n<!-- /fixed-leaves -->", text, re.S)
    assert block is not None
    listed = re.findall(r"`([^`]+)`", block.group(1))
    assert listed == fixed_leaves()


@pytest.mark.parametrize(
    "path",
    [("os", "id_like"), ("topology", "raw"), ("env", "CUDA_VISIBLE_DEVICES"), ("iommu", "mode")],
)
def test_a_value_a_report_does_not_give_may_be_unknown(path: tuple[str, str]) -> None:
    doc = json.loads((HOSTS / "focal-4x4090.json").read_text())
    doc["facts"][path[0]][path[1]] = {"unknown": "not in the report"}
    assert schema_errors(doc) == []
    assert isinstance(decide(doc["facts"], None), Plan)  # planned, not refused


def test_an_unknown_cuda_visible_devices_is_not_read_as_unset() -> None:
    """Preflight read an unknown value as None: "unset, all GPUs visible", a pass."""
    doc = json.loads((HOSTS / "focal-4x4090.json").read_text())
    doc["facts"]["env"]["CUDA_VISIBLE_DEVICES"] = {"unknown": "not in the report"}
    got = check_visible_devices(doc["facts"], load(), None)
    assert (got.status, got.message) == ("skip", "CUDA_VISIBLE_DEVICES was not read")
    doc["facts"]["env"]["CUDA_VISIBLE_DEVICES"] = None
    assert check_visible_devices(doc["facts"], load(), None).status == "pass"


def test_a_fixed_value_written_unknown_is_still_refused() -> None:
    doc = json.loads((HOSTS / "focal-4x4090.json").read_text())
    doc["facts"]["shm"]["size_bytes"] = {"unknown": "not in the report"}
    errors = schema_errors(doc)
    assert errors and "facts/shm/size_bytes" in errors[0]


def test_the_facts_diff_prints_an_unknown_variable_as_unknown() -> None:
    from gpufix.facts.diff import _environment

    doc = json.loads((HOSTS / "focal-4x4090.json").read_text())
    doc["facts"]["env"]["CUDA_VISIBLE_DEVICES"] = {"unknown": "not in the report"}
    assert _environment(doc["facts"]) == "CUDA_VISIBLE_DEVICES=unknown (not in the report)"
