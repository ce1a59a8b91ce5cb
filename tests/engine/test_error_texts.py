"""Error texts from CUDA and NCCL. "peer access is not supported between these two devices"
(cudaErrorPeerAccessUnsupported, 217), as NCCL prints it: P2P off, with the ACS/IOMMU facts and
the experiments asked for. "Bootstrap : no socket interface found": an interface NCCL may use."""

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
TEXTS = (
    "transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these "
    "two devices'",
    "torch.distributed.DistBackendError: NCCL error: unhandled cuda error, NCCL version 2.18.6 "
    "Last error: Cuda failure 'peer access is not supported between these two devices'",
)


def failed(error: str) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "failed", "causes": [],
            "failed_in": {"phase": "allreduce", "ranks": [0]}, "error": error}  # fmt: skip


@pytest.mark.parametrize("error", TEXTS)
def test_peer_access_refused_turns_p2p_off_and_asks_for_the_pcie_facts(error: str) -> None:
    facts = a100_host("2.8.0+cu128")
    facts["pcie"]["bridges"] = {"unknown": "lspci without root"}
    plan = decide(facts, failed(error))
    assert plan.extra["decision"]["row"] == "text-peer-access"
    assert plan.strategy == "nccl-profile"
    assert plan.steps[0].vars["gpufix_nccl_profile_names"] == ["no-p2p"]
    assert {"acs", "experiments"} <= {n["id"] for n in plan.extra["needs"]}


def test_with_acs_redirect_above_the_gpus_the_pcie_settings_are_the_fix() -> None:
    facts = a100_host("2.8.0+cu128")
    facts["pcie"]["bridges"] = [
        {"bdf": "0000:03:00.0", "above_gpu": True, "acs_enabled": True, "port": "downstream"}
    ]
    plan = decide(facts, failed(TEXTS[0]))
    assert plan.extra["decision"]["row"] == "text-peer-access-acs-iommu"
    assert plan.strategy == "pcie-acs"


def test_other_cuda_failures_are_not_peer_access() -> None:
    plan = decide(a100_host("2.8.0+cu128"), failed("NCCL WARN Cuda failure 2170 'x'"))
    assert (plan.extra.get("decision") or {}).get("row") != "text-peer-access"


def test_no_interface_found_asks_for_an_interface_the_host_has() -> None:
    """NCCL's own message when NCCL_SOCKET_IFNAME matches nothing (src/bootstrap.cc); it is also
    an "invalid usage" error, which names no layer."""
    plan = decide(
        a100_host("2.8.0+cu128"), failed("NCCL WARN Bootstrap : no socket interface found")
    )
    assert plan.extra["decision"]["row"] == "text-no-socket-interface"
    assert plan.strategy == "nccl-profile"


INFO_LINES = (
    "node1:1234:1300 [0] NCCL INFO NET/IB : No device found.\n"
    "node1:1234:1300 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
)


def test_nccls_info_lines_name_no_failure() -> None:
    """NCCL_DEBUG=INFO lines print on healthy runs too ("NET/IB : No device found" on a host
    without IB): only WARN lines and the exception are failure text."""
    from gpufix.engine.signals import read

    base = "torch.distributed.DistBackendError: NCCL error: unhandled system error"
    assert "ib-error" not in read(failed(INFO_LINES + base), KB).signatures
    warn = "node1:1234:1300 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got completion error"
    assert "ib-error" in read(failed(f"{INFO_LINES}{warn}\n{base}"), KB).signatures
    tail = {**failed(base), "nccl_log_tail": [*INFO_LINES.splitlines(), "NCCL INFO x failed"]}
    assert "ib-error" not in read(tail, KB).signatures


def test_nvls_bind_failure_as_nccl_words_it_is_the_nvls_signature() -> None:
    """transport/nvls.cc's WARN, as torch re-raises it without the file name."""
    from gpufix.engine.signals import read

    text = (
        "torch.distributed.DistBackendError: NCCL error: unhandled cuda error, NCCL version 2.21.5\n"
        "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 "
        "'the operation cannot be performed in the present state'."
    )
    assert "nvls-failure" in read(failed(text), KB).signatures
