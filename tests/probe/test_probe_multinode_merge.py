"""Multi-node probe pieces without hosts: merging the hosts' parts, naming the layer, the address
and interfaces from facts, the verdict. Fast. Host facts are the recorded snapshots in
tests/fixtures/hosts (built from recorded tool outputs, see build_hosts.py there)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
from gpufix.errors import InvalidInput
from gpufix.probe import merge, multiverdict, nodes, summarize, validate
from gpufix.probe.merge import MergedOutcome, Part

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def facts(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((HOSTS / name).read_text())["facts"]
    return loaded


def part(host: str, verdict: str, phase: str | None = None, **kw: Any) -> Part:
    ranks = kw.pop("ranks", [0])
    v: dict[str, Any] = {"verdict": verdict, "error": kw.pop("error", None)}
    if verdict == "hung":
        v["stalled"] = {"phase": phase, "ranks": ranks, "called": kw.pop("called", [])}
    elif verdict == "failed":
        v["failed_in"] = {"phase": phase, "ranks": ranks}
        if "called" in kw:  # the program says whether the failing rank had made the call
            v["failed_in"]["called"] = kw.pop("called")
    v["node"] = {"rank": 0, "nnodes": 2, "ranks": ranks}
    v.update(kw)
    return Part(host, v)


def test_phases_are_the_programs(prog: types.ModuleType) -> None:
    assert merge.PHASES == prog.PHASES
    assert merge.COLLECTIVE == prog.COLLECTIVE


def test_a_host_claiming_a_later_phase_than_its_waiting_peers_is_named() -> None:
    """A review (2026-12-05): h3 printed "failed in pg_init" and never connected; h1 and h2,
    waiting at the store, were named. No host gets past a collective its peers never left."""
    out = merge.combine(
        [
            part("h1", "hung", "rendezvous", ranks=[0], called=[0]),
            part("h2", "hung", "rendezvous", ranks=[1], called=[1]),
            part("h3", "failed", "pg_init", ranks=[2], error="made up"),
        ]
    )
    assert (out.verdict, out.phase, out.hosts, out.ranks) == ("failed", "rendezvous", ["h3"], [2])


def test_the_host_that_never_reached_the_store_is_named() -> None:
    # h1 serves the store and waits there (called); h2 cannot connect (not called).
    out = merge.combine(
        [
            part("h1", "hung", "rendezvous", ranks=[0], called=[0], error="waiting"),
            part("h2", "hung", "rendezvous", ranks=[1], called=[], error="no progress"),
        ]
    )
    assert out == MergedOutcome("hung", "rendezvous", ["h2"], [1], "h2: no progress")


def test_a_hang_where_every_rank_waits_is_on_every_host() -> None:
    out = merge.combine(
        [
            part("h1", "hung", "pg_init", ranks=[0, 1], called=[0, 1]),
            part("h2", "hung", "pg_init", ranks=[2, 3], called=[2, 3]),
        ]
    )
    assert (out.verdict, out.phase, out.hosts, out.ranks) == (
        "hung",
        "pg_init",
        ["h1", "h2"],
        [0, 1, 2, 3],
    )


def test_the_earliest_phase_and_a_failure_win() -> None:
    out = merge.combine(
        [
            part("h1", "hung", "barrier", ranks=[0], called=[0]),
            part("h2", "failed", "pg_init", ranks=[1], error="Connection refused"),
            part("h3", "healthy"),
        ]
    )
    assert (out.verdict, out.phase, out.hosts) == ("failed", "pg_init", ["h2"])
    assert out.error == "h2: Connection refused"


def test_a_host_without_a_verdict_fails_the_run() -> None:
    out = merge.combine([part("h1", "healthy"), Part("h2", None, "unreachable: ssh timeout")])
    assert out == MergedOutcome("failed", None, ["h2"], [], "h2: unreachable: ssh timeout")


def test_a_host_that_failed_while_waiting_is_not_blamed() -> None:
    """A review (2026-12-05) on three podman hosts: h3 could not reach the store; at its
    deadline h1 stopped rank 0, which served the store, and h2, which had connected, failed
    with "connection closed". h2 was named beside h3. A failure after the call is waiting."""
    out = merge.combine(
        [
            part("h1", "hung", "rendezvous", ranks=[0], called=[0]),
            part("h2", "failed", "rendezvous", ranks=[1], called=[1], error="connection closed"),
            part("h3", "hung", "rendezvous", ranks=[2], called=[], error="no progress"),
        ]
    )
    assert (out.verdict, out.hosts, out.ranks) == ("hung", ["h3"], [2])
    # an error inside the collective, where every other rank waits: that host
    out = merge.combine(
        [
            part("h1", "hung", "allreduce", ranks=[0], called=[0]),
            part("h2", "failed", "allreduce", ranks=[1], called=[1], error="NCCL error"),
        ]
    )
    assert (out.verdict, out.hosts) == ("failed", ["h2"])


def test_a_host_that_lost_its_peer_is_not_blamed_beside_the_host_that_failed() -> None:
    """Two hosts in pg_init, both past the call: h1's gloo could not find its interface and its
    rank 0, which served the store, exited; h2's rank read the closed store (torch's words, from
    a CI run). The host whose error it was is named, not both."""
    gloo = "rank 0 in pg_init: RuntimeError: [enforce fail at device.cc:84] ifa != nullptr"
    lost = "rank 1 in pg_init: DistNetworkError: Failed to recv, got 0 bytes. Connection was"
    out = merge.combine(
        [
            part("h1", "failed", "pg_init", ranks=[0], called=[0], error=gloo),
            part("h2", "failed", "pg_init", ranks=[1], called=[1], error=lost),
        ]
    )
    assert (out.verdict, out.phase, out.hosts, out.ranks) == ("failed", "pg_init", ["h1"], [0])
    # every host lost a peer (the cause was elsewhere, or unseen): all of them, as before
    reset = "rank 1 in barrier: RuntimeError: Connection reset by peer"
    out = merge.combine(
        [
            part(
                "h1",
                "failed",
                "barrier",
                ranks=[0],
                called=[0],
                error="NCCL error: remote process exited",
            ),
            part("h2", "failed", "barrier", ranks=[1], called=[1], error=reset),
        ]
    )
    assert out.hosts == ["h1", "h2"]


@pytest.mark.parametrize(
    ("odd", "why"),
    [
        # its probe died (SIGKILL, OOM): the role's own verdict has no phase
        ({"verdict": "failed", "error": "the probe printed no verdict"}, "failed with no phase"),
        # no GPU there (no --cpu): no rank ran on it
        ({"verdict": "not-applicable", "error": "no NVIDIA GPU"}, "not-applicable: no NVIDIA GPU"),
    ],
)
def test_a_host_that_says_nothing_of_its_ranks_is_named(odd: dict[str, Any], why: str) -> None:
    """A review: such a host was never named; the others, waiting at the store, were blamed
    for a firewall, or the merge produced a verdict the schema refused (exit 1); a run of
    hosts without GPUs was healthy with no rank run."""
    waiting = [part("h1", "hung", "rendezvous", ranks=[0], called=[0]), part("h2", "healthy")]
    out = merge.combine([*waiting, Part("h3", odd)])
    assert (out.verdict, out.phase, out.hosts) == ("failed", None, ["h3"])
    assert out.error is not None and out.error.startswith(f"h3: {why}")
    if odd["verdict"] == "not-applicable":
        out = merge.combine([Part("h1", odd), Part("h2", odd)])
        assert (out.verdict, out.hosts) == ("failed", ["h1", "h2"])


def test_healthy_and_degraded() -> None:
    assert merge.combine([part("h1", "healthy"), part("h2", "healthy")]).verdict == "healthy"
    assert merge.combine([part("h1", "healthy"), part("h2", "degraded")]).verdict == "degraded"


@pytest.mark.parametrize(
    ("phase", "decided", "private", "expected"),
    [
        ("rendezvous", None, False, "rendezvous"),
        ("pg_init", None, False, "bootstrap"),
        ("pg_init", None, True, "container-network"),
        ("pg_init", "ifname-eth0", True, "interface"),
        ("allreduce", "ifname-ib0", False, "interface"),
        ("pg_init", "ib-off", False, "ib"),
        ("allreduce", "gdr-off", False, "ib"),  # GPU Direct RDMA: the IB path's GPU side
        ("pg_init", "mnnvl-off", False, "collective"),  # NCCL's NVLink, not bootstrap sockets
        ("pg_init", "nvls-off", False, "collective"),  # NVLink SHARP's buffers, bound at init
        ("allreduce", None, False, "collective"),
        ("allreduce", "proto-simple", False, "collective"),
        ("cuda_init", None, False, None),  # inside one host: its own probe's business
        ("import_torch", None, False, None),
    ],
)
def test_the_failing_layer(phase: str, decided: str | None, private: bool, expected: str) -> None:
    assert merge.layer(MergedOutcome("hung", phase, ["h2"], [1]), decided, private) == expected


def test_no_layer_when_healthy_or_without_a_verdict() -> None:
    assert merge.layer(MergedOutcome("healthy"), None, True) is None
    assert merge.layer(MergedOutcome("failed", None, ["h2"]), None, False) is None


def test_master_address_from_inventory_then_facts_then_ansible_host() -> None:
    ib_host = facts("bionic-hwe-8xa100.json")
    assert nodes.master_addr("h1", {"gpufix_probe_master_addr": "10.9.9.9"}, ib_host, None) == (
        "10.9.9.9"
    )
    assert nodes.master_addr("h1", {}, ib_host, None) == "10.20.0.31"  # first usable, not lo
    assert nodes.master_addr("h1", {}, ib_host, "ibp12s0") == "10.30.0.31"
    no_ip = {"network": {"interfaces": [{"name": "eth0", "up": True, "ipv4": None}]}}
    assert nodes.master_addr("h1", {"ansible_host": "192.0.2.7"}, no_ip, None) == "192.0.2.7"
    with pytest.raises(InvalidInput, match="set gpufix_probe_master_addr"):
        nodes.master_addr("h1", {"ansible_host": "gpu01.example"}, no_ip, None)
    with pytest.raises(InvalidInput, match="is not an address"):
        nodes.master_addr("h1", {"gpufix_probe_master_addr": "$(reboot)"}, ib_host, None)


def test_interface_candidates_are_shared_and_between_hosts() -> None:
    ib_host = facts("bionic-hwe-8xa100.json")
    assert nodes.ifname_candidates([ib_host, ib_host], None) == ["enp226s0", "ibp12s0", "ibp75s0"]
    assert nodes.ifname_candidates([ib_host], "enp226s0") == ["ibp12s0", "ibp75s0"]
    # docker0 is a bridge (and down there), lo is loopback; different hosts share only eth0.
    docker_host = facts("focal-4x4090.json")
    assert nodes.ifname_candidates([docker_host], None) == ["eno1"]
    assert nodes.ifname_candidates([docker_host, ib_host], None) == []
    assert nodes.has_infiniband([docker_host, ib_host])
    assert not nodes.has_infiniband([docker_host])


def test_containers_on_private_networks() -> None:
    assert nodes.private_container_network([facts("container-shm64m.json")])
    assert not nodes.private_container_network([facts("focal-4x4090.json")])


def run(outcome: MergedOutcome, layer: str | None, **kw: Any) -> multiverdict.MultiRun:
    parts = [
        part("h1", "hung", "rendezvous", ranks=[0], called=[0], error="waiting", backend="gloo"),
        part("h2", "hung", "rendezvous", ranks=[1], called=[], error="stuck", backend="gloo"),
    ]
    return multiverdict.MultiRun(
        target="pair",
        hosts=["h1", "h2"],
        parts=parts,
        outcome=outcome,
        layer=layer,
        master="10.0.0.1:29500",
        deadline_s=60,
        phase_deadline_s=10,
        **kw,
    )


def test_the_verdict_validates_and_names_layer_hosts_and_cause(prog: types.ModuleType) -> None:
    out = MergedOutcome("hung", "rendezvous", ["h2"], [1], "h2: stuck")
    v = validate(multiverdict.build(run(out, "rendezvous"), prog))

    assert (v["scope"], v["hosts"], v["failed_layer"], v["failed_hosts"]) == (
        "multi-node",
        ["h1", "h2"],
        "rendezvous",
        ["h2"],
    )
    assert v["stalled"] == {"phase": "rendezvous", "ranks": [1], "hosts": ["h2"]}
    assert v["world_size"] == 2 and v["backend"] == "gloo"
    assert [(c["id"], c["strategy"]) for c in v["causes"]] == [("rendezvous-unreachable", "none")]
    assert summarize(v).startswith("hung in rendezvous on h2 of h1, h2: rendezvous layer")


def test_a_first_host_whose_store_port_is_taken_is_not_called_a_firewall(
    prog: types.ModuleType,
) -> None:
    """An earlier run that has not ended holds the port on the first host: the new run's rank 0
    cannot serve the store. Before, that read as a port blocked between the hosts."""
    busy = prog.cause_records(["store-port-busy"])
    parts = [
        part("h1", "failed", "rendezvous", ranks=[0], called=[], causes=busy, backend="gloo"),
        part("h2", "failed", "rendezvous", ranks=[1], called=[1], backend="gloo"),
    ]
    out = merge.combine(parts)
    assert (out.verdict, out.phase, out.hosts) == ("failed", "rendezvous", ["h1"])
    r = run(out, merge.layer(out, None, False))
    r.parts = parts
    v = validate(multiverdict.build(r, prog))
    assert [(c["id"], c["strategy"]) for c in v["causes"]] == [("store-port-busy", "none")]
    assert "port is in use" in v["causes"][0]["why"]


def test_each_multi_node_run_has_its_own_store_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufix import runner
    from gpufix.probe.multinode import run_once
    from gpufix.probe.options import ProbeOptions

    keys = []

    def recorded(playbook: str, *args: Any, **kw: Any) -> runner.RunResult:
        keys.append(kw["extravars"]["gpufix_probe_store_key"])
        return runner.RunResult("x", 0, "successful", {})

    monkeypatch.setattr(runner, "run_playbook", recorded)
    for _ in range(3):
        run_once(["h1", "h2"], Path("inv"), ProbeOptions(), "10.0.0.1", None, 60, None)
    assert len(set(keys)) == 3 and all(len(k) == 12 and k.isalnum() for k in keys)


def healthy_experiment(exp_id: str, env: dict[str, str]) -> dict[str, Any]:
    """A multi-host experiment run that turned healthy, in the contract's form."""
    return {"id": exp_id, "env": env, "gpus": None, "verdict": "healthy", "stalled": None,
            "error": None, "elapsed_s": 9.5}  # fmt: skip


