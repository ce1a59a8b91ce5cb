"""GPF010 leaves NCCL_IB_DISABLE where the same code sets NCCL_NET to Socket: a communicator is
then given only the network that names (NCCL environment variables, NCCL_NET; case-insensitive,
strcasecmp in src/plugin/net.cc), so no traffic takes the IB transport and deleting the IB line
changes no transport. Reduced from STS1983/rocm-lora-trader train_qlora_v6.py:50-51 (nineteenth
precision set, judged FP). The NCCL_NET write must always run where the IB write runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths
from ib_inert_case import gpf010

IB = '    os.environ["NCCL_IB_DISABLE"] = "1"'
NET = '    os.environ["NCCL_NET"] = "Socket"'


def test_without_nccl_net_ib_disable_is_reported(tmp_path: Path) -> None:
    assert gpf010(tmp_path, IB) == ["7:NCCL_IB_DISABLE"]


@pytest.mark.parametrize(
    "body",
    [
        f"{IB}\n{NET}",
        f"{NET}\n{IB}",
        f'{IB}\n    os.environ["NCCL_NET"] = "socket"',
        f'{IB}\n    os.environ.update({{"NCCL_NET": "SOCKET"}})',
        f"{NET}\n    if world_size > 1:\n    {IB}",
        f"    if world_size > 1:\n    {NET}\n    {IB}",
        '    os.environ.setdefault("NCCL_IB_DISABLE", "1")\n'
        '    os.environ.setdefault("NCCL_NET", "Socket")',
    ],
    ids=["after", "before", "lower case", "update", "IB deeper", "same if", "two defaults"],
)
def test_socket_network_makes_ib_disable_inert(tmp_path: Path, body: str) -> None:
    assert gpf010(tmp_path, body) == []


def test_module_level_pair_as_in_rocm_lora_trader(tmp_path: Path) -> None:
    src = "import os\n\nimport torch.distributed as dist\n\n"
    src += 'os.environ["NCCL_IB_DISABLE"] = "1"\nos.environ["NCCL_NET"] = "Socket"\n'
    src += 'dist.init_process_group("nccl")\n'
    (tmp_path / "train.py").write_text(src)
    assert [f for f in lint_paths([str(tmp_path)]).findings if f.rule == "GPF010"] == []


@pytest.mark.parametrize(
    ("body", "other"),
    [
        (f"{IB}\n    if world_size > 1:\n    {NET}", "    pass"),
        (f"    if args.a:\n    {IB}\n    if args.b:\n    {NET}", "    pass"),
        (f"    if world_size > 1:\n    {NET}\n    else:\n    {IB}", "    pass"),
        (f"{IB}\n    for _ in range(world_size):\n    {NET}", "    pass"),
        (f"{IB}\n    try:\n        pass\n    except OSError:\n    {NET}", "    pass"),
        (IB, NET),
        (f'{IB}\n    os.environ["NCCL_NET"] = "IB"', "    pass"),
        (f'{IB}\n    os.environ["NCCL_NET"] = args.net', "    pass"),
        (f'{IB}\n    os.environ["NCCL_NET"] = "AWS Libfabric"', "    pass"),
        (f"{IB}\n{NET}", '    os.environ["NCCL_NET"] = "IB"'),
        (f"{IB}\n{NET}", '    os.environ.pop("NCCL_NET", None)'),
        (f"{IB}\n{NET}", '    del os.environ["NCCL_NET"]'),
        (f'{IB}\n    os.environ.setdefault("NCCL_NET", "Socket")', "    pass"),
    ],
    ids=[
        "under an if the IB write is not under",
        "under another if",
        "if and else",
        "in a loop",
        "in an except",
        "in another function",
        "IB named",
        "from an argument",
        "an external plugin",
        "IB named elsewhere in the file",
        "popped elsewhere",
        "deleted elsewhere",
        "a default beside a forced IB",
    ],
)
def test_a_socket_network_that_may_not_hold_keeps_ib_disable(
    tmp_path: Path, body: str, other: str
) -> None:
    assert "NCCL_IB_DISABLE" in " ".join(gpf010(tmp_path, body, other))


def test_other_transport_knobs_are_still_reported(tmp_path: Path) -> None:
    body = "\n".join(
        [
            '    os.environ["NCCL_P2P_LEVEL"] = "SYS"',
            '    os.environ["NCCL_SHM_DISABLE"] = "1"',
            IB,
            NET,
        ]
    )
    assert gpf010(tmp_path, body) == ["7:NCCL_P2P_LEVEL", "8:NCCL_SHM_DISABLE"]


def test_a_loopback_interface_in_the_other_branch_does_not_cover(tmp_path: Path) -> None:
    """The same block rule for the loopback exemption (test_lint_one_host.py): an `else` branch
    is not the `if` body it sits beside."""
    body = f'    if world_size > 1:\n    {IB}\n    else:\n        os.environ["NCCL_SOCKET_IFNAME"] = "lo"'
    assert gpf010(tmp_path, body) == ["8:NCCL_IB_DISABLE"]


def test_an_early_exit_between_the_writes_keeps_ib_disable(tmp_path: Path) -> None:
    # A review's shape: the multi-node path returns before the Socket line, so the IB write runs
    # without it. A Socket line before the IB write still covers it.
    body = "\n".join(
        [IB, "    if args.multi_node:", '        return dist.init_process_group("nccl")', NET]
    )
    assert gpf010(tmp_path, body) == ["7:NCCL_IB_DISABLE"]
    before = "\n".join([NET, "    if args.multi_node:", "        return None", IB])
    assert gpf010(tmp_path, before) == []


def test_a_def_of_the_same_name_elsewhere_does_not_cover(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import os\nimport sys\nimport torch.distributed as dist\n\n"
        'if sys.platform == "darwin":\n'
        "    def setup():\n"
        '        os.environ["NCCL_NET"] = "Socket"\n'
        '        dist.init_process_group("nccl")\n'
        "else:\n"
        "    def setup():\n"
        '        os.environ["NCCL_IB_DISABLE"] = "1"\n'
        '        dist.init_process_group("nccl")\n'
    )
    found = lint_paths([str(tmp_path)]).findings
    assert [(f.line, f.rule) for f in found if f.rule == "GPF010"] == [(11, "GPF010")]
