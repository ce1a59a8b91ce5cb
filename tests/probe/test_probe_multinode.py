"""`gpufix probe GROUP --multi-node` end to end on two podman containers, through the real CLI,
ansible-runner and playbooks/probe_multinode.yml: gloo over TCP on CPU between the containers.

Two containers, not more: each run imports torch in every container and drives them through
Ansible on a 2-core machine. The faults are real network ones: an iptables rule in one
container's namespace drops the rendezvous port, or drops everything on the second network while
the ranks are told to use that network's interface.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import containers
import pytest
from podman_hosts import IMAGE, Hosts, new_hosts, sh, torch_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PORT = 29500
FAST = ["--cpu", "--world-size", "1", "--phase-deadline", "8", "--import-deadline", "90"]


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    if shutil.which("podman") is None or shutil.which("nsenter") is None:
        containers.unavailable("needs podman and nsenter")
    if subprocess.run(["podman", "image", "exists", IMAGE]).returncode != 0:
        containers.unavailable(f"{IMAGE} missing: run tests/images/build.sh")
    h = new_hosts(2)
    try:
        h.start(torch_dir())
        yield h
    finally:
        h.remove()


@pytest.fixture
def inventory(hosts: Hosts, tmp_path: Path) -> Iterator[Path]:
    yield hosts.inventory(tmp_path / "inventory.yml")
    for name in hosts.names:
        hosts.flush(name)


def gpufix_probe(inventory: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    gpufix = str(Path(sys.executable).with_name("gpufix"))
    proc = subprocess.run(
        [gpufix, "probe", "pair", "-i", str(inventory), "--multi-node", "--json", *FAST, *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.stdout.startswith("{"), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_two_hosts_meet_and_all_reduce(inventory: Path) -> None:
    code, v, err = gpufix_probe(inventory, "--deadline", "120")

    assert code == 0, err
    assert (v["verdict"], v["scope"], v["hosts"]) == ("healthy", "multi-node", ["h1", "h2"])
    assert v["world_size"] == 2 and v["backend"] == "gloo"
    assert v["failed_layer"] is None and v["failed_hosts"] == [] and v["experiments"] == []
    assert {(p["host"], p["rank"]) for p in v["phases"] if p["phase"] == "rendezvous"} == {
        ("h1", 0),
        ("h2", 1),
    }
    assert v["allreduce"] and v["allreduce"][0]["busbw_gbps"] > 0


def test_a_blocked_rendezvous_port_names_the_layer_and_the_host(
    hosts: Hosts, inventory: Path
) -> None:
    # The first host drops the store's port on the network the others reach it by.
    ifname = hosts.ifname["h1"][hosts.nets[0]]
    hosts.firewall(
        "h1", "-A", "INPUT", "-i", ifname, "-p", "tcp", "--dport", str(PORT), "-j", "DROP"
    )
    code, v, err = gpufix_probe(inventory, "--deadline", "90")

    assert code == 5, err
    assert v["verdict"] == "hung"
    assert (v["failed_layer"], v["failed_hosts"]) == ("rendezvous", ["h2"])
    assert v["stalled"] == {"phase": "rendezvous", "ranks": [1], "hosts": ["h2"]}
    assert v["experiments"] == []  # no NCCL or interface knob changes the store's address
    assert [c["id"] for c in v["causes"]] == ["rendezvous-unreachable"]
    assert v["facts"]["master"] == f"{hosts.addr['h1'][hosts.nets[0]]}:{PORT}"


def test_a_wrong_interface_is_found_by_an_interface_experiment(
    hosts: Hosts, inventory: Path
) -> None:
    # The ranks are told to use the second network, which the second host drops entirely.
    good, bad = (hosts.ifname["h2"][n] for n in hosts.nets)
    assert hosts.ifname["h1"][hosts.nets[1]] == bad  # same name on both hosts
    hosts.firewall("h2", "-A", "INPUT", "-i", bad, "-j", "DROP")
    code, v, err = gpufix_probe(inventory, "--deadline", "90", "--ifname", bad)

    assert code == 5, err
    assert v["verdict"] == "hung" and v["stalled"]["phase"] == "pg_init", json.dumps(v)[:6000]
    assert [(e["id"], e["verdict"]) for e in v["experiments"]] == [(f"ifname-{good}", "healthy")]
    assert v["experiments"][0]["env"] == {
        "NCCL_SOCKET_IFNAME": good,
        "GLOO_SOCKET_IFNAME": good,
    }
    assert (v["decided_by"], v["failed_layer"]) == (f"ifname-{good}", "interface")
    assert v["failed_hosts"] == ["h1", "h2"]  # every rank reached the call: both ends
    assert [c["id"] for c in v["causes"]] == ["socket-interface"]


def test_the_job_setting_that_breaks_it_is_found_across_the_hosts(inventory: Path) -> None:
    """The job's settings: an interface name no host has (gloo cannot start its group) and a
    harmless one that sorts first. job-env-off is healthy, then each comes off alone across
    both hosts: without the harmless one the group still fails, without the interface it forms."""
    job = ["--job-env", "GLOO_A=1", "--job-env", "GLOO_SOCKET_IFNAME=gpufixnone0"]
    code, v, err = gpufix_probe(inventory, "--deadline", "90", *job)

    assert code == 5, err
    assert v["verdict"] == "failed" and v["failed_in"]["phase"] == "pg_init", json.dumps(v)[:6000]
    assert v["job_env"] == {"GLOO_A": "1", "GLOO_SOCKET_IFNAME": "gpufixnone0"}
    assert [(e["id"], e["verdict"]) for e in v["experiments"]] == [
        ("job-env-off", "healthy"),
        ("job-env-without-GLOO_A", "failed"),
        ("job-env-without-GLOO_SOCKET_IFNAME", "healthy"),
    ]
    assert (v["decided_by"], v["job_env_culprit"]) == ("job-env-off", "GLOO_SOCKET_IFNAME")
    assert [c["id"] for c in v["causes"]] == ["job-setting"]


def running(hosts: Hosts, host: str, key: str) -> list[str]:
    """The probe's processes on a host, found by the option that carries the run's key."""
    out = sh("podman", "exec", hosts.container(host), "pgrep", "-af", "--", key, check=False)
    return [ln for ln in out.splitlines() if ln.strip() and "gpufix_probe" in ln]


def probe_programs(hosts: Hosts, host: str) -> list[str]:
    return running(hosts, host, "--store-key")


def interrupt_once(argv: list[str], started: Callable[[], bool]) -> tuple[int, str]:
    """Run gpufix, send it SIGINT once `started()` says its programs run on the hosts."""
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 180
        while not started():
            assert proc.poll() is None and time.monotonic() < deadline, "the probe never started"
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, err


def left_after(left: Callable[[], Any]) -> Any:
    """What `left()` still finds after up to 10 s (the stopped programs take a moment)."""
    for _ in range(20):
        if not left():
            break
        time.sleep(0.5)
    return left()


def test_an_interrupted_run_stops_its_programs_on_the_hosts(hosts: Hosts, inventory: Path) -> None:
    """Ctrl-C (SIGINT) while every host's ranks wait at a store the first host drops: before,
    the programs ran on to their deadline on every host, holding the port; now gpufix stops
    them through playbooks/probe_stop.yml and says so."""
    ifname = hosts.ifname["h1"][hosts.nets[0]]
    hosts.firewall(
        "h1", "-A", "INPUT", "-i", ifname, "-p", "tcp", "--dport", str(PORT), "-j", "DROP"
    )
    gpufix = str(Path(sys.executable).with_name("gpufix"))
    argv = [gpufix, "probe", "pair", "-i", str(inventory), "--multi-node", "--json", *FAST]
    code, err = interrupt_once(
        [*argv, "--deadline", "240"],
        lambda: all(probe_programs(hosts, h) for h in hosts.names),
    )
    assert code == 130, err[-2000:]
    assert "gpufix: interrupted: stopped the probe programs on h1, h2" in err
    assert left_after(lambda: [p for h in hosts.names for p in probe_programs(hosts, h)]) == []


def test_an_interrupted_host_probe_stops_its_program_on_the_host(
    hosts: Hosts, inventory: Path
) -> None:
    """`gpufix probe h1` (one host, through ansible's script module) interrupted mid-run: the
    program and its workers on h1 are stopped by the run's --run-id (tests/probe/test_probe_stop.py
    has the unit tests)."""
    # the training interpreter: python3 with the mounted torch on its path
    wrapper = '#!/bin/sh\nPYTHONPATH=/opt/gpufix-torch exec /usr/bin/python3 "$@"\n'
    box = hosts.container("h1")
    write = "mkdir -p /opt/gpy && printf '%s' '" + wrapper + "' > /opt/gpy/python3"
    sh("podman", "exec", box, "sh", "-c", write + " && chmod 755 /opt/gpy/python3")
    gpufix = str(Path(sys.executable).with_name("gpufix"))
    argv = [
        gpufix, "probe", "h1", "-i", str(inventory), "--python", "/opt/gpy/python3", "--cpu",
        "--world-size", "2", "--no-experiments", "--soak", "--soak-iters", "100000",
        "--deadline", "240", "--json",
    ]  # fmt: skip
    # the probe and its two workers
    code, err = interrupt_once(argv, lambda: len(running(hosts, "h1", "--run-id")) >= 3)
    assert code == 130, err[-2000:]
    assert "gpufix: interrupted: stopped the probe programs on h1" in err
    assert left_after(lambda: running(hosts, "h1", "--run-id")) == []