def test_an_interface_experiment_that_decides_is_the_cause(prog: types.ModuleType) -> None:
    out = MergedOutcome("hung", "pg_init", ["h1", "h2"], [0, 1], "h1: x; h2: y")
    env = {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}
    exp = healthy_experiment("ifname-eth0", env)
    r = run(out, "interface", experiments=[exp], decided_by="ifname-eth0")
    v = validate(multiverdict.build(r, prog))
    assert v["decided_by"] == "ifname-eth0" and v["failed_layer"] == "interface"
    assert [c["id"] for c in v["causes"]] == ["socket-interface"]
    assert "healthy with ifname-eth0 (1 experiment)" in summarize(v)


def test_gpu_direct_rdma_off_that_decides_is_its_own_cause(prog: types.ModuleType) -> None:
    """GDR off keeps InfiniBand: the cause is the NIC's access to GPU memory, not the IB path."""
    out = MergedOutcome("failed", "allreduce", ["h1", "h2"], [0, 1], "h1: x; h2: y")
    exp = healthy_experiment("gdr-off", {"NCCL_NET_GDR_LEVEL": "LOC"})
    r = run(out, "ib", experiments=[exp], decided_by="gdr-off")
    v = validate(multiverdict.build(r, prog))
    assert v["decided_by"] == "gdr-off" and v["failed_layer"] == "ib"
    assert [(c["id"], c["strategy"]) for c in v["causes"]] == [("gpu-direct-rdma", "nccl-profile")]


