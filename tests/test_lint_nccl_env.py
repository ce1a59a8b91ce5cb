"""gpufix.nccl_env: the one table of NCCL/CUDA environment knobs, in step with the knowledge base."""

from __future__ import annotations

import pytest
from gpufix import nccl_env
from gpufix.engine import kb


def test_every_knob_has_a_source_and_a_kind() -> None:
    for knob in nccl_env.KNOBS:
        assert knob.source.startswith("https://"), knob.name
        assert knob.kind in ("debug", "p2p-off", "transport", "cuda-init"), knob.name
    assert nccl_env.P2P_DISABLE_VAR in nccl_env.KNOBS_BY_NAME
    assert set(nccl_env.CUDA_INIT_VARS) == {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}


def test_nccl_debug_knobs_match_the_knowledge_base_debug_profile() -> None:
    """diagnose reads the KB's debug profile; lint and preflight read nccl_env: the same NCCL names."""
    ours = {k for k in nccl_env.DEBUG_KNOBS if k.startswith("NCCL_")}
    assert ours == set(kb.load().nccl_debug_knobs())


@pytest.mark.parametrize(
    ("name", "value", "debug", "workaround"),
    [
        ("NCCL_DEBUG", "info", True, False),
        ("NCCL_DEBUG", "WARN", False, False),
        ("NCCL_DEBUG_SUBSYS", "INIT,P2P", True, False),
        ("NCCL_DEBUG_FILE", "", False, False),
        ("TORCH_DISTRIBUTED_DEBUG", "DETAIL", True, False),
        ("TORCH_DISTRIBUTED_DEBUG", "INFO", False, False),
        ("CUDA_LAUNCH_BLOCKING", "1", True, False),
        ("CUDA_LAUNCH_BLOCKING", "0", False, False),
        ("NCCL_P2P_DISABLE", "1", False, True),
        ("NCCL_P2P_DISABLE", "0", False, False),
        ("NCCL_P2P_LEVEL", "PXB", False, True),
        ("NCCL_SHM_DISABLE", "1", False, True),
        ("NCCL_IB_DISABLE", "0", False, False),
        ("NCCL_SOCKET_IFNAME", "eth0", False, False),
    ],
)
def test_what_counts(name: str, value: str, debug: bool, workaround: bool) -> None:
    assert nccl_env.is_debug_setting(name, value) is debug
    assert nccl_env.is_transport_workaround(name, value) is workaround
