"""NCCL fixed hangs and start-up failures read from the release commits 2.12-2.28
(nccl_issues.yaml): the table loads, each row's fix lies outside its range, and the decision reads
the two kinds of evidence a nccl-version-affected row of evidence_fixes.yaml exists for.

- experiment:cumem-off, cumem-host-numa-init-failure (2.24.3 to before 2.26.3): torch 2.7.0 pins
  NCCL 2.26.2 (torch_nccl.yaml); a run that cuMem off made healthy moves up to an NCCL with the
  fix, with cuMem off as the interim; torch 2.8.0 (NCCL 2.27.3) keeps the cumem-off profile. The
  host is the recorded jammy 4x P100 host with A100 GPUs (as in test_nccl_issues_cumem.py).
- experiments:none-decided, hetero-arch-tuning-hang (before 2.24.3): its range lies inside
  multi-comm-connect-hang's (before 2.26.2, same evidence), and of the matching rows the decision
  takes the one fixed last, wherever it is listed; an environment whose nvidia-nccl wheel is
  2.23.4 keeps the later fix as the floor. The host is the recorded noble 4x RTX 5090 host with driver 580.95.05 (runs CUDA 13.0)
  and H100 GPUs.

The other keys the new rows show (experiment:proto-simple, experiment:nvls-off, experiment:shm-off,
signature:*, layer:bootstrap) have no nccl-version-affected row in evidence_fixes.yaml: the rows
are cited knowledge there, not a decision.
"""

from __future__ import annotations

import copy
import json
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from a100_cumem import a100_host, cumem_off_decided
from gpufix import versions
from gpufix.engine import decide as engine
from gpufix.engine import kb as kbmod
from gpufix.engine.kb import DEFAULT_DIR, load
from gpufix.engine.kb_evidence import EVIDENCE
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules
from gpufix.errors import GpufixError

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
NEW = {
    "h100-ring-ll128-hang": ("2.15.5", "cb111f76"),
    "hetero-arch-tuning-hang": ("2.24.3", "6aae3792"),
    "cumem-host-numa-init-failure": ("2.26.3", "0524aef7"),
    "nvls-init-error": ("2.27.3", "72d24320"),
    "bootstrap-stray-connection": ("2.27.3", "72d24320"),
}


def issue(id_: str) -> Any:
    return next(i for i in KB.nccl_issues if i.id == id_)


def row(plan: Plan) -> str | None:
    return (plan.extra.get("decision") or {}).get("row")


def bundled(plan: Plan) -> str:
    target = plan.steps[0].vars["gpufix_ml_stack_torch_version"]
    found = KB.torch_nccl_version(target)
    assert found is not None, target
    return found.nccl


# --- the table ----------------------------------------------------------------------------------


def test_the_knowledge_base_loads_with_the_new_rows() -> None:
    assert set(NEW) <= {i.id for i in KB.nccl_issues}


@pytest.mark.parametrize("id_", sorted(NEW))
def test_each_new_row_cites_its_release_commit_and_fix(id_: str) -> None:
    fixed_in, commit = NEW[id_]
    i = issue(id_)
    assert i.fixed_in == fixed_in
    assert f"releases/tag/v{fixed_in}-1" in i.source and f"release commit {commit}" in i.source
    assert all(EVIDENCE.fullmatch(k) for k in i.shows)


def test_a_fix_inside_its_own_range_stops_the_load(tmp_path: Path) -> None:
    """A row whose fixed_in is still affected would send a stack to a release with the bug."""
    d = tmp_path / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    rows = yaml.safe_load((d / "nccl_issues.yaml").read_text())
    next(r for r in rows if r["id"] == "nvls-init-error")["affected"] = ">=2.17.1,<=2.27.3"
    (d / "nccl_issues.yaml").write_text(yaml.safe_dump(rows, sort_keys=False))
    with pytest.raises(GpufixError, match=r"nvls-init-error\): fixed_in 2\.27\.3 lies inside"):
        kbmod.load(d)


