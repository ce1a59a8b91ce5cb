"""The probe's own readings (its verdict's `facts`: torch and NCCL in the training interpreter,
the kernel module's driver line, the kernel) reach the decision: the NCCL the job really loaded
decides whether a documented NCCL hang applies, and a value that does not read as a version is
ignored (the verdict is a file: data, never trusted text)."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from a100_cumem import a100_host, cumem_off_decided
from corpus.verdict import verdict_for
from gpufix import versions
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.plan import Plan
from gpufix.engine.probe_facts import measured, with_probe_facts
from gpufix.engine.rules import load as load_rules
from gpufix.facts.host import from_facts

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
NVRM = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
NVRM_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Jul  8 18:13:34 UTC 2025"
)


def with_facts(verdict: dict[str, Any], **facts: Any) -> dict[str, Any]:
    return {**verdict, "backend": "nccl", "facts": facts}


def test_readings_that_are_versions_are_taken() -> None:
    v = {"backend": "nccl", "facts": {"torch": "2.1.0a0+32f93b1", "nccl": "2.19.3", "python": "3.10.12",
                   "driver": NVRM, "kernel": "5.4.0-150-generic"}}  # fmt: skip
    assert measured(v) == {
        "torch": "2.1.0a0+32f93b1",
        "nccl": "2.19.3",
        "python": "3.10.12",
        "driver": "535.104.05",
        "kernel": "5.4.0-150-generic",
    }
    assert measured({"backend": "nccl", "facts": {"driver": NVRM_OPEN}})["driver"] == "570.172.08"


@pytest.mark.parametrize(
    ("nccl", "driver"),
    [("2.18.6+cuda12.1", "535.104.05"), ("2.18.6-1", "535.104"), ("2.18.6", NVRM)],
)
def test_build_suffixes_and_bare_driver_versions_are_read(nccl: str, driver: str) -> None:
    got = measured({"backend": "nccl", "facts": {"nccl": nccl, "driver": driver}})
    assert got["nccl"] == "2.18.6" and got["driver"].startswith("535.104")


@pytest.mark.parametrize(
    "nccl",
    [
        "NCCL version 2.18.6+cuda12.1",  # NCCL's own INFO line
        "nccl 2.18.6",
        "(2, 18, 6)",  # torch.cuda.nccl.version() printed
        "(2, 18, 6, '')",
        [2, 18, 6],  # the same tuple as JSON writes it
        21806,  # NCCL_VERSION_CODE from 2.9 on
        "gpu01:1234:1234 [0] NCCL INFO NCCL version 2.18.6+cuda12.1",  # the whole log line
    ],
)
def test_an_nccl_version_written_by_hand_is_read(nccl: object) -> None:
    """An outside review (2026-12-07) wrote verdicts by hand as docs/probe.md describes
    `facts.nccl` (`torch.cuda.nccl.version()`): the tuple, as text or a list, was ignored and the
    plan lost the NCCL's documented issues. Every form names one version, so each is read."""
    assert measured({"backend": "nccl", "facts": {"nccl": nccl}})["nccl"] == "2.18.6"


@pytest.mark.parametrize(("code", "want"), [(2708, "2.7.8"), (21903, "2.19.3"), (3003, None)])
def test_version_codes_decode_as_nccl_h_defines_them(code: int, want: str | None) -> None:
    """NCCL_VERSION(X,Y,Z): X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9 (src/nccl.h.in);
    3003 (torch before 1.10 packing NCCL 2.10.3) names no NCCL 2 and is no reading."""
    assert measured({"backend": "nccl", "facts": {"nccl": code}}).get("nccl") == want


@pytest.mark.parametrize(
    "nccl", [[2, -1, 3], [2, 10**20, 1], [True, 18, 6], [2.0, 18, 6], [3, 0, 1], "(2, 18)", -21806]
)
def test_a_list_or_code_that_names_no_nccl_2_version_is_no_reading(nccl: object) -> None:
    """The review of the change (2026-12-07): [2, -1, 3] read as "2.-1.3" and raised a known
    issue. NCCL_VERSION packs minor and patch in two digits each; only major version 2 exists."""
    assert "nccl" not in measured({"backend": "nccl", "facts": {"nccl": nccl}})


def test_a_run_off_the_gpus_says_nothing_about_their_stack() -> None:
    """--cpu / gloo: the GPU stack was not used, and the torch may be a CPU build."""
    for backend in ("gloo", None):
        assert (
            measured({"backend": backend, "facts": {"torch": "2.13.0+cpu", "kernel": "6.1.0"}})
            == {}
        )


