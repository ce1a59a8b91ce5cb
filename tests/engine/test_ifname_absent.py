"""NCCL_SOCKET_IFNAME that names no interface the host has up: NCCL finds no socket interface
(a review, 2026-12-07: torchtune#1103 set eth0 on a host whose only interface was lo, and
`export NCCL_SOCKET_IFNAME=lo` fixed it; the plan upgraded torch instead). The profile names an
interface the facts list; interfaces nobody read decide nothing."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.apply.rolevars import check_vars
from gpufix.engine import decide as engine
from gpufix.engine import overrides
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.errors import InvalidInput
from gpufix.facts.host import from_facts

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
STALL = {"format": "gpufix-probe", "version": 1, "verdict": "failed", "backend": "nccl",
         "world_size": 2, "stalled": None, "failed_in": {"phase": "pg_init", "ranks": [0, 1]},
         "error": "ncclSystemError: unhandled system error", "causes": [], "experiments": [],
         "decided_by": None}  # fmt: skip


def host(value: str, interfaces: Any = None) -> dict[str, Any]:
    f: dict[str, Any] = copy.deepcopy(
        json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]
    )
    f["nccl"] = {"env": {"NCCL_SOCKET_IFNAME": value}, "files": {}}
    if interfaces is not None:
        f["network"]["interfaces"] = interfaces
    return f


def absent(value: str, interfaces: Any = None) -> str | None:
    return overrides.read(from_facts(host(value, interfaces)), KB).ifname_absent


def names() -> list[str]:
    f = host("x")
    return [i["name"] for i in f["network"]["interfaces"] if i.get("up")]


def test_prefixes_and_exact_names_as_nccl_matches_them() -> None:
    first = next(n for n in names() if n != "lo")
    assert absent(first[:2]) is None  # a prefix of an interface that is up
    assert absent("=" + first) is None
    assert absent("=" + first[:2]) == first  # "=" matches whole names only
    assert absent("ib,eth9") == first
    assert absent("lo") is None and absent("^docker0") is None  # exclusion lists: other row


def test_only_lo_up_gives_lo() -> None:
    only_lo = [{"name": "lo", "up": True, "ipv4": ["127.0.0.1/8"]}]
    assert absent("eth0", only_lo) == "lo"
    plan = decide(host("eth0", only_lo), STALL)
    assert plan.extra["decision"]["row"] == "override-ifname-absent"
    (step,) = plan.steps
    assert step.vars["gpufix_nccl_profile_socket_ifname"] == "lo"
    assert plan.extra["complete"] is True
    assert any("take it out of that environment" in r for r in plan.risks)


@pytest.mark.parametrize("unread", [{"unknown": "not read"}])
def test_interfaces_nobody_read_decide_nothing(unread: Any) -> None:
    f = host("eth9")
    f["network"]["interfaces"] = unread
    assert overrides.read(from_facts(f), KB).ifname_absent is None


def test_an_interface_setting_left_in_place_explains_a_connect_error() -> None:
    """A review (2026-12-07, horovod#666: an image's /etc/nccl.conf held ^docker0, and ranks
    could not connect): the connect error's generic row came first and named no cause."""
    f = host("x")
    f["nccl"] = {"env": {}, "files": {"/etc/nccl.conf": {"NCCL_SOCKET_IFNAME": "^docker0"}}}
    v = {**STALL, "error": "NCCL WARN Call to connect returned Connection refused, retrying"}
    plan = decide(f, v)
    assert plan.extra["decision"]["row"] == "override-ifname-filter"
    (step,) = plan.steps
    assert step.vars["gpufix_nccl_profile_socket_ifname"] == "^docker0,docker,lo,virbr"
    assert plan.extra["complete"] is True  # until 2026-12-07 the list was never written
    check_vars(step.playbook, step.vars, "steps/0/vars", plan_step=True)  # apply takes it
    with pytest.raises(InvalidInput):
        check_vars(step.playbook, {**step.vars, "gpufix_nccl_profile_socket_ifname": "^a;b"},
                   "steps/0/vars", plan_step=True)  # fmt: skip


def test_a_run_past_nccl_s_bootstrap_had_an_interface() -> None:
    """A re-read (2026-12-07): NCCL without a socket interface stops in its bootstrap, so a run
    that reached the all-reduce had one, whatever the facts' environment says."""
    past = {**STALL, "failed_in": {"phase": "allreduce", "ranks": [0, 1]}}
    plan = decide(host("eth9"), past)
    assert plan.extra["decision"]["row"] != "override-ifname-absent"
