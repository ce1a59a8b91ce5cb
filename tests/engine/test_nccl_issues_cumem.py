"""The NCCL fixed hang that NCCL_CUMEM_ENABLE=0 works around (nccl_issues.yaml
cumem-a2a-connect-deadlock): a host whose torch wheel bundles an affected NCCL, where the probe's
cumem-off experiment turned the run healthy, moves its stack up to a torch whose NCCL has the fix,
with cuMem off as the interim; outside the range, cuMem off is the profile.

torch -> bundled NCCL from torch_nccl.yaml: 2.0.0 -> 2.14.3 (no cuMem), 2.2.0 -> 2.19.3 (cuMem on
by default), 2.3.0 -> 2.20.5 (fixed). The host is the recorded jammy 4x P100 with A100 SXM GPUs
(torch builds for CUDA 12.1 have Pascal kernels; the A100 keeps the case about NCCL only).
"""

from __future__ import annotations

from functools import partial

import pytest
from a100_cumem import a100_host, cumem_off_decided
from gpufix import versions
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
ISSUE = "cumem-a2a-connect-deadlock"


def row(plan: Plan) -> str | None:
    return (plan.extra.get("decision") or {}).get("row")


def test_the_row_cites_the_fix_and_cumem_s_first_release() -> None:
    issue = next(i for i in KB.nccl_issues if i.id == ISSUE)
    assert issue.shows == ("experiment:cumem-off",)
    assert issue.matches("2.18.1") and issue.matches("2.19.3") and issue.matches("2.20.2")
    assert issue.matches("2.18.0") is False and issue.matches(issue.fixed_in) is False
    assert "v2.20.3-1" in issue.source and "nccl/issues/1116" in issue.source
    assert "rel_2-18-1" in issue.source  # cuMem support arrived in 2.18.1


def test_affected_nccl_moves_the_stack_up_with_cumem_off_now() -> None:
    plan = decide(a100_host("2.2.0+cu121"), cumem_off_decided())
    assert row(plan) == "cumem-off-known-nccl-issue"
    assert plan.extra["decision"]["nccl_issue"]["id"] == ISSUE
    assert plan.strategy == "cuda-downgrade" and plan.extra["stack_direction"] == "up"
    target = plan.steps[0].vars["gpufix_ml_stack_torch_version"]
    bundled = KB.torch_nccl_version(target)
    assert bundled is not None and versions.parse(bundled.nccl) >= versions.parse("2.20.3")
    assert plan.interim is not None and plan.interim.strategy == "nccl-profile"
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["cumem-off"]


@pytest.mark.parametrize("torch", ["2.3.0+cu121", "2.0.0+cu117"])
def test_outside_the_range_cumem_off_is_the_profile(torch: str) -> None:
    """2.20.5 has the fix; 2.14.3 has no cuMem at all: no release moves, cuMem off stays."""
    plan = decide(a100_host(torch), cumem_off_decided())
    assert row(plan) == "cumem-off" and plan.strategy == "nccl-profile"
    assert plan.steps[0].vars["gpufix_nccl_profile_names"] == ["cumem-off"]


def test_no_image_that_moves_torch_back_down_is_offered() -> None:
    """The stack moves up past the affected NCCL; the pinned-image fallback offered
    nvcr.io/nvidia/pytorch:23.10-py3 (torch 2.1.0a0, older than the host's 2.2.0, built on the
    affected NCCL 2.19.3) and planned it with --image (expert review, 2026-12-06)."""
    from gpufix.engine.context import Constraints

    image = "nvcr.io/nvidia/pytorch:23.10-py3@sha256:" + "a" * 64
    c = Constraints(container_image=image)
    host = a100_host("2.2.0+cu121")
    drv = "535.183.06"  # R535: of the recorded images only 23.10 runs on it
    host["driver"].update(kernel_module=drv, userspace=drv)
    host["driver"]["userspace_sources"] = dict.fromkeys(host["driver"]["userspace_sources"], drv)
    plan = decide(host, cumem_off_decided(), c)
    option = {o.strategy: o for o in plan.options}["container-fallback"]
    assert not option.feasible and "moves torch up from 2.2.0" in option.reason
    plain = decide(host, None, c)  # no direction asked: the image fits
    assert {o.strategy: o for o in plain.options}["container-fallback"].feasible
