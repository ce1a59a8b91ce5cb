"""Experiments without running them: which, in what order, what their results mean.

Fast: no worker processes. Each NCCL knob's meaning is NCCL's own documentation
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html); the topology cells are
those `nvidia-smi topo -m` prints (NV#, PIX, PXB, PHB, NODE, SYS).
"""

from __future__ import annotations

import argparse
import types
from typing import Any

import pytest

KNOB_IDS = [
    "p2p-off",
    "shm-off",
    "cumem-off",
    "p2p-level-pxb",
    "ib-off",
    "proto-simple",
    "algo-ring",
    "nvls-off",
]


def ns(**kw: Any) -> argparse.Namespace:
    base = {
        "no_experiments": False,
        "experiment": None,
        "experiments": None,
        "no_p2p_rerun": False,
        "nnodes": 1,
        "job_env": {},
    }
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.fixture(autouse=True)
def _no_nccl_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_PROTO", "NCCL_IB_DISABLE"):
        monkeypatch.delenv(var, raising=False)


def test_knobs_first_in_fixed_order_then_gpu_pairs(prog: types.ModuleType) -> None:
    facts = {"topology_worst": None, "infiniband": ["mlx5_0"]}
    plan = prog.plan_experiments(ns(), facts, 4, 4)
    assert plan[:8] == KNOB_IDS
    # Disjoint pairs first: after two runs every GPU has been in one.
    assert plan[8:] == [
        "gpus-0-1",
        "gpus-2-3",
        "gpus-0-2",
        "gpus-0-3",
        "gpus-1-2",
        "gpus-1-3",
    ]


@pytest.mark.parametrize(
    ("worst", "ib", "left_out"),
    [
        ("PIX", [], {"p2p-level-pxb", "nvls-off", "ib-off"}),  # all under one switch: PXB is moot
        ("PXB", [], {"p2p-level-pxb", "nvls-off", "ib-off"}),
        ("SYS", [], {"nvls-off", "ib-off"}),  # PXB keeps P2P off the SMP link: worth a try
        ("NV18", ["mlx5_0"], {"p2p-level-pxb"}),  # NVLink: NVLS may be in use
        (None, [], {"ib-off"}),  # unknown topology: try them
    ],
)
def test_knobs_the_facts_make_moot_are_left_out(
    prog: types.ModuleType, worst: str | None, ib: list[str], left_out: set[str]
) -> None:
    plan = prog.plan_experiments(ns(), {"topology_worst": worst, "infiniband": ib}, 2, 2)
    assert set(KNOB_IDS) - set(plan) == left_out
    assert not [p for p in plan if p.startswith("gpus-")]  # two GPUs: the pair is the main run


@pytest.mark.parametrize("exp_id", ["gdr-off", "mnnvl-off"])
def test_knobs_between_hosts_are_never_tried_inside_one_host(
    prog: types.ModuleType, exp_id: str
) -> None:
    """GPU Direct RDMA moves data between a NIC and GPU memory, multi-node NVLink between GPUs of
    different hosts: only the multi-node probe's experiments reach them (gpufix.probe.multinode),
    even on an NVLink host with InfiniBand."""
    for worst in (None, "SYS", "NV18"):
        facts = {"topology_worst": worst, "infiniband": ["mlx5_0"]}
        assert exp_id not in prog.plan_experiments(ns(), facts, 4, 4)
    assert not prog.knob_applies(exp_id, dict(prog.KNOBS)[exp_id], {"topology_worst": "NV18"})