@pytest.mark.parametrize(
    "value",
    [
        "2.18.6; rm -rf /",
        "{{ lookup('pipe', 'id') }}",
        "$(id)",
        "2.18.6\n2.19.3",
        "2" * 500,
        18,
        None,
        ["2.18.6"],
        {"unknown": "not read"},
    ],
)
def test_anything_else_is_ignored(value: object) -> None:
    v = {
        "backend": "nccl",
        "facts": {"torch": value, "nccl": value, "driver": value, "kernel": value},
    }
    assert measured(v) == {}
    host = from_facts(a100_host("2.2.0+cu121"))
    assert with_probe_facts(host, v) == host


def test_a_verdict_without_readings_changes_nothing() -> None:
    host = from_facts(a100_host("2.2.0+cu121"))
    for v in (None, {}, {"facts": []}, {"facts": {}}):
        assert with_probe_facts(host, v) is host


def test_the_probe_s_torch_wins_and_the_driver_only_fills_a_gap() -> None:
    facts = a100_host("2.0.0+cu117")
    host = from_facts(facts)
    assert host.driver is not None
    v = {
        "backend": "nccl",
        "facts": {"torch": "2.2.0+cu121", "nccl": "2.19.3", "driver": NVRM_OPEN},
    }
    got = with_probe_facts(host, v)
    assert got.env is not None and (got.env.torch, got.env.nccl) == ("2.2.0+cu121", "2.19.3")
    assert got.driver == host.driver  # the facts read the driver: kept
    assert got.probe_measured == ("torch", "nccl")


def test_measured_nccl_in_a_fixed_range_moves_the_stack_up() -> None:
    """torch 2.3.0 bundles NCCL 2.20.5 (fixed), so the facts alone say cuMem off is the profile;
    the probe measured 2.19.3 in the training interpreter (an nvidia-nccl wheel pinned back, say):
    the documented cuMem hang applies, and the stack moves up with cuMem off as the interim."""
    facts = a100_host("2.3.0+cu121")
    plain = decide(facts, cumem_off_decided())
    assert plain.strategy == "nccl-profile"
    plan = decide(facts, with_facts(cumem_off_decided(), nccl="2.19.3"))
    assert plan.extra["decision"]["row"] == "cumem-off-known-nccl-issue"
    assert plan.strategy == "cuda-downgrade" and plan.extra["stack_direction"] == "up"
    found = {f.id: f for f in plan.findings}
    assert "stack-from-probe" in found
    assert found["stack-from-probe"].evidence == {"probe.facts.nccl": "2.19.3"}