def test_multi_node_experiments_try_gdr_off_before_ib_off_once_data_moves() -> None:
    from gpufix.probe.multinode import plan

    data = MergedOutcome("hung", "allreduce", ["h2"], [1])
    assert plan(data, ["eth1"], True)[:3] == ["gdr-off", "ib-off", "ifname-eth1"]
    assert "gdr-off" not in plan(data, ["eth1"], False)  # no InfiniBand: no GPU Direct RDMA
    init = MergedOutcome("hung", "pg_init", ["h2"], [1])
    assert plan(init, ["eth1"], True) == ["ifname-eth1", "ib-off"]


def test_multi_node_nvlink_off_that_decides_is_its_own_cause(prog: types.ModuleType) -> None:
    out = MergedOutcome("failed", "pg_init", ["h1", "h2"], [0, 1], "h1: SIGSEGV; h2: x")
    exp = healthy_experiment("mnnvl-off", {"NCCL_MNNVL_ENABLE": "0"})
    r = run(out, merge.layer(out, "mnnvl-off", False), experiments=[exp], decided_by="mnnvl-off")
    v = validate(multiverdict.build(r, prog))
    assert v["decided_by"] == "mnnvl-off" and v["failed_layer"] == "collective"
    assert [(c["id"], c["strategy"]) for c in v["causes"]] == [("mnnvl", "nccl-profile")]


