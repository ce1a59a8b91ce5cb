"""`gpufix plan GROUP` over N podman hosts vs bare `ansible GROUP -m setup` on the same hosts.

Prints one row per N with both wall times and their ratio (goal: at most 1.3x). Needs podman
and the image from tests/images/build.sh. Run: .venv/bin/python bench/plan_bench.py [N ...]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import containers  # noqa: E402

IMAGE = containers.IMAGE
BIN = ROOT / ".venv" / "bin"
REPEAT = 3


def start(n: int) -> list[str]:
    names = [f"gpufix-bench-{uuid.uuid4().hex[:6]}-{i}" for i in range(n)]
    for name in names:
        containers.start(name, IMAGE)
    return names


def inventory(names: list[str], path: Path) -> None:
    lines = ["all:", "  children:", "    bench:", "      hosts:"]
    for n in names:
        lines += [
            f"        {n}:",
            "          ansible_connection: containers.podman.podman",
            "          ansible_python_interpreter: /usr/bin/python3",
        ]
    path.write_text("\n".join(lines) + "\n")


def timed(cmd: list[str]) -> float:
    env = dict(
        os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}"
    )
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    dt = time.perf_counter() - t
    if r.returncode not in (0, 2):
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-500:]}")
    return dt


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1, 4, 8]
    print(f"machine: {os.cpu_count()} cores; forks: ansible.cfg default; median of {REPEAT} runs")
    print(f"{'N':>3}  {'ansible -m setup':>17}  {'gpufix plan':>12}  {'ratio':>6}")
    for n in sizes:
        names = start(n)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                inv = Path(tmp) / "hosts.yml"
                inventory(names, inv)
                base = [
                    timed([str(BIN / "ansible"), "bench", "-i", str(inv), "-m", "setup"])
                    for _ in range(REPEAT)
                ]
                plan = [
                    timed([str(BIN / "gpufix"), "plan", "bench", "-i", str(inv), "--json"])
                    for _ in range(REPEAT)
                ]
            b, p = statistics.median(base), statistics.median(plan)
            print(f"{n:>3}  {b:>16.2f}s  {p:>11.2f}s  {p / b:>5.2f}x")
        finally:
            containers.remove(*names)


if __name__ == "__main__":
    main()
