"""The decision engine over 10,000 generated snapshots (variations of the recorded hosts).

Prints hosts per second and peak memory, beside a baseline that only loads and validates the
same snapshots, so the engine's own cost shows as a ratio.
Run: .venv/bin/python bench/engine_bench.py [COUNT]
"""

from __future__ import annotations

import copy
import json
import random
import resource
import sys
import time
from pathlib import Path

from gpufix.engine.decide import decide
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.facts.snapshot import validate

HOSTS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hosts"
KERNELS = ["4.15.0-213-generic", "5.4.0-150-generic", "5.15.0-91-generic", "6.8.0-40-generic"]
DRIVERS = [
    "470.223.02",
    "515.105.01",
    "535.183.01",
    "545.29.06",
    "550.127.05",
    "565.57.01",
    "575.57.08",
    "580.95.05",
]
TORCH = [
    "1.12.1+cu113",
    "2.0.1+cu118",
    "2.1.2+cu121",
    "2.3.0+cu121",
    "2.6.0+cu124",
    "2.8.0+cu128",
    "2.9.0+cu130",
]


def variations(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    base = [json.loads(p.read_text()) for p in sorted(HOSTS.glob("*.json"))]
    out = []
    for i in range(count):
        doc = copy.deepcopy(rng.choice(base))
        f = doc["facts"]
        f["kernel"]["running"] = rng.choice(KERNELS)
        if isinstance(f["driver"], dict) and isinstance(f["driver"].get("kernel_module"), str):
            d = rng.choice(DRIVERS)
            f["driver"]["kernel_module"] = d
            f["driver"]["userspace"] = d if rng.random() > 0.05 else rng.choice(DRIVERS)
        for env in f.get("python_envs") or []:
            if isinstance(env.get("packages"), dict):
                env["packages"]["torch"] = rng.choice(TORCH)
        if isinstance(f.get("shm"), dict):
            f["shm"]["size_bytes"] = rng.choice([64 << 20, 1 << 30, 32 << 30])
        doc["host"] = f"gen{i:05d}"
        out.append(doc)
    return out


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    docs = variations(count)
    kb, rules = load(), load_rules()
    t0 = time.perf_counter()
    for d in docs:
        validate(d)
    t_base = time.perf_counter() - t0
    t0 = time.perf_counter()
    strategies: dict[str, int] = {}
    for d in docs:
        p = decide(d["facts"], None, kb=kb, rules=rules, host_name=d["host"])
        strategies[p.strategy] = strategies.get(p.strategy, 0) + 1
    t_engine = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"snapshots: {count}")
    print(f"baseline (schema validation only): {count / t_base:,.0f} hosts/s")
    print(f"decision engine:                   {count / t_engine:,.0f} hosts/s")
    print(f"ratio engine/baseline time:        {t_engine / t_base:.2f}x")
    print(f"peak RSS (whole process, snapshots held in memory): {peak_mib:.0f} MiB")
    print("strategies chosen:", dict(sorted(strategies.items())))


if __name__ == "__main__":
    main()