def test_a_knob_already_set_is_left_out(
    prog: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCCL_SHM_DISABLE", "1")
    assert "shm-off" not in prog.plan_experiments(ns(), {}, 2, 2)


def test_switches_that_narrow_the_plan(prog: types.ModuleType) -> None:
    assert prog.plan_experiments(ns(no_experiments=True), {}, 4, 4) == []
    assert "p2p-off" not in prog.plan_experiments(ns(no_p2p_rerun=True), {}, 2, 2)
    assert prog.plan_experiments(ns(experiments="gpus-0-2,shm-off"), {}, 4, 4) == [
        "gpus-0-2",
        "shm-off",
    ]
    assert prog.plan_experiments(ns(nnodes=2), {}, 2, 2) == []  # the controller runs those
    assert prog.plan_experiments(ns(), {}, 3, 0)[-3:] == ["gpus-0-1", "gpus-0-2", "gpus-1-2"]


@pytest.mark.parametrize(
    ("exp_id", "env", "gpus"),
    [
        ("p2p-off", {"NCCL_P2P_DISABLE": "1"}, None),
        ("p2p-level-pxb", {"NCCL_P2P_LEVEL": "PXB"}, None),
        ("shm-off", {"NCCL_SHM_DISABLE": "1"}, None),
        ("cumem-off", {"NCCL_CUMEM_ENABLE": "0"}, None),
        ("ib-off", {"NCCL_IB_DISABLE": "1"}, None),
        ("proto-simple", {"NCCL_PROTO": "Simple"}, None),
        ("algo-ring", {"NCCL_ALGO": "Ring"}, None),
        ("nvls-off", {"NCCL_NVLS_ENABLE": "0"}, None),
        ("gdr-off", {"NCCL_NET_GDR_LEVEL": "LOC"}, None),
        ("mnnvl-off", {"NCCL_MNNVL_ENABLE": "0"}, None),
        ("gpus-1-3", {}, [1, 3]),
        ("ifname-eth1", {"NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1"}, None),
    ],
)
def test_each_experiment_changes_one_mechanism(
    prog: types.ModuleType, exp_id: str, env: dict[str, str], gpus: list[int] | None
) -> None:
    assert prog.experiment_env(exp_id) == (env, gpus)


def test_the_role_passes_every_experiment_the_program_knows(prog: types.ModuleType) -> None:
    """The multi-node probe hands each experiment to roles/probe (gpufix_probe_experiment),
    whose preflight checks it against its own copy of the ids: a knob missing there fails every
    host's run before the program starts. The schema's ids must hold it too."""
    import re
    from pathlib import Path

    import yaml
    from gpufix.probe.local import schema

    root = Path(__file__).resolve().parents[2]
    role = yaml.safe_load((root / "roles/probe/vars/main.yml").read_text())
    role_re = re.compile(role["_gpufix_probe_experiment_re"].strip())
    schema_re = re.compile(schema()["$defs"]["experiment_id"]["pattern"])
    for exp_id in [k for k, _ in prog.KNOBS] + ["gpus-0-1", "ifname-eth1"]:
        assert role_re.match(exp_id) and schema_re.match(exp_id), exp_id
    assert not role_re.match("mnnvl-on")
    # a final newline is no part of an id (Python's `$` would let it through)
    assert not role_re.match("p2p-off\n") and not role_re.match("ifname-eth1\n")
    for exp_id in (
        "gpus-0-1\n",
        "ifname-eth1\n",
        "job-env-without-NCCL_ALGO\n",
        "gpus-\u0660-\u0661",
    ):
        with pytest.raises(ValueError, match="unknown experiment"):
            prog.experiment_env(exp_id)


@pytest.mark.parametrize(
    "exp_id",
    ["p2p", "gpus-3-1", "gpus-1-1", "gpus-0", "ifname-", "ifname-eth0;reboot", "ifname-a b"],
)
def test_unknown_experiments_are_refused(prog: types.ModuleType, exp_id: str) -> None:
    with pytest.raises(ValueError, match="unknown experiment"):
        prog.experiment_env(exp_id)


def rec(gpus: list[int], verdict: str) -> dict[str, Any]:
    return {"id": f"gpus-{gpus[0]}-{gpus[1]}", "gpus": gpus, "verdict": verdict}


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        # GPU 2 in every failing pair, the pair without it passes: GPU 2 (or its bridge).
        ([([0, 1], "healthy"), ([0, 2], "hung"), ([1, 2], "hung")], {"gpus": [2], "links": []}),
        # Only 0-2 fails: the link, not a GPU.
        (
            [([0, 1], "healthy"), ([0, 2], "hung"), ([1, 2], "healthy")],
            {"gpus": [], "links": ["0-2"]},
        ),
        # Four GPUs, GPU 3 bad; a degraded pair counts as failing.
        (
            [
                ([0, 1], "healthy"),
                ([2, 3], "degraded"),
                ([0, 2], "healthy"),
                ([0, 3], "failed"),
                ([1, 2], "healthy"),
                ([1, 3], "hung"),
            ],
            {"gpus": [3], "links": []},
        ),
        # Every pair fails, or none does: the pairs cannot name a GPU or a link.
        ([([0, 1], "hung"), ([0, 2], "hung"), ([1, 2], "hung")], None),
        ([([0, 1], "healthy"), ([0, 2], "healthy"), ([1, 2], "healthy")], None),
        # Pairs the budget skipped say nothing.
        (
            [([0, 1], "healthy"), ([0, 2], "hung"), ([1, 2], "skipped")],
            {"gpus": [], "links": ["0-2"]},
        ),
    ],
)
def test_pairs_name_the_gpu_or_the_link(
    prog: types.ModuleType, pairs: list[tuple[list[int], str]], expected: dict[str, Any] | None
) -> None:
    knobs = [{"id": "p2p-off", "gpus": None, "verdict": "hung"}]
    assert prog.pair_suspects(knobs + [rec(g, v) for g, v in pairs]) == expected