def gb200(name: str = "NVIDIA GB200") -> dict[str, Any]:
    f = facts("bionic-hwe-8xa100.json")
    for g in f["gpus"]:
        g["name"] = name
    return f


def test_multi_node_nvlink_off_is_tried_only_where_a_hosts_gpus_form_such_domains() -> None:
    """GB200/GB300 (gpu_models.yaml, multi_node_nvlink) and nowhere else; one such host is
    enough, since NCCL joins whichever GPUs share the domain."""
    from gpufix.probe.multinode import forms_multi_node_nvlink

    a100 = facts("bionic-hwe-8xa100.json")
    assert forms_multi_node_nvlink([gb200(), a100])
    assert forms_multi_node_nvlink([gb200("NVIDIA GB300"), gb200("NVIDIA GB300")])
    assert not forms_multi_node_nvlink([a100, gb200("NVIDIA B200")])
    assert not forms_multi_node_nvlink([a100, {"gpus": {"unknown": "no nvidia-smi"}}])
    assert nodes.gpu_names([gb200(), {"gpus": {"unknown": "x"}}]) == ["NVIDIA GB200"] * 8


def test_multi_node_nvlink_off_comes_first_at_init_and_in_collectives() -> None:
    from gpufix.probe.multinode import plan

    init = MergedOutcome("failed", "pg_init", ["h2"], [1])
    assert plan(init, ["eth1"], True, mnnvl=True) == ["mnnvl-off", "ifname-eth1", "ib-off"]
    assert "mnnvl-off" not in plan(init, ["eth1"], True)
    assert plan(init, ["eth1"], True, job_env=True, mnnvl=True)[:2] == ["job-env-off", "mnnvl-off"]
    for phase in ("barrier", "allreduce", "soak"):
        data = MergedOutcome("hung", phase, ["h2"], [1])
        assert plan(data, ["eth1"], True, mnnvl=True)[:3] == ["mnnvl-off", "gdr-off", "ib-off"]
        assert "mnnvl-off" not in plan(data, ["eth1"], True)
    store = MergedOutcome("hung", "rendezvous", ["h2"], [1])
    assert plan(store, ["eth1"], True, mnnvl=True) == []  # the store reads no NCCL setting


