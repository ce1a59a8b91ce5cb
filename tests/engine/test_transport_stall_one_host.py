"""Within one host NCCL's data go over P2P or SHM; its sockets and the network plugin only set
the communicator up. A single-host run that stalled in the all-reduce after every knob
experiment failed was given NCCL_SOCKET_IFNAME pinned to the host's NIC (and IB off where the
host has an HCA) as its fix, a change with nothing behind it (expert review, 2026-12-06). A
stall while the communicator is set up (pg_init) still tries the interface."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KNOBS = ("p2p-off", "shm-off", "cumem-off", "proto-simple", "algo-ring")


def _facts() -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]
    return facts


def _stalled(phase: str) -> dict[str, Any]:
    exps = [{"id": k, "env": {}, "gpus": None, "verdict": "hung", "error": None, "elapsed_s": 30.0,
             "stalled": {"phase": phase, "ranks": [0, 1]}} for k in KNOBS]  # fmt: skip
    cause = {"id": "nccl-transport", "strategy": "nccl-profile", "why": "x"}
    return {"format": "gpufix-probe", "version": 1, "verdict": "hung", "backend": "nccl",
            "world_size": 2, "stalled": {"phase": phase, "ranks": [0, 1]},
            "experiments": exps, "decided_by": None, "causes": [cause]}  # fmt: skip


def _profiles(plan: Any) -> list[str]:
    return [n for s in plan.steps for n in s.vars.get("gpufix_nccl_profile_names", [])]


def test_a_stall_past_set_up_on_one_host_pins_no_interface() -> None:
    plan = decide(_facts(), _stalled("allreduce"))
    assert "socket-ifname" not in _profiles(plan), plan.path
    option = {o.strategy: o for o in plan.options}["nccl-profile"]
    assert not option.feasible or "socket" not in option.reason


def test_a_stall_in_set_up_still_tries_the_interface() -> None:
    plan = decide(_facts(), _stalled("pg_init"))
    option = {o.strategy: o for o in plan.options}["nccl-profile"]
    assert option.feasible and "enp" in option.reason + " ".join(plan.path), plan.path