def test_the_ranges_start_where_the_notes_say() -> None:
    host_alloc = issue("cumem-host-numa-init-failure")  # cuMem host allocations from 2.24
    assert host_alloc.matches("2.24.3") and host_alloc.matches("2.26.2")
    assert host_alloc.matches("2.23.4") is False
    nvls = issue("nvls-init-error")  # NVLS from 2.17.1
    assert nvls.matches("2.17.1") and nvls.matches("2.27.2") and nvls.matches("2.16.5") is False
    assert issue("h100-ring-ll128-hang").archs == ("Hopper",)


# --- experiments:none-decided -------------------------------------------------------------------


def noble(torch: str, nccl: str | None = None) -> dict[str, Any]:
    f = copy.deepcopy(json.loads((HOSTS / "noble-4x5090.json").read_text())["facts"])
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["driver"]["userspace_sources"] = dict.fromkeys(f["driver"]["userspace_sources"], "580.95.05")
    for g in f["gpus"]:
        g.update(name="NVIDIA H100 80GB HBM3", compute_capability="9.0")
    f["p2p"]["read"] = {a: dict.fromkeys(r, "OK") for a, r in f["p2p"]["read"].items()}
    for bridge in f["pcie"]["bridges"]:  # ACS off: the case is about NCCL only
        bridge["acs_enabled"] = False
    f["python_envs"][0]["packages"]["torch"] = torch
    if nccl is not None:
        f["python_envs"][0]["packages"]["nvidia-nccl-cu12"] = nccl
    f["network"]["infiniband"] = []
    return f


def none_decided() -> dict[str, Any]:
    exps = [
        {"id": i, "env": {}, "gpus": None, "verdict": "hung", "stalled": None, "error": None,
         "elapsed_s": 1.0}
        for i in ("proto-simple", "algo-ring", "p2p-off", "shm-off", "cumem-off", "nvls-off")
    ]  # fmt: skip
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
            "stalled": {"phase": "allreduce", "ranks": [0, 1]}, "experiments": exps,
            "decided_by": None}  # fmt: skip


@pytest.mark.parametrize("first", [False, True], ids=["as-shipped", "listed-first"])
def test_the_earlier_heterogeneous_fix_does_not_lower_the_floor(
    first: bool, tmp_path: Path
) -> None:
    """Of the rows that match, the one fixed last sets the floor, wherever it is listed (listed
    first, the 2.24.3 row took the place of the 2.26.2 one before)."""
    assert issue("hetero-arch-tuning-hang").matches("2.23.4")
    kb = KB
    if first:
        d = tmp_path / "knowledge"
        shutil.copytree(DEFAULT_DIR, d)
        rows = yaml.safe_load((d / "nccl_issues.yaml").read_text())
        rows.sort(key=lambda r: r["id"] != "hetero-arch-tuning-hang")
        (d / "nccl_issues.yaml").write_text(yaml.safe_dump(rows, sort_keys=False))
        kb = kbmod.load(d)
    plan = decide(noble("2.5.1+cu124", "2.23.4"), none_decided(), kb=kb)
    assert row(plan) == "experiments-none-decided-nccl-issue"
    assert plan.extra["decision"]["nccl_issue"]["id"] == "multi-comm-connect-hang"
    assert plan.strategy == "cuda-downgrade" and plan.extra["stack_direction"] == "up"
    assert versions.key(bundled(plan)) >= versions.key("2.26.2")


# --- experiment:cumem-off -----------------------------------------------------------------------


def test_cumem_host_failure_moves_torch_27_up_with_cumem_off_now() -> None:
    """Fails without the cumem-host-numa-init-failure row: NCCL 2.26.2 is in no cuMem range, the
    plan is the cumem-off profile."""
    plan = decide(a100_host("2.7.0+cu126"), cumem_off_decided())
    assert row(plan) == "cumem-off-known-nccl-issue"
    assert plan.extra["decision"]["nccl_issue"]["id"] == "cumem-host-numa-init-failure"
    assert plan.strategy == "cuda-downgrade" and plan.extra["stack_direction"] == "up"
    assert versions.key(bundled(plan)) >= versions.key("2.26.3")
    assert plan.interim is not None and plan.interim.strategy == "nccl-profile"
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["cumem-off"]


def test_the_fixed_nccl_keeps_the_cumem_off_profile() -> None:
    plan = decide(a100_host("2.8.0+cu128"), cumem_off_decided())  # NCCL 2.27.3
    assert row(plan) == "cumem-off" and plan.strategy == "nccl-profile"