def h100(name: str = "NVIDIA H100 80GB HBM3", cap: str | None = "9.0") -> dict[str, Any]:
    """HGX H100 facts: the recorded HGX A100 (NVSwitch, NV12) with Hopper GPUs."""
    f = facts("bionic-hwe-8xa100.json")
    for g in f["gpus"]:
        g["name"] = name
        if cap is None:
            g.pop("compute_capability", None)
        else:
            g["compute_capability"] = cap
    return f


def test_nvlink_sharp_off_is_tried_only_where_a_host_has_nvlink_sharp() -> None:
    """NVLink SHARP needs third-generation NVSwitch (Hopper on): an HGX H100 has it, an HGX
    A100 (also NVSwitch) and PCIe cards do not; a capability read from the GPU's name counts
    (R470 facts carry none); GB200 racks have it too."""
    from gpufix.probe.multinode import nvlink_sharp

    a100 = facts("bionic-hwe-8xa100.json")
    assert nvlink_sharp([a100, h100()])
    assert nvlink_sharp([h100(cap=None), a100])
    assert nvlink_sharp([gb200(), a100])
    assert not nvlink_sharp([a100, a100])
    assert not nvlink_sharp([facts("focal-4x4090.json"), facts("noble-4x5090.json")])
    assert not nvlink_sharp([a100, {"gpus": {"unknown": "no nvidia-smi"}}])


def test_nvlink_sharp_off_comes_after_the_network_path() -> None:
    from gpufix.probe.multinode import plan

    init = MergedOutcome("failed", "pg_init", ["h2"], [1])
    assert plan(init, ["eth1"], True, nvls=True) == ["ifname-eth1", "ib-off", "nvls-off"]
    assert "nvls-off" not in plan(init, ["eth1"], True)
    data = MergedOutcome("hung", "allreduce", ["h2"], [1])
    todo = plan(data, ["eth1"], True, mnnvl=True, nvls=True)
    assert todo[:6] == ["mnnvl-off", "gdr-off", "ib-off", "ifname-eth1", "nvls-off", "proto-simple"]
    assert plan(MergedOutcome("hung", "rendezvous", ["h2"], [1]), ["eth1"], True, nvls=True) == []


def test_p2p_off_is_left_out_where_every_host_refuses_p2p() -> None:
    from gpufix.probe.multinode import p2p_refused_everywhere, plan

    # every pair CNS, NCCL 2.27.5 (follows NVML's P2P status from 2.19.1)
    refused = [facts("noble-4x5090.json"), facts("noble-4x5090.json")]
    assert p2p_refused_everywhere(refused)
    assert not p2p_refused_everywhere([*refused, facts("bionic-hwe-8xa100.json")])
    assert not p2p_refused_everywhere([refused[0], facts("focal-4x4090.json")])  # NCCL 2.18.1
    unread = facts("noble-4x5090.json")
    unread["p2p"] = {"unknown": "not read"}
    assert not p2p_refused_everywhere([refused[0], unread])
    data = MergedOutcome("hung", "allreduce", ["h2"], [1])
    assert "p2p-off" in plan(data, ["eth1"], False)
    assert "p2p-off" not in plan(data, ["eth1"], False, p2p_refused=True)
    assert "shm-off" in plan(data, ["eth1"], False, p2p_refused=True)