@pytest.mark.parametrize(
    ("decided", "ids"),
    [
        ("p2p-off", ["p2p-path", "p2p-path-workaround"]),
        ("p2p-level-pxb", ["p2p-path", "p2p-path-workaround"]),
        ("shm-off", ["shm-transport"]),
        ("cumem-off", ["cumem"]),
        ("ib-off", ["ib-path"]),
        ("proto-simple", ["nccl-protocol"]),
        ("algo-ring", ["nccl-algorithm"]),
        ("nvls-off", ["nvls"]),
        ("mnnvl-off", ["mnnvl"]),
        ("ifname-eth1", ["socket-interface"]),
        (None, ["nccl-transport"]),
    ],
)
def test_the_deciding_experiment_names_the_cause(
    prog: types.ModuleType, decided: str | None, ids: list[str]
) -> None:
    main = {"verdict": "hung", "stalled": {"phase": "pg_init", "ranks": [0, 1]}}
    causes = prog.find_causes({"main": main, "decided": decided, "suspects": None})
    assert [c["id"] for c in causes] == ids


def test_pair_suspects_name_the_cause(prog: types.ModuleType) -> None:
    main = {"verdict": "hung", "stalled": {"phase": "pg_init", "ranks": [0, 1, 2]}}
    gpu = prog.find_causes({"main": main, "decided": None, "suspects": {"gpus": [2], "links": []}})
    link = prog.find_causes(
        {"main": main, "decided": None, "suspects": {"gpus": [], "links": ["0-2"]}}
    )
    assert [(c["id"], c["strategy"]) for c in gpu] == [("gpu-path", "pcie-acs")]
    assert [(c["id"], c["strategy"]) for c in link] == [("link-path", "pcie-acs")]


def test_a_cpu_run_blames_no_gpu_path_or_cuda(prog: types.ModuleType) -> None:
    """--cpu: CPU ranks stood in for the GPUs, so rank pairs, a slow or stalled allocation and
    a healthy one-rank baseline say nothing about a GPU, its PCIe path or CUDA."""
    main = {"verdict": "hung", "stalled": {"phase": "barrier", "ranks": [0, 1, 2]}}
    pairs = {"gpus": [2], "links": []}
    ev = {"main": main, "decided": None, "suspects": pairs, "backend": "gloo", "cpu": True}
    assert prog.find_causes(ev) == []
    alloc = {"verdict": "hung", "stalled": {"phase": "alloc", "ranks": [0]}}
    single = {"verdict": "healthy", "device": "cpu"}
    ev = {"main": alloc, "decided": None, "backend": "gloo", "cpu": True, "single": single}
    assert prog.find_causes(ev) == []
    assert [c["id"] for c in prog.find_causes({**ev, "cpu": False, "backend": "nccl"})] == [
        "gpu-init"
    ]


def test_a_failed_rerun_without_experiments_keeps_the_old_meaning(prog: types.ModuleType) -> None:
    main = {"verdict": "hung", "stalled": {"phase": "barrier", "ranks": [1]}}
    rerun = {"verdict": "healthy"}
    assert [c["id"] for c in prog.find_causes({"main": main, "rerun": rerun})][:1] == ["p2p-path"]


@pytest.mark.parametrize(
    ("lo", "hi", "f", "sizes"),
    [
        ("1K", "64K", 4, [1024, 4096, 16384, 65536]),
        ("8", "128", 2, [8, 16, 32, 64, 128]),  # nccl-tests' -b 8 -e 128 -f 2
        ("1M", "1M", 4, [1 << 20]),
        ("6", "6", 1, [4]),  # whole float32 elements
    ],
)
def test_soak_sizes_sweep_like_nccl_tests(
    prog: types.ModuleType, lo: str, hi: str, f: int, sizes: list[int]
) -> None:
    args = argparse.Namespace(soak_min_bytes=lo, soak_max_bytes=hi, soak_factor=f)
    assert prog.soak_sizes(args) == sizes


@pytest.mark.parametrize("text", ["", "1T", "-1", "1.5M", "M"])
def test_bad_sizes_are_refused(prog: types.ModuleType, text: str) -> None:
    with pytest.raises(ValueError, match="bad size"):
        prog.parse_size(text)


