"""Benchmark `gpufix lint` against plain `ast.parse` over the same files.

    .venv/bin/python bench/lint_bench.py [PATH] [--repeat N]

PATH defaults to the installed torch package (thousands of real files). The baseline reads
every file and parses it; the lint pass reads, parses and runs every check over the files as
one project, with every context checked (so installed code is not skipped). The best of N
passes is kept (the least disturbed by other work); the ratio compares CPU time, which shared
cores disturb far less than wall time. Both sides are printed side by side.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import inspect
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from gpufix.workload.lint import lint_files
from gpufix.workload.lint.config import CONTEXTS, LintConfig
from gpufix.workload.lint.discover import iter_python_files


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
    config = LintConfig(Path(tree), contexts=dict.fromkeys(CONTEXTS, "as-is"))
    paths = [(p, rel) for p, rel in iter_python_files([tree], config)]
    total_bytes = sum(Path(p).stat().st_size for p, _ in paths)

    def baseline() -> None:
        for p, _ in paths:
            with contextlib.suppress(SyntaxError, ValueError):
                ast.parse(Path(p).read_bytes(), filename=p)

    findings: Counter[str] = Counter()
    # A directory is linted, as `gpufix lint DIR` does (older checkouts, run side by side through
    # PYTHONPATH, have no `whole` parameter).
    whole = {"whole": True} if "whole" in inspect.signature(lint_files).parameters else {}

    def lint() -> None:
        findings.clear()
        files = [(p, rel, Path(p).read_bytes()) for p, rel in paths]
        findings.update(f.rule for f in lint_files(files, config, **whole).findings)

    # Passes alternate so that a burst of load elsewhere hits both sides alike.
    base: list[tuple[float, float]] = []
    mine: list[tuple[float, float]] = []
    for _ in range(args.repeat):
        base.append(timed(baseline))
        mine.append(timed(lint))
    b_wall, b_cpu = min(w for w, _ in base), min(c for _, c in base)
    l_wall, l_cpu = min(w for w, _ in mine), min(c for _, c in mine)
    n = len(paths)
    print(f"tree       {tree}")
    print(f"files      {n} ({total_bytes / 1e6:.1f} MB), best of {args.repeat}")
    print(f"{'':10} {'ast.parse':>14} {'gpufix lint':>14}")
    print(f"{'cpu s':10} {b_cpu:14.2f} {l_cpu:14.2f}")
    print(f"{'files/s':10} {n / b_cpu:14,.0f} {n / l_cpu:14,.0f}")
    print(f"{'wall s':10} {b_wall:14.2f} {l_wall:14.2f}")
    print(f"ratio      {l_cpu / b_cpu:.2f}x the CPU time of ast.parse alone (goal <= 1.30x)")
    print(f"findings   {dict(sorted(findings.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
