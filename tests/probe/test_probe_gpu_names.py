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


def test_nccl_version_in_every_form_torch_returns(prog: types.ModuleType) -> None:
    """torch.cuda.nccl.version() is a tuple since torch 1.10 (a fourth item, NCCL's suffix, since
    2.2) and an int before (NCCL_MAJOR*1000 + NCCL_MINOR*100 + NCCL_PATCH, pytorch#62916): the
    probe read only tuples, so on the old stacks bionic hosts run the verdict had no NCCL."""
    assert prog.nccl_text((2, 19, 3)) == "2.19.3"
    assert prog.nccl_text((2, 21, 5, "+cuda12.4")) == "2.21.5"
    assert prog.nccl_text(2708) == "2.7.8"  # torch 1.7-1.9's bundled NCCL
    assert prog.nccl_text(3003) is None  # NCCL 2.10.3 overflowed torch's old encoding
    assert prog.nccl_text(True) is None and prog.nccl_text("2.19.3") is None