def test_p2p_knobs_are_left_out_where_cuda_refuses_every_peer(prog: types.ModuleType) -> None:
    """NCCL uses no P2P transport where cudaDeviceCanAccessPeer says no (p2pCanConnect in
    src/transport/p2p.cc): on GPUs whose every pair the main run read as refused (GeForce RTX
    40 on a driver that says CNS), P2P off or limited changes nothing; one pair that can is
    enough to keep them."""
    facts = {"topology_worst": "SYS", "infiniband": []}
    refused = {"0": {"1": False}, "1": {"0": False}}
    plan = prog.plan_experiments(ns(), facts, 2, 2, refused)
    assert "p2p-off" not in plan and "p2p-level-pxb" not in plan and "shm-off" in plan
    some = {"0": {"1": True, "2": False}, "1": {"0": True, "2": False}}
    assert {"p2p-off", "p2p-level-pxb"} <= set(prog.plan_experiments(ns(), facts, 3, 3, some))
    assert "p2p-off" in prog.plan_experiments(ns(), facts, 2, 2, {})  # not read: try it


def test_a_run_its_own_deadline_ended_during_the_import_blames_no_import(
    prog: types.ModuleType,
) -> None:
    """--deadline 1 ended the run while torch was importing and the verdict blamed a slow
    import (probe review, 2026-12-06); the import's own deadline running out still does."""
    cut = {
        "verdict": "hung",
        "stalled": {"phase": "import_torch", "ranks": [0], "by": "probe deadline"},
    }
    assert prog.find_causes({"main": cut}) == []
    own = {"verdict": "hung", "stalled": {"phase": "import_torch", "ranks": [0]}}
    assert [c["id"] for c in prog.find_causes({"main": own})] == ["torch-import"]


@pytest.mark.parametrize(
    ("nccl", "arch", "vendor", "ngpu", "planned"),
    [
        ("2.21.5", "x86_64", "GenuineIntel", 4, False),  # Intel: PXB since 2.9.6
        ("2.8.4", "x86_64", "GenuineIntel", 4, True),  # PHB before 2.9.6 (not Broadwell)
        ("2.21.5", "x86_64", "AuthenticAMD", 4, True),  # SYS on AMD until 2.23.4
        ("2.27.5", "x86_64", "AuthenticAMD", 4, False),  # PXB for all from 2.23.4 ...
        ("2.27.5", "x86_64", "AuthenticAMD", 2, True),  # ... but SYS on AMD with two GPUs
        ("2.27.5", "aarch64", None, 4, False),  # ARM: PXB
        (None, "x86_64", "GenuineIntel", 4, True),  # NCCL unknown: cannot tell, run it
    ],
)
def test_p2p_level_pxb_is_not_planned_where_it_is_nccls_default(
    prog: types.ModuleType,
    nccl: str | None,
    arch: str,
    vendor: str | None,
    ngpu: int,
    planned: bool,
) -> None:
    """NCCL_P2P_LEVEL=PXB changes nothing where NCCL's own default (ncclTopoCheckP2p in
    src/graph/paths.cc, read at v2.9.6-1, v2.23.4-1) is PXB: a healthy run under it was noise
    read as "P2P through the root complex hangs" (expert review, 2026-12-06)."""
    facts = {"topology_worst": "SYS", "infiniband": [], "nccl": nccl,
             "cpu": {"arch": arch, "vendor": vendor}}  # fmt: skip
    plan = prog.plan_experiments(ns(), facts, ngpu, ngpu)
    assert ("p2p-level-pxb" in plan) is planned, plan


def test_nccl_counts_the_runs_gpus_not_the_hosts(prog: types.ModuleType) -> None:
    """NCCL's GPU count is the communicator's on this host: two ranks on a four-GPU AMD host
    get SYS by default from 2.23.4, so PXB changes something there (re-read review)."""
    facts = {"topology_worst": "SYS", "infiniband": [], "nccl": "2.27.5",
             "cpu": {"arch": "x86_64", "vendor": "AuthenticAMD"}}  # fmt: skip
    assert "p2p-level-pxb" in prog.plan_experiments(ns(), facts, 2, 4)
    assert "p2p-level-pxb" not in prog.plan_experiments(ns(), facts, 4, 4)


def test_every_copy_of_the_size_rule_agrees(prog: types.ModuleType) -> None:
    """Soak sizes: the CLI, the role and the program give one answer per sample (a review: the
    role refused `64k`, which the CLI and the program take)."""
    import re
    from pathlib import Path

    import yaml
    from gpufix.probe.options import _SIZE

    root = Path(__file__).resolve().parents[2]
    role = yaml.safe_load((root / "roles/probe/vars/main.yml").read_text())
    role_re = re.compile(role["_gpufix_probe_size_re"])
    for size in ("8", "64K", "64k", "128M", "1G", "1g", "1T", "", "K", "8\n", " 8", "\u0668"):
        try:
            prog.parse_size(size)
            want = True
        except ValueError:
            want = False
        answers = {"cli": bool(_SIZE.fullmatch(size)), "role": bool(role_re.match(size))}
        assert answers == dict.fromkeys(answers, want), repr(size)
