"""The probe with experiments on a broken host (CPU, gloo, the test-only fault switch) vs the bare
main run: what finding the cause costs on top of finding the hang.

    .venv/bin/python bench/probe_experiments_bench.py [--repeat 3] [--phase-deadline 3]

Cases, each timed to the verdict (wall, the program started as a user would):
  main run only        2 ranks, a stall in pg_init, --no-experiments (the baseline)
  knob decides         the same stall, cleared only under NCCL_SHM_DISABLE=1: the default plan
                       runs p2p-off (hangs), then shm-off (healthy) and stops
  budget runs out      a stall no knob clears, --experiment-budget B: every knob tried or skipped
  pairs find the GPU   3 ranks, a stall whenever GPU 2 takes part, the three pairs only
and, for scale, a bare script doing init + one all-reduce on a healthy host. Prints medians, best
runs and ratios against the main run only; asserts nothing.
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

BARE = """
import datetime, sys
import torch, torch.distributed as dist
rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
dist.all_reduce(torch.ones(1))
dist.destroy_process_group()
"""


def bare(world: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, "bare.py")
        script.write_text(BARE)
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
        t0 = time.monotonic()
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), str(r), str(world), str(Path(tmp, "store"))],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for r in range(world)
        ]
        for p in procs:
            p.wait(timeout=120)
        return time.monotonic() - t0


def probe(args: list[str], fault: str) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUFIX_PROBE", "NCCL_"))}
    env["GPUFIX_PROBE_FAULT"] = fault
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(program_path()), "--cpu", "--no-single-gpu", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return time.monotonic() - t0, json.loads(proc.stdout)


def describe(v: dict) -> str:
    runs = [f"{e['id']}={e['verdict']}" for e in v["experiments"]]
    found = v["decided_by"] or (v.get("suspects") or {}) or "nothing"
    return f"{v['verdict']}, {len(runs)} experiments ({', '.join(runs) or '-'}) -> {found}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--phase-deadline", type=float, default=3.0)
    ap.add_argument("--budget", type=float, default=30.0)
    ns = ap.parse_args()
    pd = str(ns.phase_deadline)
    common = ["--phase-deadline", pd, "--import-deadline", "60", "--deadline", "120"]
    stall_pg = "stall:pg_init:*"
    cases = [
        ("main run only", ["--world-size", "2", "--no-experiments"], stall_pg),
        (
            "knob decides (shm-off)",
            ["--world-size", "2", "--experiment-budget", "300"],
            stall_pg + ";unless=NCCL_SHM_DISABLE=1",
        ),
        (
            f"budget runs out ({ns.budget:.0f} s)",
            ["--world-size", "2", "--experiment-budget", str(ns.budget)],
            stall_pg,
        ),
        (
            "pairs find the GPU (3 ranks)",
            ["--world-size", "3", "--experiments", "gpus-0-1,gpus-0-2,gpus-1-2"],
            stall_pg + ";gpus=2",
        ),
    ]
    print(
        f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
        f"python {sys.version.split()[0]}; phase deadline {pd} s; {ns.repeat} runs each"
    )
    floor = [bare(2) for _ in range(ns.repeat)]
    times: dict[str, list[float]] = {}
    last: dict[str, dict] = {}
    for _ in range(ns.repeat):
        for name, args, fault in cases:
            t, v = probe([*common, *args], fault)
            times.setdefault(name, []).append(t)
            last[name] = v
    base = statistics.median(times["main run only"])
    print(f"{'case':34} {'median':>8} {'best':>8} {'ratio':>7}  verdict")
    print(f"{'bare init + all-reduce (healthy)':34} {statistics.median(floor):7.2f}s "
          f"{min(floor):7.2f}s {statistics.median(floor) / base:6.2f}x  (for scale)")  # fmt: skip
    for name, _, _ in cases:
        med = statistics.median(times[name])
        print(
            f"{name:34} {med:7.2f}s {min(times[name]):7.2f}s {med / base:6.2f}x  {describe(last[name])}"
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
