"""An InfiniBand completion with a local protection error (IBV_WC_LOC_PROT_ERR, 4): the NIC could
not reach the memory registered for it, with GPU Direct RDMA the GPU's. NCCL's own hint for this
status (src/transport/net_ib/common.h printIbWcStatusHint): ACS breaking GPU Direct RDMA, confirmed
with NCCL_NET_GDR_LEVEL=0, fixed by disabling ACS."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from a100_cumem import a100_host
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.engine.signals import read

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
# The warning as NCCL 2.x before the status names (nccl#928) and as NCCL prints it today.
OLD = (
    "node3:77:88 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<33397> with error 4, "
    "opcode 32611, len 32611, vendor err 81 (Send)"
)
NEW = (
    "node3:77:88 [0] transport/net_ib/p2p.cc:688 NCCL WARN NET/IB: Got completion from peer "
    "10.0.0.2<33397> with status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_SEND(0) vendor_err=81"
)


def failed(error: str) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "failed", "causes": [],
            "failed_in": {"phase": "allreduce", "ranks": [0]}, "error": error}  # fmt: skip


@pytest.mark.parametrize("error", [OLD, NEW])
def test_both_wordings_are_the_signature(error: str) -> None:
    assert "ib-local-protection" in read(failed(error), KB).signatures


@pytest.mark.parametrize(
    "error",
    [
        OLD.replace("with error 4,", "with error 12,"),  # retry exceeded: another cause
        NEW.replace("IBV_WC_LOC_PROT_ERR(4)", "IBV_WC_RETRY_EXC_ERR(12)"),
    ],
)
def test_other_completion_errors_are_not(error: str) -> None:
    assert "ib-local-protection" not in read(failed(error), KB).signatures


def test_acs_unread_gdr_off_now_and_the_pcie_facts_asked_for() -> None:
    facts = a100_host("2.8.0+cu128")
    facts["pcie"]["bridges"] = {"unknown": "lspci without root"}
    plan = decide(facts, failed(OLD))
    assert plan.extra["decision"]["row"] == "text-ib-local-protection"
    assert plan.strategy == "nccl-profile"
    assert plan.steps[0].vars["gpufix_nccl_profile_names"] == ["gdr-off"]
    assert "acs" in {n["id"] for n in plan.extra["needs"]}  # the IOMMU mode is read here
    acs = next(o for o in plan.options if o.strategy == "pcie-acs")
    assert "not read" in acs.reason and "no ACS redirect" not in acs.reason  # unread is not absent


def test_acs_redirect_above_the_gpus_makes_the_pcie_settings_the_fix() -> None:
    facts = a100_host("2.8.0+cu128")
    facts["pcie"]["bridges"] = [
        {"bdf": "0000:03:00.0", "above_gpu": True, "acs_enabled": True, "port": "downstream"}
    ]
    plan = decide(facts, failed(NEW))
    assert plan.extra["decision"]["row"] == "text-ib-local-protection-acs-iommu"
    assert plan.strategy == "pcie-acs"
    assert plan.interim is not None
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["gdr-off"]


def _gdr_off_decided() -> dict[str, Any]:
    """A multi-node run that failed in the all-reduce and was healthy with GDR off."""
    exp = {"id": "gdr-off", "env": {"NCCL_NET_GDR_LEVEL": "LOC"}, "gpus": None,
           "verdict": "healthy", "stalled": None, "error": None, "elapsed_s": 9.0}  # fmt: skip
    return failed(OLD) | {
        "scope": "multi-node",
        "hosts": ["n1", "n2"],
        "failed_layer": "ib",
        "failed_hosts": ["n1", "n2"],
        "experiments": [exp],
        "decided_by": "gdr-off",
    }


def test_gdr_off_healthy_keeps_rdma_through_host_memory_and_asks_for_acs() -> None:
    facts = a100_host("2.8.0+cu128")
    facts["pcie"]["bridges"] = {"unknown": "lspci without root"}
    plan = decide(facts, _gdr_off_decided())
    assert plan.extra["decision"]["row"] == "gdr-off"
    assert plan.steps[0].vars["gpufix_nccl_profile_names"] == ["gdr-off"]
    assert "acs" in {n["id"] for n in plan.extra["needs"]}


def test_gdr_off_healthy_above_acs_redirect_makes_the_pcie_settings_the_fix() -> None:
    facts = a100_host("2.8.0+cu128")
    facts["pcie"]["bridges"] = [
        {"bdf": "0000:03:00.0", "above_gpu": True, "acs_enabled": True, "port": "downstream"}
    ]
    plan = decide(facts, _gdr_off_decided())
    assert plan.extra["decision"]["row"] == "gdr-off-acs-iommu"
    assert plan.strategy == "pcie-acs"
    assert plan.interim is not None
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["gdr-off"]
