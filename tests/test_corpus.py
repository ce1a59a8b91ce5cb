"""Public hang reports with confirmed fixes: the plan's choice (or its first alternative)
must be the fix that worked. Known misses are strict xfails with the reason, so a change in
either direction shows up and docs/decision.md is updated with it."""

from __future__ import annotations

import pytest
from corpus.harness import cases, evaluate
from corpus.split import split_of

# id -> why the engine cannot get it from what the thread states
KNOWN_MISSES = {
    "nccl-30-new-driver": "driver version not stated: no driver evidence to act on",
    "detectron-219-driver-396": "driver version not stated: no driver evidence to act on",
    "accelerate-2837-3090-driver": "driver version not stated: no driver evidence to act on",
    "nccl-tests-276-h200-fm-reset": "fabric manager state not in the facts we record (error state, not version)",
    "lightning-4420-ib-disable": "probe maps a pg_init failure (not a stall) without a rerun to no cause",
    "pytorch-80876-cvd-after-import": "a code bug: `gpufix lint` finds it; the host is healthy",
    "pytorch-9158-cvd-before-import": "a code bug: `gpufix lint` finds it; the host is healthy",
}
CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict) -> None:
    if case["id"] in KNOWN_MISSES:
        pytest.xfail(KNOWN_MISSES[case["id"]]) if not evaluate(case)["hit"] else pytest.fail(
            f"{case['id']} now hits: remove it from KNOWN_MISSES and update docs/decision.md"
        )
    r = evaluate(case)
    assert r["hit"], (r["want"], r["chosen"], r["first_alternative"], case["source"])


def test_every_case_has_a_source_and_a_confirmed_fix() -> None:
    for c in CASES:
        assert c["source"].startswith("https://github.com/"), c["id"]
        assert c["confirmed_fix"] and c["confirmed_by"] in ("reporter", "maintainer", "both")


def test_split_is_the_url_hash() -> None:
    for c in CASES:
        assert c["source"] == c["source"].strip().rstrip("/"), c["id"]
        assert c["split"] == split_of(c["source"]), c["id"]