def test_through_the_cli(tmp_path: Path) -> None:
    """Schema-valid files, as `gpufix facts` and `gpufix probe` write them."""
    facts = tmp_path / "facts.json"
    doc = {"format": "gpufix-facts", "version": 1, "host": "h1",
           "gathered_at": "2026-12-01T00:00:00Z", "facts": a100_host("2.3.0+cu121")}  # fmt: skip
    facts.write_text(json.dumps(doc))
    case = {"id": "h1", "environment": {"nccl": "2.19.3"},
            "evidence": {"probe_verdict": "hung", "stalled_phase": "allreduce",
                         "experiments": {"p2p-off": "hung", "cumem-off": "healthy"}}}  # fmt: skip
    built, held = verdict_for(case, 4)
    assert not held and built["facts"] == {"nccl": "2.19.3"}
    verdict = tmp_path / "verdict.json"
    verdict.write_text(json.dumps(built))
    out = subprocess.run(
        [sys.executable, "-m", "gpufix", "plan", "h1", "--facts", str(facts),
         "--probe-verdict", str(verdict), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)["plans"][0]
    assert plan["strategy"] == "cuda-downgrade"
    assert any(f["id"] == "stack-from-probe" for f in plan["findings"])


def known(plan: Plan) -> set[str]:
    found = [f for f in plan.findings if f.id == "nccl-known-issue"]
    assert len(found) <= 1  # one finding, however many rows
    return set(found[0].evidence["issues"]) if found else set()


def test_a_known_nccl_problem_is_named_even_on_a_healthy_probe() -> None:
    """A start-up probe cannot see a hang that comes later (ll-cleanup-hang: long-running jobs);
    the plan still names it, and decides nothing from it."""
    healthy = {"format": "gpufix-probe", "version": 1, "verdict": "healthy", "causes": []}
    plan = decide(a100_host("2.3.0+cu121"), with_facts(healthy, nccl="2.4.2"))
    assert "ll-cleanup-hang" in known(plan)
    assert plan.strategy == "none"
    finding = next(f for f in plan.findings if f.id == "nccl-known-issue")
    assert finding.severity == "warning" and finding.evidence["nccl"] == "2.4.2"
    rows = {i.id: i for i in KB.nccl_issues}
    fixed = [rows[i].fixed_in for i in finding.evidence["issues"]]
    newest = max(fixed, key=versions.key)
    assert finding.evidence["fixed_by"] == newest and f"the last in {newest}" in finding.message
    assert any("--soak" in step and "ll-cleanup-hang" in step for step in plan.path)


def test_only_on_the_platform_the_release_names() -> None:
    """h100-ring-ll128-hang is a Hopper problem: an A100 host with the same NCCL has no finding
    for it; pxn-multinode-ib-hang needs a multi-node InfiniBand run."""
    plan = decide(a100_host("2.3.0+cu121"), with_facts(cumem_off_decided(), nccl="2.15.1"))
    assert "h100-ring-ll128-hang" not in known(plan) and known(plan)
    plan = decide(a100_host("2.3.0+cu121"), with_facts(cumem_off_decided(), nccl="2.29.7"))
    assert "pxn-multinode-ib-hang" not in known(plan)


def test_a_fixed_nccl_has_none() -> None:
    newest = max((i.fixed_in for i in KB.nccl_issues), key=versions.key)
    plan = decide(a100_host("2.3.0+cu121"), with_facts(cumem_off_decided(), nccl=newest))
    assert known(plan) == set()


def test_a_soak_already_run_is_not_asked_for_again() -> None:
    """The --soak hint is for a verdict without a soak: one that soaked (healthy) was the look."""
    healthy = {"format": "gpufix-probe", "version": 1, "verdict": "healthy", "causes": []}
    soak = {"sizes": [1024, 1 << 20], "iters": 20, "verdict": "healthy", "stalled_at_bytes": None}
    plan = decide(a100_host("2.3.0+cu121"), with_facts({**healthy, "soak": soak}, nccl="2.4.2"))
    assert "ll-cleanup-hang" in known(plan) and plan.strategy == "none"
    assert not any("--soak" in step for step in plan.path)


def test_an_nccl_reading_alone_is_not_an_environment_without_torch() -> None:
    """A verdict that names the NCCL but not torch, on facts whose environments were not read:
    "No torch found in the configured Python environments" was said of environments nobody read
    (outside review, 2026-12-07). An environment the facts read without torch still says it."""
    facts = a100_host("2.3.0+cu121")
    facts["python_envs"] = {"unknown": "not stated in the report"}
    plan = decide(facts, with_facts(cumem_off_decided(), nccl="2.19.3"))
    assert "no-torch" not in {f.id for f in plan.findings}
    env = {"python": "/usr/bin/python3", "version": "3.10.12", "packages": {"numpy": "1.26.4"}}
    facts["python_envs"] = [env]  # torch left out: not stated, not "not installed"
    assert "no-torch" not in {f.id for f in decide(facts).findings}
    env["packages"] = {"numpy": "1.26.4", "torch": {"unknown": "not stated"}}
    assert "no-torch" not in {f.id for f in decide(facts).findings}
    env["packages"] = {"numpy": "1.26.4", "torch": None}  # as the module writes it
    assert "no-torch" in {f.id for f in decide(facts).findings}
    other = {"python": "/opt/conda/bin/python", "version": "3.10.12",
             "packages": {"torch": {"unknown": "not stated"}}}  # fmt: skip
    facts["python_envs"] = [env, other]  # one env without torch says nothing of the other
    assert "no-torch" not in {f.id for f in decide(facts).findings}


def test_with_torch_unread_the_nccl_readings_say_which_way_the_stack_moves() -> None:
    """A review (2026-12-07) knew the job's NCCL (2.19.3) and not its torch: the move to a
    torch bundling a newer NCCL had `stack_direction` null. The NCCL the job loads against the
    one the chosen build bundles says "up"."""
    facts = a100_host("2.3.0+cu121")
    facts["python_envs"][0]["packages"]["torch"] = {"unknown": "not stated"}
    plan = decide(facts, with_facts(cumem_off_decided(), nccl="2.19.3"))
    assert plan.strategy == "cuda-downgrade"
    assert plan.extra["stack_direction"] == "up"