def test_the_soak_is_the_worst_hosts(prog: types.ModuleType) -> None:
    sweep = {"sizes": [1024, 4096], "iters": 5}
    r = run(MergedOutcome("hung", "soak", ["h2"], [1], "h2: stuck"), "collective")
    r.parts[0].verdict["soak"] = {**sweep, "verdict": "hung", "stalled_at_bytes": 4096}  # type: ignore[index]
    r.parts[1].verdict["soak"] = {**sweep, "verdict": "skipped", "stalled_at_bytes": None}  # type: ignore[index]
    v = validate(multiverdict.build(r, prog))
    assert v["soak"]["verdict"] == "hung" and v["soak"]["stalled_at_bytes"] == 4096
    assert "soak hung at 4096 bytes" in summarize(v)


def test_multi_node_experiments_take_the_job_settings_off_first() -> None:
    from gpufix.probe.multinode import plan

    init = MergedOutcome("hung", "pg_init", ["h2"], [1])
    assert plan(init, ["eth1"], False, job_env=True) == ["job-env-off", "ifname-eth1"]
    assert plan(init, ["eth1"], False) == ["ifname-eth1"]
    store = MergedOutcome("hung", "rendezvous", ["h2"], [1])
    assert plan(store, ["eth1"], False, job_env=True) == []  # the store reads no job setting


def test_a_multi_node_verdict_keeps_the_job_settings(prog: types.ModuleType) -> None:
    out = MergedOutcome("hung", "pg_init", ["h1", "h2"], [0, 1], "h1: x; h2: y")
    exp = healthy_experiment("job-env-off", {})
    r = run(out, "bootstrap", experiments=[exp], decided_by="job-env-off",
            job_env={"NCCL_SOCKET_IFNAME": "=eth9"})  # fmt: skip
    v = validate(multiverdict.build(r, prog))
    assert v["job_env"] == {"NCCL_SOCKET_IFNAME": "=eth9"}
    assert [(c["id"], c["strategy"]) for c in v["causes"]] == [("job-setting", "none")]


def test_multi_node_names_the_one_job_setting_that_breaks_it(
    prog: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller's experiment loop with a stand-in for the multi-host run (the podman test
    runs the real one): the interface setting hangs bootstrap wherever it is in the job's
    settings; after job-env-off each setting comes off alone until a run is healthy."""
    from gpufix.probe import multinode
    from gpufix.probe.options import ProbeOptions

    calls: list[tuple[tuple[str, ...], str | None]] = []

    def run_once(hosts: list[str], inv: Path, opts: ProbeOptions, *rest: Any) -> list[Part]:
        calls.append((opts.job_env, rest[1]))
        if "NCCL_SOCKET_IFNAME==eth9" in opts.job_env:
            return [part("h1", "hung", "pg_init"), part("h2", "hung", "pg_init", ranks=[1])]
        return [part("h1", "healthy"), part("h2", "healthy")]

    monkeypatch.setattr(multinode, "run_once", run_once)
    job = ("NCCL_ALGO=Ring", "NCCL_SOCKET_IFNAME==eth9")
    opts = ProbeOptions(job_env=job, experiment_budget=600)
    out = MergedOutcome("hung", "pg_init", ["h1", "h2"], [0, 1], "h1: x; h2: y")
    r = run(out, None, job_env=dict(i.partition("=")[::2] for i in job))
    todo = multinode.plan(out, ["eth1"], False, job_env=True)
    multinode._experiments(r, todo, Path("inv"), opts, "10.0.0.1", None)
    assert [(e["id"], e["verdict"]) for e in r.experiments] == [
        ("job-env-off", "healthy"),
        ("job-env-without-NCCL_ALGO", "hung"),
        ("job-env-without-NCCL_SOCKET_IFNAME", "healthy"),
    ]
    # each run hands the hosts the settings it keeps; none is one of the program's experiments
    kept = [((), None), (("NCCL_SOCKET_IFNAME==eth9",), None), (("NCCL_ALGO=Ring",), None)]
    assert calls == kept
    assert r.decided_by == "job-env-off" and r.job_env_culprit == "NCCL_SOCKET_IFNAME"
    r.layer = "bootstrap"
    v = validate(multiverdict.build(r, prog))
    assert v["job_env_culprit"] == "NCCL_SOCKET_IFNAME"
    assert [(c["id"], c["strategy"]) for c in v["causes"]] == [("job-setting", "none")]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"verdict": "hung", "stalled": "rendezvous"}, "stalled"),
        ({"node": "zzz"}, "node"),
        ({"allreduce": [{"bytes": "a", "seconds": "b"}]}, "allreduce/0"),
        # a string where ranks belong: `rank in "x"` was a TypeError in the merge
        (
            {"verdict": "hung", "stalled": {"phase": "rendezvous", "ranks": [2], "called": "x"}},
            "stalled/called",
        ),
        (
            {"verdict": "failed", "failed_in": {"phase": "pg_init", "ranks": [2], "called": "x"}},
            "failed_in/called",
        ),
    ],
)
def test_a_host_s_unusable_verdict_names_that_host(change: dict[str, Any], field: str) -> None:
    """A review (2026-12-05): each of these, printed by one host's probe, stopped gpufix with an
    internal error (AttributeError, ValueError) and no verdict. The host's verdict is checked
    against the probe's schema first, and that host alone is named."""
    from gpufix.probe.multinode import _checked

    good = json.loads((HOSTS.parents[2] / "docs/device/h200-probe-healthy.json").read_text())
    assert _checked("h1", good).verdict == good
    bad = _checked("h3", {**good, **change})
    assert bad.verdict is None
    assert bad.error.startswith(f"unusable verdict: h3's verdict: {field}"), bad.error
    out = merge.combine([Part("h1", good), bad])
    assert (out.verdict, out.hosts) == ("failed", ["h3"])


