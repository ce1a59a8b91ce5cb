"""The verdict records the GPUs the probe's ranks used (what CUDA listed where training runs), so
a plan can count them when nvidia-smi listed nothing (engine/probe_facts.py)."""

from __future__ import annotations

import argparse
import types
from typing import Any


def _rank(prog: types.ModuleType, rank: int, cuda_init: dict[str, Any] | None) -> Any:
    st = prog.RankState(rank, None, "", 0.0)
    if cuda_init is not None:
        st.data["cuda_init"] = cuda_init
    return st


def _record(prog: types.ModuleType, ranks: list[Any]) -> dict[str, Any]:
    res = prog.RunResult("main", ["cuda_init"], 100.0)
    res.ranks = ranks
    v: dict[str, Any] = {"facts": {}}
    prog.record_main(v, res, argparse.Namespace(phase_deadline=60.0), 0.0)
    return v


def test_each_rank_names_its_own_device(prog: types.ModuleType) -> None:
    seen = {"device_count": 2, "nccl": "2.18.6"}
    v = _record(
        prog,
        [
            _rank(prog, 0, {**seen, "name": "NVIDIA GeForce RTX 3090"}),
            _rank(prog, 1, {**seen, "name": "NVIDIA GeForce RTX 3090 Ti"}),
        ],
    )
    assert v["facts"]["gpu_count"] == 2
    assert v["facts"]["gpu_names"] == {
        "0": "NVIDIA GeForce RTX 3090",
        "1": "NVIDIA GeForce RTX 3090 Ti",
    }
    assert v["facts"]["nccl"] == "2.18.6"


def test_ranks_that_never_started_cuda_record_no_count(prog: types.ModuleType) -> None:
    v = _record(prog, [_rank(prog, 0, None), _rank(prog, 1, None)])
    assert "gpu_count" not in v["facts"] and "gpu_names" not in v["facts"]
