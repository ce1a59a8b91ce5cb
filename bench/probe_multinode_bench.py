"""`gpufix probe GROUP --multi-node` on two podman container hosts vs a bare two-process gloo
init + all-reduce over TCP between the same containers (started with `podman exec`, no Ansible).

    .venv/bin/python bench/probe_multinode_bench.py [--repeat 3]

Needs podman, nsenter and localhost/gpufix-bookworm:1 (tests/images/build.sh); uses the
containers of tests/probe/podman_hosts.py (torch bind-mounted read-only). Prints the medians, the
best runs and the ratio, and how the probe's time splits (facts gathering, the hosts' own probe
programs, the rest: Ansible); asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "probe"))
from podman_hosts import Hosts, new_hosts, torch_dir  # noqa: E402

BARE = """
import datetime, os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://%s:%s" % (sys.argv[3], sys.argv[4]),
                        rank=int(sys.argv[1]), world_size=int(sys.argv[2]),
                        timeout=datetime.timedelta(seconds=60))
dist.all_reduce(torch.ones(1))
dist.barrier()
dist.all_reduce(torch.ones(1 << 18))
dist.destroy_process_group()
"""


def bare(h: Hosts, port: int) -> float:
    addr = h.addr["h1"][h.nets[0]]
    t0 = time.monotonic()
    procs = []
    for rank, name in enumerate(h.names):
        iface = h.ifname[name][h.nets[0]]
        env = ["-e", "PYTHONPATH=/opt/gpufix-torch", "-e", f"GLOO_SOCKET_IFNAME={iface}"]
        cmd = ["python3", "-c", BARE, str(rank), "2", addr, str(port)]
        procs.append(
            subprocess.Popen(
                ["podman", "exec", *env, h.container(name), *cmd],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        )
    for p in procs:
        _, err = p.communicate(timeout=300)
        if p.returncode:
            raise SystemExit(f"bare run failed: {err.decode()[-500:]}")
    return time.monotonic() - t0


def probe(inventory: Path, *args: str) -> tuple[float, dict]:
    gpufix = str(ROOT / ".venv" / "bin" / "gpufix")
    t0 = time.monotonic()
    fixed = ["--multi-node", "--json", "--cpu", "--world-size", "1", "--import-deadline", "120"]
    proc = subprocess.run(
        [gpufix, "probe", "pair", "-i", str(inventory), *fixed, *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    elapsed = time.monotonic() - t0
    if not proc.stdout.startswith("{"):
        raise SystemExit(f"gpufix probe gave no verdict: {proc.stderr[-800:]}")
    return elapsed, json.loads(proc.stdout)


def programs_s(v: dict) -> float:
    """The longest host's probe program, from its phase records (its own clock)."""
    ends: dict[str, float] = {}
    for p in v["phases"]:
        ends[p["host"]] = max(ends.get(p["host"], 0.0), p["end"] or p["start"])
    return max(ends.values(), default=0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ns = ap.parse_args()
    h = new_hosts(2)
    print(
        f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; two podman containers, "
        f"gloo over TCP on CPU; {ns.repeat} runs each"
    )
    try:
        h.start(torch_dir())
        with tempfile.TemporaryDirectory() as tmp:
            inv = h.inventory(Path(tmp) / "inventory.yml")
            bares, probes, inside = [], [], []
            for i in range(ns.repeat):
                bares.append(bare(h, 29600 + i))
                t, v = probe(inv, "--phase-deadline", "20")
                if v["verdict"] != "healthy":
                    raise SystemExit(f"probe not healthy: {v['error']}")
                probes.append(t)
                inside.append(programs_s(v))
            b, p = statistics.median(bares), statistics.median(probes)
            print(
                f"{'bare gloo init + all-reduce (podman exec)':44} {b:7.2f} s  best {min(bares):.2f} s"
            )
            print(
                f"{'gpufix probe --multi-node (facts + playbook)':44} {p:7.2f} s  best "
                f"{min(probes):.2f} s  ratio {p / b:.2f}x"
            )
            print(
                f"{'  of which the hosts probe programs':44} {statistics.median(inside):7.2f} s  "
                f"ratio {statistics.median(inside) / b:.2f}x of bare"
            )
            ifname = h.ifname["h1"][h.nets[0]]
            h.firewall(
                "h1", "-A", "INPUT", "-i", ifname, "-p", "tcp", "--dport", "29500", "-j", "DROP"
            )
            t, v = probe(inv, "--phase-deadline", "8", "--deadline", "150")
            print(
                f"{'rendezvous port blocked, to the verdict':44} {t:7.2f} s  ({v['failed_layer']} "
                f"on {v['failed_hosts']}; the first host waits up to the phase + import deadlines)"
            )
    finally:
        h.remove()
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