def test_hosts_that_would_start_different_numbers_of_ranks_are_refused() -> None:
    """A review (2026-12-05): h3 with gpufix_probe_world_size 1 beside hosts with 2 ranks each
    shared rank numbers with h2, and the run read as a blocked store (firewall)."""
    from gpufix.inventory import Target
    from gpufix.probe.multinode import check_same_ranks
    from gpufix.probe.options import ProbeOptions

    two, eight = facts("bionic-ga-2x3090.json"), facts("bionic-hwe-8xa100.json")
    hosts = [Target("h1", None, {}), Target("h2", None, {})]
    with pytest.raises(InvalidInput, match=r"different numbers of ranks \(h1 2, h2 8\)"):
        check_same_ranks(hosts, {"h1": two, "h2": eight}, ProbeOptions())
    check_same_ranks(hosts, {"h1": two, "h2": eight}, ProbeOptions(world_size=2))
    check_same_ranks(hosts, {"h1": two, "h2": two}, ProbeOptions())
    own = [Target("h1", None, {}), Target("h3", None, {"gpufix_probe_world_size": 1})]
    with pytest.raises(InvalidInput, match=r"\(h1 2, h3 1\)"):
        check_same_ranks(own, {"h1": two, "h3": two}, ProbeOptions(cpu=True))


def test_an_interrupted_run_stops_what_it_started_on_the_hosts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review (2026-12-05): after Ctrl-C the programs on every host ran on to their deadline,
    holding GPUs and the store's port. The interrupted run now stops them with its own key (a
    podman run: tests/probe/test_probe_multinode.py) and says where it could not."""
    from gpufix import runner
    from gpufix.probe.multinode import run_once
    from gpufix.probe.options import ProbeOptions

    calls: list[tuple[str, dict[str, Any]]] = []

    def interrupted_then_stopped(playbook: str, *args: Any, **kw: Any) -> runner.RunResult:
        calls.append((playbook, kw["extravars"]))
        if playbook == "probe_multinode.yml":
            raise KeyboardInterrupt
        hosts = {"h1": runner.HostResult("h1"), "h2": runner.HostResult("h2", "unreachable")}
        return runner.RunResult("x", 2, "failed", hosts)

    monkeypatch.setattr(runner, "run_playbook", interrupted_then_stopped)
    with pytest.raises(KeyboardInterrupt) as exc:
        run_once(["h1", "h2"], Path("inv"), ProbeOptions(), "10.0.0.1", None, 120, None)
    (run, run_vars), (stop, stop_vars) = calls
    assert (run, stop) == ("probe_multinode.yml", "probe_stop.yml")
    assert stop_vars == {"gpufix_probe_store_key": run_vars["gpufix_probe_store_key"]}
    assert exc.value.args[0] == (
        "interrupted: could not stop the probe programs on h2: they end by their own deadline "
        "(about 120 s, killed at their hard limit past it); until then port 29500 on 10.0.0.1 "
        "stays in use, and a new run on that port fails there (store-port-busy)"
    )


def test_a_second_interrupt_gives_up_stopping(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufix import runner
    from gpufix.probe.multinode import run_once
    from gpufix.probe.options import ProbeOptions

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_playbook", interrupted)
    with pytest.raises(KeyboardInterrupt) as exc:
        run_once(["h1", "h2"], Path("inv"), ProbeOptions(), "10.0.0.1", None, 120, None)
    assert exc.value.args[0].startswith("interrupted: could not stop the probe programs on h1, h2")


def test_ranks_per_host_on_cpu_is_what_the_role_starts() -> None:
    """The controller restates the role's --cpu default (roles/probe/vars/main.yml) to check
    every host starts as many ranks: the two must not drift apart."""
    import re

    from gpufix.inventory import Target
    from gpufix.probe.multinode import ranks_per_host
    from gpufix.probe.options import ProbeOptions

    role_vars = (Path(__file__).parents[2] / "roles" / "probe" / "vars" / "main.yml").read_text()
    m = re.search(r"\((\d+) if gpufix_probe_cpu \| bool else 0\)", role_vars)
    assert m, "the role's world-size expression changed: update ranks_per_host with it"
    host = Target("h1", None, {})
    assert ranks_per_host(host, None, ProbeOptions(cpu=True)) == int(m.group(1))
    assert ranks_per_host(Target("h1", None, {"gpufix_probe_cpu": True}), None, ProbeOptions()) == 2


def test_a_gloo_run_tries_no_nccl_setting_and_blames_no_nccl_transport(
    prog: types.ModuleType,
) -> None:
    """--cpu runs gloo, which reads no NCCL setting: the experiments that change one show
    nothing there, and a collective no experiment cleared is not NCCL's transport."""
    from gpufix.probe.multinode import plan

    data = MergedOutcome("hung", "allreduce", ["h1", "h2"], [0, 1], "x")
    todo = plan(data, ["eth1"], True, job_env=True, mnnvl=True, nvls=True, gloo=True)
    assert todo == ["job-env-off", "ifname-eth1"]
    assert "proto-simple" in plan(data, ["eth1"], True)  # an NCCL run keeps them
    for backend, causes in (("gloo", []), ("nccl", ["nccl-transport"])):
        r = run(data, "collective")
        r.parts = [
            part(h, "hung", "allreduce", ranks=[i], called=[i], backend=backend)
            for i, h in enumerate(("h1", "h2"))
        ]
        v = validate(multiverdict.build(r, prog))
        assert [c["id"] for c in v["causes"]] == causes


