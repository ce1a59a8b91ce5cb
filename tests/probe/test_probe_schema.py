"""The verdict schema after experiments, soak and multi-node: old verdicts still validate, the new
fields are checked, and nothing in them can smuggle in another environment variable."""

from __future__ import annotations

import argparse
import copy
import types
from typing import Any

import pytest
from gpufix.errors import GpufixError
from gpufix.probe import summarize, validate

NEW_FIELDS = ("scope", "experiments", "decided_by", "suspects", "soak")


def verdict(prog: types.ModuleType, **fields: Any) -> dict[str, Any]:
    args = argparse.Namespace(
        run_id="abc",
        deadline=60.0,
        phase_deadline=30.0,
        no_experiments=False,
        experiment_budget=180,
        experiment=None,
    )
    v: dict[str, Any] = prog.base_verdict(args, "host01", 2, "nccl")
    v.update(fields)
    return v


HUNG = {"stalled": {"phase": "pg_init", "ranks": [0, 1], "waiting": []}, "verdict": "hung"}


def experiment(exp_id: str, verdict: str, **kw: Any) -> dict[str, Any]:
    rec = {"id": exp_id, "env": {}, "gpus": None, "verdict": verdict, "stalled": None}
    rec.update({"error": None, "elapsed_s": 4.2})
    rec.update(kw)
    return rec


def test_a_version_1_verdict_without_the_new_fields_still_validates(
    prog: types.ModuleType,
) -> None:
    old = verdict(prog, **HUNG)
    for key in NEW_FIELDS:
        del old[key]
    old["stalled"] = {"phase": "pg_init", "ranks": [1], "waiting": [0]}
    old["no_p2p_rerun"] = {"verdict": "healthy", "busbw_gbps": None}
    assert validate(old) is old


def test_experiments_soak_and_suspects_validate(prog: types.ModuleType) -> None:
    v = verdict(
        prog,
        **HUNG,
        experiments=[
            experiment(
                "p2p-off",
                "hung",
                env={"NCCL_P2P_DISABLE": "1"},
                stalled={"phase": "pg_init", "ranks": [0, 1]},
                error="ranks [0, 1] made no progress in pg_init for 30.0 s (phase deadline)",
            ),
            experiment("shm-off", "healthy", env={"NCCL_SHM_DISABLE": "1"}),
            experiment("gpus-0-2", "skipped", error="experiment budget of 180 s spent"),
        ],
        decided_by="shm-off",
        suspects={"gpus": [2], "links": []},
        soak={"sizes": [1024, 4096], "iters": 20, "verdict": "skipped", "stalled_at_bytes": None},
    )
    assert validate(v) is v
    assert "healthy with shm-off (2 experiments)" in summarize(v)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("experiments", 0, "env"), {"LD_PRELOAD": "/tmp/x.so"}),  # only NCCL_*/GLOO_*
        (("experiments", 0, "env"), {"NCCL_P2P_DISABLE": 1}),  # values are strings
        (("experiments", 0, "id"), "ifname-eth0;reboot"),
        (("experiments", 0, "verdict"), "fine"),
        (("decided_by",), "rm -rf"),
        (("soak", "iters"), 0),
        (("scope",), "galaxy"),
        (("failed_layer",), "dns"),
    ],
)
def test_bad_new_fields_are_refused(
    prog: types.ModuleType, path: tuple[Any, ...], value: Any
) -> None:
    v = verdict(
        prog,
        **HUNG,
        experiments=[experiment("p2p-off", "hung", env={"NCCL_P2P_DISABLE": "1"})],
        soak={"sizes": [1024], "iters": 1, "verdict": "healthy", "stalled_at_bytes": None},
    )
    bad = copy.deepcopy(v)
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(GpufixError, match="probe verdict is invalid"):
        validate(bad)


def test_a_multi_node_verdict_names_hosts_and_layer(prog: types.ModuleType) -> None:
    v = verdict(prog, **HUNG, scope="multi-node")
    with pytest.raises(GpufixError, match="hosts"):
        validate(v)
    v.update(hosts=["h1", "h2"], failed_layer="rendezvous", failed_hosts=["h2"])
    assert validate(v) is v
