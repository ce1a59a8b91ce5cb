"""nccl_issues.yaml `kind`: a release note that describes a hang does not explain a crash, nor
the reverse. From the dev case nccl#2186 (an init SIGSEGV on GB200), which a hang row's NCCL
range alone used to explain. A run that PyTorch's watchdog ended on a collective timeout hung."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from a100_cumem import a100_host
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.engine.signals import PROBE_KILLED, read

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


# Only the rows that say hang or error: an unsaid row, which any run may cite, cannot hide a
# wrong match here.
KINDED = replace(KB, nccl_issues=tuple(i for i in KB.nccl_issues if i.kind))


def cited(verdict: dict[str, Any], kb: Any = KB) -> Any:
    plan = engine.decide(a100_host("2.1.0+cu121"), verdict, kb=kb, rules=load_rules())
    issue = (plan.extra.get("decision") or {}).get("nccl_issue") or {}
    return next(i for i in kb.nccl_issues if i.id == issue.get("id"))


@pytest.mark.parametrize(
    ("verdict", "error", "kind"),
    [("hung", None, "hang"), ("failed", "SIGSEGV", "error"), ("failed", TIMEOUT, "hang")],
)
def test_the_cited_issue_hangs_or_fails_as_the_run_did(
    verdict: str, error: str | None, kind: str
) -> None:
    assert cited(none_decided(verdict, error)).kind in (kind, None)
    assert cited(none_decided(verdict, error), KINDED).kind == kind


WORDS = {
    "hang": re.compile(r"\bhangs?\b|\bdeadlock", re.I),
    "error": re.compile(r"crash|fail|error", re.I),
}


@pytest.mark.parametrize("issue", KB.nccl_issues, ids=lambda i: i.id)
def test_a_row_says_hang_or_error_only_where_its_quoted_note_does(issue: Any) -> None:
    quoted = " ".join(re.findall(r'"([^"]*)"', issue.source))
    if issue.kind is not None:
        assert WORDS[issue.kind].search(quoted), (issue.id, quoted)


def test_rows_left_unsaid_where_the_note_does_not_say_what_the_job_does() -> None:
    kinds = {i.id: i.kind for i in KB.nccl_issues}
    assert kinds["proxy-service-stray-connection-hang"] == "hang"
    assert kinds["numa-id-minus-one-crash"] == "error"
    # "allocations fail", "bootstrap issue", a race beside a hang: the job's behaviour unsaid
    for unsaid in (
        "cumem-host-numa-init-failure",
        "bootstrap-connection-reorder",
        "multi-comm-connect-hang",
    ):
        assert kinds[unsaid] is None, unsaid


def test_how_the_run_went_wrong() -> None:
    def kind(**v: Any) -> str | None:
        return read({"format": "gpufix-probe", "version": 1, **v}, KB).kind

    stalled = {"stalled": {"phase": "allreduce", "ranks": [0]}}
    assert kind(verdict="hung", **stalled) == "hang"
    assert kind(verdict="failed", error="SIGSEGV", **stalled) == "error"
    assert kind(verdict="failed", error=TIMEOUT, **stalled) == "hang"
    # an experiment that timed out says nothing of the main run
    exp = {"id": "p2p-off", "verdict": "failed", "error": TIMEOUT}
    assert (
        kind(verdict="failed", error="unhandled system error", experiments=[exp], **stalled)
        == "error"
    )
    assert kind(verdict="failed") is None  # no phase: a host that gave no verdict
    assert kind(verdict="healthy", soak={"verdict": "failed"}) == "error"
    assert kind(verdict="healthy", soak={"verdict": "hung"}) == "hang"
    assert kind(verdict="degraded", **stalled) is None
    # a merged multi-node error: one host crashed, the other timed out waiting for it
    merged = "h1: Fatal Python error: Segmentation fault\nh2: " + TIMEOUT
    assert kind(verdict="failed", error=merged, **stalled) == "error"
    # torchrun's log of a plain hang: the watchdog aborts the process (SIGABRT) after timing out
    aborted = TIMEOUT + "\nexitcode  : -6\ntraceback : Signal 6 (SIGABRT) received by PID 1235"
    assert kind(verdict="failed", error=aborted, **stalled) == "hang"
    killed = "the probe program itself hung: killed by the hard timeout after 300 s"
    assert kind(verdict="failed", error=killed, stalled=None) == "hang"


def test_the_roles_killed_probe_message_is_the_one_read() -> None:
    run_yml = Path(__file__).parents[2] / "roles" / "probe" / "tasks" / "run.yml"
    assert PROBE_KILLED in run_yml.read_text()
