"""The host's setup in nccl_issues.yaml `setup` words ("multi-node", "infiniband"): what the
facts and the probe show, and what unread facts cannot rule out."""

from __future__ import annotations

from gpufix.facts.host import Host


def shown(h: Host, multi_node: bool) -> frozenset[str]:
    """ "multi-node" when the probe ran across hosts, "infiniband" when the facts list IB/RoCE
    devices (/sys/class/infiniband holds both)."""
    return frozenset(
        name
        for name, present in (("multi-node", multi_node), ("infiniband", bool(h.infiniband)))
        if present
    )


def unread(h: Host) -> frozenset[str]:
    """Setups the facts could not rule out: IB/RoCE when the network facts were not read."""
    return frozenset() if h.network_read else frozenset({"infiniband"})
