"""NCCL 2.29.7-2.30.7 release notes (NVIDIA's GitHub release pages, read 2026-12-01;
nccl_issues.yaml): the one fixed hang the probe can show that no row had,
proxy-service-stray-connection-hang (before 2.30.7), and NCCL's own 2.30.7 note behind
pxn-multinode-ib-hang.

proxy-service-stray-connection-hang shows `stall:collective`, which no nccl-version-affected row of
evidence_fixes.yaml reads: the row is named in the nccl-known-issue finding of a host whose NCCL
is in its range, and never becomes the fix floor of a run no knob decided (an outside connection
to the proxy's port is one cause among many for such a run). The host is the recorded jammy 4x
P100 host with A100 GPUs; the NCCL is the probe's reading.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from a100_cumem import a100_host
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.kb_evidence import EVIDENCE
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
PROXY = "proxy-service-stray-connection-hang"
NOTES = "https://github.com/NVIDIA/nccl/releases/tag/v2.30.7-1"


def issue(id_: str) -> Any:
    return next(i for i in KB.nccl_issues if i.id == id_)


def stalled(nccl: str) -> dict[str, Any]:
    """A one-host probe that hung in the all-reduce, no experiment run; the NCCL it loaded."""
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
            "stalled": {"phase": "allreduce", "ranks": [0, 1]}, "experiments": [],
            "decided_by": None, "backend": "nccl", "facts": {"nccl": nccl}}  # fmt: skip


def known(plan: Plan) -> set[str]:
    found = [f for f in plan.findings if f.id == "nccl-known-issue"]
    return set(found[0].evidence["issues"]) if found else set()


def test_the_proxy_row_quotes_the_2_30_7_notes_and_shows_only_a_stall() -> None:
    i = issue(PROXY)
    assert i.fixed_in == "2.30.7" and i.matches("2.30.7") is False
    assert i.matches("2.30.4") and i.matches("2.29.7") and i.matches("2.18.3")
    assert i.source.startswith(NOTES) and "ncclProxyService to hang" in i.source
    assert "nvidia/nccl/pull/1834" in i.source.lower()
    assert i.shows == ("stall:collective",) and all(EVIDENCE.fullmatch(k) for k in i.shows)
    assert not i.setup and not i.archs and i.workaround is None


def test_the_pxn_row_cites_nccls_own_fix() -> None:
    i = issue("pxn-multinode-ib-hang")
    assert NOTES in i.source and "deadlock caused by cuda stream allocation under PXN" in i.source
    assert "docs.nvidia.com/cuda/cuest/troubleshooting" in i.source


@pytest.mark.parametrize(
    ("nccl", "inside"), [("2.30.4", True), ("2.29.7", True), ("2.30.7", False)]
)
def test_a_host_inside_the_range_is_told_of_the_proxy_hang(nccl: str, inside: bool) -> None:
    plan = decide(a100_host("2.3.0+cu121"), stalled(nccl))
    assert (PROXY in known(plan)) is inside
    finding = next((f for f in plan.findings if f.id == "nccl-known-issue"), None)
    if inside:
        assert finding is not None and finding.evidence["fixed_by"] == "2.30.7"
        assert "proxy service thread hangs" in finding.message
    # cited knowledge, not a decision: the plan does not move NCCL for this row
    assert (plan.extra.get("decision") or {}).get("nccl_issue", {}).get("id") != PROXY


def test_no_knob_deciding_keeps_the_earlier_fix_as_the_floor() -> None:
    """A 2.19.3 run that no experiment decided moves up to the fix of the last row that shows
    that evidence (2.26.2), not to 2.30.7 for the proxy hang it is also told of."""
    exps = [{"id": x, "env": {}, "gpus": None, "verdict": "hung", "stalled": None, "error": None,
             "elapsed_s": 1.0} for x in ("p2p-off", "shm-off", "cumem-off")]  # fmt: skip
    verdict = {**stalled("2.19.3"), "experiments": exps}
    plan = decide(a100_host("2.3.0+cu121"), verdict)
    assert PROXY in known(plan)
    decision = plan.extra["decision"]
    assert decision["row"] == "experiments-none-decided-nccl-issue"
    assert decision["nccl_issue"]["id"] == "multi-comm-connect-hang"
    assert decision["nccl_issue"]["fixed_in"] == "2.26.2"
