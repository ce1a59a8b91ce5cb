"""GPF010 leaves NCCL_IB_DISABLE where the same code restricts NCCL's sockets to loopback: every
rank then runs on this host, and NCCL's network transport (IB/RoCE) carries traffic between
hosts, not within one while P2P or SHM is on. Reduced from TryDotAtwo/MultiGPUBeamSearch's
two-GPU smoke functions (fifteenth precision set, judged FP)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ib_inert_case import findings, gpf010

IB = '    os.environ.setdefault("NCCL_IB_DISABLE", "1")'


def test_loopback_sockets_make_ib_disable_inert(tmp_path: Path) -> None:
    body = f'{IB}\n    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")'
    assert gpf010(tmp_path, body) == []


def test_exact_and_numbered_loopback_count(tmp_path: Path) -> None:
    body = f'{IB}\n    os.environ["NCCL_SOCKET_IFNAME"] = "=lo"'
    assert gpf010(tmp_path, body) == []
    body = f'{IB}\n    os.environ["NCCL_SOCKET_IFNAME"] = "lo0"'
    assert gpf010(tmp_path, body) == []


def test_without_loopback_ib_disable_is_reported(tmp_path: Path) -> None:
    assert gpf010(tmp_path, IB) == ["7:NCCL_IB_DISABLE"]


def test_excluding_loopback_is_not_one_host(tmp_path: Path) -> None:
    body = f'{IB}\n    os.environ["NCCL_SOCKET_IFNAME"] = "^lo,docker"'
    assert gpf010(tmp_path, body) == ["7:NCCL_IB_DISABLE"]


def test_loopback_and_another_interface_is_not_one_host(tmp_path: Path) -> None:
    body = f'{IB}\n    os.environ["NCCL_SOCKET_IFNAME"] = "lo,eth0"'
    assert gpf010(tmp_path, body) == ["7:NCCL_IB_DISABLE"]


def test_loopback_in_another_function_does_not_count(tmp_path: Path) -> None:
    other = '    os.environ["NCCL_SOCKET_IFNAME"] = "lo"'
    assert gpf010(tmp_path, IB, other) == ["7:NCCL_IB_DISABLE"]


def test_with_p2p_and_shm_off_local_traffic_takes_the_network(tmp_path: Path) -> None:
    body = "\n".join(
        [
            IB,
            '    os.environ["NCCL_SOCKET_IFNAME"] = "lo"',
            '    os.environ["NCCL_P2P_DISABLE"] = "1"',
            '    os.environ["NCCL_SHM_DISABLE"] = "1"',
        ]
    )
    found = gpf010(tmp_path, body)
    assert "7:NCCL_IB_DISABLE" in found


def test_other_transport_knobs_are_still_reported_on_one_host(tmp_path: Path) -> None:
    body = '    os.environ["NCCL_SHM_DISABLE"] = "1"\n    os.environ["NCCL_SOCKET_IFNAME"] = "lo"'
    assert gpf010(tmp_path, body) == ["7:NCCL_SHM_DISABLE"]


# A second review's shapes: the loopback write must be the file's only interface setting,
# outside any `if`; a loopback default does not cover a forced IB setting; P2P and SHM off
# anywhere in the file send local traffic through the network transport.
@pytest.mark.parametrize(
    ("body", "other"),
    [
        (f'{IB}\n    if nodes == 1:\n        os.environ["NCCL_SOCKET_IFNAME"] = "lo"', "    pass"),
        (
            f'{IB}\n    os.environ["NCCL_SOCKET_IFNAME"] = "lo"\n'
            '    if nodes > 1:\n        os.environ["NCCL_SOCKET_IFNAME"] = "eth0"',
            "    pass",
        ),
        (
            '    os.environ["NCCL_IB_DISABLE"] = "1"\n'
            '    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")',
            "    pass",
        ),
        (
            f'{IB}\n    os.environ["NCCL_SOCKET_IFNAME"] = "lo"',
            '    os.environ["NCCL_P2P_DISABLE"] = "1"\n    os.environ["NCCL_SHM_DISABLE"] = "1"',
        ),
    ],
    ids=["under an if", "set again in that code", "a default beside a forced IB", "P2P+SHM off"],
)
def test_a_loopback_that_may_not_hold_keeps_ib_disable(
    tmp_path: Path, body: str, other: str
) -> None:
    found = findings(tmp_path, body, other)
    assert any(f.rule == "GPF010" and "NCCL_IB_DISABLE" in f.message for f in found)
