"""Public hang reports with confirmed fixes, scored through the real CLI.

Every case becomes a schema-valid snapshot and probe verdict, `gpufix plan` plans from them in a
subprocess, and the chosen strategy must be the fix that worked. Whether each case is a hit or a
miss is recorded in tests/corpus/expected.yaml, so a change in either direction fails here until
expected.yaml (and docs/decision.md, via bench/corpus_report.py) says so.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from corpus.harness import Result, cases, expected, run_all, score
from corpus.snapshot import snapshot_for
from corpus.split import split_of
from corpus.verdict import LAYERS, experiment_env, schema_errors, verdict_for
from gpufix.facts.snapshot import validate
from gpufix.strategies import NAMES as STRATEGIES

CASES = cases()
IDS = [c["id"] for c in CASES]
CLASSES = {
    "pcie-acs-iommu",
    "no-p2p-gpu",
    "p2p-off-workaround",
    "driver-up",
    "driver-down",
    "driver-mismatch",
    "fabric-manager",
    "container-shm",
    "container-network",
    "socket-interface",
    "multinode-ib",
    "multinode-bootstrap",
    "stack-up",
    "stack-down",
    "nccl-knob",
    "single-gpu",
    "job-side",
}
VERDICTS = {"healthy", "degraded", "hung", "failed"}
EXPERIMENT_VERDICTS = {"healthy", "degraded", "hung", "failed", "skipped"}


@cache
def results() -> dict[str, Result]:
    return {r.id: r for r in run_all(CASES)}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_snapshot_and_verdict_pass_the_schemas(case: dict[str, Any]) -> None:
    snap = snapshot_for(case)
    validate(snap)
    verdict, _ = verdict_for(case, len(snap["facts"]["gpus"]))
    assert schema_errors(verdict) == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_plan_through_the_cli(case: dict[str, Any]) -> None:
    r = results()[case["id"]]
    assert r.rc in (0, 2), r.why
    want = expected()[case["id"]]
    got = "hit" if r.hit else "miss"
    assert got == want["result"], (
        f"{case['id']} is now a {got} (chose {r.chosen}; {r.why or 'expect details hold'}): "
        "update tests/corpus/expected.yaml and docs/decision.md (bench/corpus_report.py)"
    )


def test_expected_covers_every_case_and_names_each_miss() -> None:
    exp = expected()
    assert sorted(exp) == sorted(IDS)
    for cid, row in exp.items():
        assert row["result"] in ("hit", "miss"), cid
        if row["result"] == "miss":
            assert row.get("reason") and not row["reason"].startswith("TODO"), cid


def test_split_is_the_url_hash() -> None:
    for c in CASES:
        assert c["source"] == c["source"].strip().rstrip("/"), c["id"]
        assert c["split"] == split_of(c["source"]), c["id"]


def test_every_case_is_sourced_confirmed_and_well_formed() -> None:
    assert len(set(IDS)) == len(IDS)
    assert len({c["source"] for c in CASES}) == len(CASES), "one case per thread"
    for c in CASES:
        assert c["source"].startswith("https://"), c["id"]
        assert c["title"] and c["symptom"] and c["confirmed_fix"], c["id"]
        assert c["confirmed_by"] in ("reporter", "maintainer", "both"), c["id"]
        assert c["fix_strategy"] in STRATEGIES and c["fix_detail"], c["id"]
        assert c["class"] in CLASSES, c["id"]
        ev = c["evidence"]
        assert ev["probe_verdict"] in VERDICTS, c["id"]
        if ev["probe_verdict"] == "hung":  # a probe always knows where it stalled
            assert ev.get("stalled_phase"), f"{c['id']}: a hung case needs stalled_phase"
        for exp_id, verdict in (ev.get("experiments") or {}).items():
            experiment_env(exp_id)  # raises on an id outside the contract's vocabulary
            assert verdict in EXPERIMENT_VERDICTS, c["id"]
        if ev.get("scope") == "multi-node":
            assert ev.get("failed_layer") in (None, *LAYERS), c["id"]
        if "driver_direction" in (c.get("expect") or {}):
            assert c["environment"].get("driver"), f"{c['id']}: direction needs the old driver"
        if "stack_direction" in (c.get("expect") or {}):
            assert c["environment"].get("torch"), f"{c['id']}: direction needs the old torch"


def test_scoring_can_miss() -> None:
    """The scorer itself: a wrong strategy or a wrong detail is a miss."""
    case = {
        "id": "x",
        "fix_strategy": "nccl-profile",
        "expect": {"nccl_profile": "no-p2p"},
        "environment": {},
    }
    right = {
        "strategy": "nccl-profile",
        "steps": [{"vars": {"gpufix_nccl_profile_names": ["no-p2p"]}}],
    }
    wrong_detail = {
        "strategy": "nccl-profile",
        "steps": [{"vars": {"gpufix_nccl_profile_names": ["ib-off"]}}],
    }
    assert score(case, right) == (True, "")
    assert score(case, wrong_detail)[0] is False
    assert score(case, {"strategy": "pcie-acs", "steps": []})[0] is False


@pytest.mark.parametrize(
    ("stated", "same_as"),
    [
        ({"shm": "64MB"}, {"shm": "64M"}),
        ({"shm": "64 MiB"}, {"shm": "64M"}),
        ({"shm": "65536K"}, {"shm": "64M"}),
        ({"shm": "1GiB"}, {"shm": "1G"}),
        ({"iommu": "enabled"}, {"iommu": "on"}),
        ({"iommu": "iommu=pt"}, {"iommu": "pt"}),
        ({"iommu": "disabled"}, {"iommu": "off"}),
        ({"acs": "on"}, {"acs": "enabled"}),
        ({"acs": False}, {"acs": "disabled"}),
        ({"behind_switch": "no"}, {"behind_switch": False}),
        ({"container": "docker", "ipc_host": "yes"}, {"container": "docker", "ipc_host": True}),
        ({"gpus": "A100 x 8"}, {"gpus": "8x A100"}),
        ({"gpus": "8 A100"}, {"gpus": "8x A100"}),
        ({"gpus": "RTX 4090"}, {"gpus": "2x RTX 4090"}),
    ],
)
def test_a_fact_spelled_another_way_builds_the_same_snapshot(
    stated: dict[str, Any], same_as: dict[str, Any]
) -> None:
    """A case written by someone else (the held-out corpus) may spell a fact differently from
    this corpus: the snapshot is the same, never a silent "not stated"."""

    def facts(env: dict[str, Any]) -> dict[str, Any]:
        doc = snapshot_for({"id": "x", "environment": env})
        validate(doc)  # raises when the snapshot breaks the schema
        return doc["facts"]

    assert facts(stated) == facts(same_as)
    assert facts(stated) != facts({})


def test_a_model_number_is_not_a_gpu_count() -> None:
    gpus = snapshot_for({"id": "x", "environment": {"gpus": "2080 Ti"}})["facts"]["gpus"]
    assert len(gpus) == 2 and gpus[0]["name"] == "2080 Ti"