def test_the_merged_verdict_carries_the_stack_the_hosts_read(prog: types.ModuleType) -> None:
    """A review (2026-12-07): the merged verdict dropped the hosts' torch and NCCL readings, so
    the engine read a real multi-node probe as one whose training stack nobody knew."""
    out = MergedOutcome("hung", "rendezvous", ["h2"], [1], "h2: stuck")
    r = run(out, "rendezvous")
    r.parts[1].verdict["facts"] = {"torch": "2.5.1+cu124", "torch_cuda": "12.4", "nccl": "2.21.5"}
    v = validate(multiverdict.build(r, prog))
    assert v["facts"]["torch"] == "2.5.1+cu124" and v["facts"]["nccl"] == "2.21.5"
    assert v["facts"]["master"] == "10.0.0.1:29500"


def test_hosts_that_loaded_different_stacks_give_none_and_a_note(prog: types.ModuleType) -> None:
    """The same NCCL on every node is a fix of its own: a merged reading would hide it."""
    out = MergedOutcome("hung", "rendezvous", ["h2"], [1], "h2: stuck")
    r = run(out, "rendezvous")
    r.parts[0].verdict["facts"] = {"torch": "2.5.1+cu124", "torch_cuda": "12.4", "nccl": "2.21.5"}
    r.parts[1].verdict["facts"] = {"torch": "2.1.2+cu121", "torch_cuda": "12.1", "nccl": "2.18.1"}
    v = validate(multiverdict.build(r, prog))
    assert "torch" not in v["facts"] and "nccl" not in v["facts"]
    assert any("different stacks" in n and "h2: torch 2.1.2+cu121" in n for n in v["notes"])


def test_hostile_stack_readings_stay_text(prog: types.ModuleType) -> None:
    """Attack: a host's probe output names its torch and NCCL as a template and a command. The
    merge carries them as strings (a note quotes them), and the engine reads neither as a
    version."""
    from gpufix.engine.probe_facts import measured

    hostile = {"torch": "{{ lookup('pipe', 'id') }}", "nccl": "$(reboot)"}
    out = MergedOutcome("hung", "rendezvous", ["h2"], [1], "h2: stuck")
    r = run(out, "rendezvous")
    r.parts[0].verdict["facts"] = dict(hostile)
    v = validate(multiverdict.build(r, prog))
    assert v["facts"]["torch"] == hostile["torch"] and v["facts"]["nccl"] == hostile["nccl"]
    assert measured({**v, "backend": "nccl"}) == {}

    r = run(out, "rendezvous")
    r.parts[0].verdict["facts"] = dict(hostile)
    r.parts[1].verdict["facts"] = {"torch": "2.5.1+cu124", "nccl": "2.21.5"}
    v = validate(multiverdict.build(r, prog))
    assert "torch" not in v["facts"]
    assert any(hostile["torch"] in n for n in v["notes"])  # quoted, never rendered
