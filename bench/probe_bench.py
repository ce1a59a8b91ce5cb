"""Benchmark the probe on CPU (gloo): supervision overhead and time from a stall to a verdict.

    .venv/bin/python bench/probe_bench.py [--world-size 2] [--repeat 3]

Prints figures and ratios; asserts nothing. Figures for docs/probe.md.
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

from gpufix.probe import program_path

# The same work as the probe's main run, unsupervised: import, init, barrier, all-reduces at the
# probe's CPU sizes, destroy; one plain process per rank.
BARE = """
import datetime, os, sys, time
import torch, torch.distributed as dist
rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
dist.all_reduce(torch.ones(1))
dist.barrier()
for nbytes in (1 << 16, 1 << 20, 1 << 23):
    t = torch.ones(nbytes // 4)
    for _ in range(6):
        dist.all_reduce(t)
dist.destroy_process_group()
print(time.monotonic(), flush=True)  # done, before the interpreter's own teardown
"""


def bare_run(world: int) -> tuple[float, float]:
    """Seconds until every rank finished destroy, and until every process exited."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, "bare.py")
        script.write_text(BARE)
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
        t0 = time.monotonic()
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), str(r), str(world), str(Path(tmp, "store"))],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for r in range(world)
        ]
        ends = [float(p.communicate(timeout=120)[0]) for p in procs]
        exited = time.monotonic() - t0
    if any(p.returncode for p in procs):
        raise SystemExit("bare run failed")
    return max(ends) - t0, exited


def probe_run(args: list[str], fault: str | None = None) -> tuple[float, dict]:
    env = dict(os.environ)
    env.pop("GPUFIX_PROBE_FAULT", None)
    if fault:
        env["GPUFIX_PROBE_FAULT"] = fault
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(program_path()), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - t0
    return elapsed, json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--phase-deadline", type=float, default=3.0)
    ns = ap.parse_args()
    w = str(ns.world_size)
    print(
        f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}"
    )

    bare, bare_exit, supervised, with_single = [], [], [], []
    for _ in range(ns.repeat):
        done, exited = bare_run(ns.world_size)
        bare.append(done)
        bare_exit.append(exited)
        t, v = probe_run(["--cpu", "--world-size", w, "--no-single-gpu", "--no-p2p-rerun"])
        assert v["verdict"] == "healthy", v["verdict"]
        supervised.append(t)
        t, v = probe_run(["--cpu", "--world-size", w])
        with_single.append(t)
    # Other work on a shared machine adds noise to every run: the minimum is the fairest figure.
    b, s, s1 = (min(x) for x in (bare, supervised, with_single))
    print(
        f"healthy, {w} ranks, best of {ns.repeat} (medians {statistics.median(bare):.2f} / "
        f"{statistics.median(supervised):.2f} / {statistics.median(with_single):.2f} s):"
    )
    print(f"  bare init+barrier+all-reduce     {b:6.2f} s   (to the last rank's destroy)")
    print(f"  bare, until every process exited {min(bare_exit):6.2f} s")
    print(f"  probe (no single-GPU baseline)   {s:6.2f} s   ratio {s / b:4.2f}x  (aim <= 1.5x)")
    print(f"  probe (with baseline, default)   {s1:6.2f} s   ratio {s1 / b:4.2f}x")

    pd = ns.phase_deadline
    late = []
    for _ in range(ns.repeat):
        args = ["--cpu", "--world-size", w, "--no-single-gpu", "--no-p2p-rerun"]
        _, v = probe_run(
            [*args, "--phase-deadline", str(pd), "--deadline", "60"], "stall:barrier:1"
        )
        entered = next(
            p["start"] for p in v["phases"] if p["phase"] == "barrier" and p["rank"] == 1
        )
        late.append(v["duration_s"] - entered)
    print(f"stall in barrier on rank 1, phase deadline {pd} s, median of {ns.repeat}:")
    print(
        f"  stall to verdict                 {statistics.median(late):6.2f} s   "
        f"over the deadline by {statistics.median(late) - pd:4.2f} s  (aim <= 1 s)"
    )

    dl = 8.0
    args = ["--cpu", "--world-size", w, "--no-single-gpu", "--phase-deadline", "60"]
    t, v = probe_run([*args, "--deadline", str(dl)], "stall:barrier:1")
    print(
        f"whole-probe deadline {dl} s with a stall: verdict {v['verdict']} "
        f"({v['stalled'].get('by')}) after {t:.2f} s wall, over by {t - dl:4.2f} s"
    )


if __name__ == "__main__":
    main()
