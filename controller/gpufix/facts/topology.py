"""GPU-to-GPU links in `nvidia-smi topo -m`, ranked: the one definition the controller uses.

The facts module (shipped alone to hosts) keeps its own copy, TOPOLOGY_RANK; a test keeps the
two in step. SOC is the name older drivers print for SYS.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Lower is closer; NV# (NVLink, any count) ranks best.
LINK_RANK: Mapping[str, int] = {
    "NV": 0,
    "PIX": 1,
    "PXB": 2,
    "PHB": 3,
    "NODE": 4,
    "SYS": 5,
    "SOC": 5,
}
_BY_RANK = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")
_NVLINK = re.compile(r"NV\d+")


def rank(link: object) -> int | None:
    """Rank of one topo -m cell; None for X, blanks and labels nvidia-smi never prints."""
    text = str(link or "").strip()
    if _NVLINK.fullmatch(text):
        return LINK_RANK["NV"]
    return LINK_RANK.get(text)


def worst_link(matrix: object) -> str | None:
    """The farthest link between any two GPUs ({"GPU0": {"GPU1": "PHB"}} -> "PHB"), as its
    canonical name (SOC reads as SYS); None when no cell is a known link."""
    if not isinstance(matrix, Mapping):
        return None
    ranks = [
        r
        for row in matrix.values()
        if isinstance(row, Mapping)
        for r in (rank(cell) for cell in row.values())
        if r is not None
    ]
    return _BY_RANK[max(ranks)] if ranks else None


def canonical(link: object) -> str | None:
    """'NV12' -> 'NV', 'SOC' -> 'SYS', 'PIX' -> 'PIX'; None for anything else."""
    r = rank(link)
    return None if r is None else _BY_RANK[r]
