"""roles/probe makes a `failed` verdict when the probe program printed none (a traceback, a
full disk, a Python that cannot run it): "the probe printed no verdict (rc N): <its last stderr
line>". That is the program's own failure and says nothing about the GPUs, but the engine read
it as a failed collective and planned ACS off and iommu=pt on the recorded bionic host (review,
2026-12-06). Now the plan is made as with no verdict, with a warning that names the error. The
role's other stand-in, a probe it killed past its deadline, still reads as a hang."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
ERROR = "gpufix_probe: no directory for the run's files, each needs 16 MiB free: /tmp (8 KiB free)"


def _facts() -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]
    return facts


def _stand_in(error: str) -> dict[str, Any]:
    """As roles/probe/tasks/run.yml writes it."""
    return {"format": "gpufix-probe", "version": 1, "host": "host01", "verdict": "failed",
            "backend": "nccl", "world_size": 2, "deadline_s": 300, "duration_s": 0,
            "stalled": None, "error": error, "phases": [], "single_gpu": None,
            "p2p": {"matrix": {}, "copy_gbps": {}}, "no_p2p_rerun": None, "allreduce": [],
            "causes": [], "nccl_log_tail": [],
            "notes": ["verdict made by roles/probe: the program printed none"]}  # fmt: skip


def test_a_probe_that_printed_nothing_is_no_evidence() -> None:
    plan = decide(_facts(), _stand_in(f"the probe printed no verdict (rc 3): {ERROR}"))
    assert plan.strategy == "none" and not plan.steps
    without = decide(_facts(), None)
    assert plan.path == without.path
    found = {f.id: f for f in plan.findings}
    assert "probe-failed" not in found
    assert found["probe-printed-none"].severity == "warning"
    assert ERROR in found["probe-printed-none"].message


def test_a_probe_the_role_killed_still_reads_as_a_hang() -> None:
    killed = "the probe program itself hung: killed by the hard timeout after 330 s"
    plan = decide(_facts(), _stand_in(killed))
    assert plan.strategy != "none"
    assert "probe-printed-none" not in {f.id for f in plan.findings}


def _import_stall(by: str | None) -> dict[str, Any]:
    v = _stand_in("x")
    stalled = {"phase": "import_torch", "ranks": [0, 1], **({"by": by} if by else {})}
    v.update(verdict="hung", stalled=stalled, notes=[], error="ranks [0, 1] made no progress")
    return v


def test_a_probe_its_own_deadline_cut_short_is_no_evidence() -> None:
    """The run's --deadline ran out while torch was importing: the plan asks for a probe with a
    longer deadline instead of blaming the Python environment (probe review, 2026-12-06)."""
    plan = decide(_facts(), _import_stall("probe deadline"))
    assert plan.path == decide(_facts(), None).path
    assert "probe-cut-short" in {f.id for f in plan.findings}
    slow = decide(_facts(), _import_stall(None))  # the import's own deadline: evidence
    assert "probe-cut-short" not in {f.id for f in slow.findings}
    assert slow.extra["decision"]["row"] == "import-stall"


def test_gpufix_probes_own_stand_in_is_no_evidence_either() -> None:
    """`gpufix probe` / `plan --probe` make their own stand-in when the program printed nothing
    (gpufix.probe.remote); it was read as a failed collective (re-read review, 2026-12-06)."""
    from gpufix.probe.remote import _parse

    for made in (
        _parse("host01", "Traceback (most recent call last): ...", "non-zero return code"),
        _parse("host01", "", "unreachable: ssh: connect to host host01 port 22: timed out"),
    ):
        plan = decide(_facts(), made)
        assert plan.path == decide(_facts(), None).path
        assert "probe-printed-none" in {f.id for f in plan.findings}
