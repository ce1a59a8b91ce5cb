"""Finding the calls of a tree: `stmts.calls_in` against `ast.walk` filtered to calls.

    .venv/bin/python bench/walk_bench.py [PATH] [--repeat N]

PATH defaults to the installed torch package. Every file is parsed once, outside the timing;
then each side finds every call of every tree. Best of N, CPU seconds, side by side; both sides
must find the same number of calls.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gpufix.workload.lint.stmts import calls_in


def _walk_calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _best(work: Callable[[], int], repeat: int) -> tuple[float, int]:
    best, found = float("inf"), 0
    for _ in range(repeat):
        start = time.process_time()
        found = work()
        best = min(best, time.process_time() - start)
    return best, found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", help="tree to read (default: the torch package)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if args.path:
        root = Path(args.path)
    else:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            sys.exit("torch is not installed: pass a PATH")
        root = Path(spec.origin).parent
    trees = []
    for p in sorted(root.rglob("*.py")):
        with contextlib.suppress(SyntaxError, ValueError, OSError):
            trees.append(ast.parse(p.read_bytes()))
    walk_s, walk_n = _best(lambda: sum(len(_walk_calls(t)) for t in trees), args.repeat)
    fast_s, fast_n = _best(lambda: sum(len(calls_in(t)) for t in trees), args.repeat)
    print(f"tree       {root} ({len(trees)} files), best of {args.repeat}")
    print(f"{'':10} {'ast.walk':>12} {'calls_in':>12}")
    print(f"{'cpu s':10} {walk_s:12.2f} {fast_s:12.2f}")
    print(f"{'calls':10} {walk_n:12} {fast_n:12}")
    print(f"ratio      calls_in takes {fast_s / walk_s:.2f}x the CPU time of ast.walk")
    return 0 if walk_n == fast_n else 1


if __name__ == "__main__":
    sys.exit(main())
