"""Benchmark `gpufix lint` against plain `ast.parse` over the same files.

    .venv/bin/python bench/lint_bench.py [PATH] [--repeat N]

PATH defaults to the installed torch package (thousands of real files). Each pass reads every
file and parses it; the lint pass then runs the rules. The best of N passes is reported, since
the minimum is the least disturbed by other work on the machine; the ratio compares CPU
time, which shared cores disturb far less than wall time.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from gpufix.workload.lint import lint_source


def default_tree() -> str:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed: pass a PATH, or `.venv/bin/pip install torch==2.13.0`")
    return next(iter(spec.submodule_search_locations))


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) for one pass."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", help="tree to lint (default: the torch package)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    tree = args.path or default_tree()
    files = list(iter_python_files([tree]))
    total_bytes = sum(Path(f).stat().st_size for f in files)

    def baseline() -> None:
        for f in files:
            with contextlib.suppress(SyntaxError, ValueError):
                ast.parse(Path(f).read_bytes(), filename=f)

    findings: Counter[str] = Counter()

    def lint() -> None:
        findings.clear()
        for f in files:
            findings.update(x.rule for x in lint_source(Path(f).read_bytes(), f))

    # Passes alternate so that a burst of load elsewhere hits both sides alike; CPU time is
    # the figure to compare on a shared machine, wall time is shown for the record.
    base: list[tuple[float, float]] = []
    mine: list[tuple[float, float]] = []
    for _ in range(args.repeat):
        base.append(timed(baseline))
        mine.append(timed(lint))
    b_wall, b_cpu = min(w for w, _ in base), min(c for _, c in base)
    l_wall, l_cpu = min(w for w, _ in mine), min(c for _, c in mine)
    n = len(files)
    print(f"tree       {tree}")
    print(f"files      {n} ({total_bytes / 1e6:.1f} MB), best of {args.repeat}")
    print(f"ast.parse  cpu {b_cpu:.2f} s  {n / b_cpu:,.0f} files/s   (wall {b_wall:.2f} s)")
    print(f"gpufix     cpu {l_cpu:.2f} s  {n / l_cpu:,.0f} files/s   (wall {l_wall:.2f} s)")
    print(f"ratio      {l_cpu / b_cpu:.2f}x the CPU time of ast.parse alone")
    print(f"findings   {dict(sorted(findings.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
