"""nccl_issues.yaml `kind`: a release note that describes a hang does not explain a crash, nor
the reverse. From the dev case nccl#2186 (an init SIGSEGV on GB200), which a hang row's NCCL
range alone used to explain. A run that PyTorch's watchdog ended on a collective timeout hung."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from a100_cumem import a100_host
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
TIMEOUT = (
    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)"
)


def none_decided(verdict: str, error: str | None) -> dict[str, Any]:
    """One host, every knob experiment as bad as the main run, NCCL 2.18.3 (in hang and crash
    rows' ranges alike)."""
    exps = [
        {"id": i, "env": {}, "gpus": None, "verdict": verdict, "stalled": None, "error": error,
         "elapsed_s": 1.0}
        for i in ("p2p-off", "shm-off", "cumem-off", "proto-simple")
    ]  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": verdict, "causes": [],
            "error": error, "stalled": {"phase": "allreduce", "ranks": [0, 1]},
            "experiments": exps, "decided_by": None, "backend": "nccl",
            "facts": {"nccl": "2.18.3"}}  # fmt: skip


def cited(verdict: dict[str, Any]) -> Any:
    plan = decide(a100_host("2.1.0+cu121"), verdict)
    issue = (plan.extra.get("decision") or {}).get("nccl_issue") or {}
    return next(i for i in KB.nccl_issues if i.id == issue.get("id"))


@pytest.mark.parametrize(
    ("verdict", "error", "kind"),
    [("hung", None, "hang"), ("failed", "SIGSEGV", "error"), ("failed", TIMEOUT, "hang")],
)
def test_the_cited_issue_hangs_or_fails_as_the_run_did(
    verdict: str, error: str | None, kind: str
) -> None:
    assert cited(none_decided(verdict, error)).kind in (kind, None)


def test_rows_say_hang_or_error_only_where_the_notes_do() -> None:
    kinds = {i.id: i.kind for i in KB.nccl_issues}
    assert kinds["proxy-service-stray-connection-hang"] == "hang"
    assert kinds["numa-id-minus-one-crash"] == "error"
    # "allocations fail": what the job then does, the note does not say
    assert kinds["cumem-host-numa-init-failure"] is None
    assert "hang" in next(i.symptom for i in KB.nccl_issues if i.kind == "hang")
