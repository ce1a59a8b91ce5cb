"""Recall of `gpufix lint` on minimal reconstructions of public bug reports (tests/lint_corpus).

    .venv/bin/python bench/lint_recall.py [--split dev|test|all] [--show-misses]

Each case is a directory with case.yaml (source URL, class = the rule that should fire) and
Python files whose `# expect: GPFxxx` markers say where. The split is fixed by the URL:
int(sha256(url).hexdigest(), 16) % 3 == 0 -> test, else dev. A case counts as found when every
marker is matched by a finding of that rule on that line (default settings, the case directory
as the project root). Findings without a marker are listed as extras.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from gpufix.workload.lint import lint_paths
from gpufix.workload.lint.config import LintConfig

CORPUS = Path(__file__).parents[1] / "tests" / "lint_corpus"
EXPECT = re.compile(r"#\s*expect:\s*(GPF\d{3})")


def split_of(url: str) -> str:
    return "test" if int(hashlib.sha256(url.encode()).hexdigest(), 16) % 3 == 0 else "dev"


@dataclass
class Case:
    path: Path
    source: str
    cls: str
    title: str
    expected: set[tuple[str, int, str]] = field(default_factory=set)

    @property
    def split(self) -> str:
        return split_of(self.source)


def load_cases(root: Path = CORPUS) -> list[Case]:
    cases = []
    for meta in sorted(root.glob("*/case.yaml")):
        doc = yaml.safe_load(meta.read_text())
        case = Case(meta.parent, doc["source"], doc["class"], doc["title"])
        for py in sorted(meta.parent.rglob("*.py")):
            rel = py.relative_to(meta.parent).as_posix()
            for n, line in enumerate(py.read_text().splitlines(), start=1):
                case.expected.update((rel, n, rule) for rule in EXPECT.findall(line))
        cases.append(case)
    return cases


def run_case(case: Case) -> tuple[set[tuple[str, int, str]], set[tuple[str, int, str]]]:
    """(missed markers, extra findings)."""
    # The case directory is the project root (not this repository, whose tests/ it sits in).
    result = lint_paths([str(case.path)], LintConfig(case.path))
    found = {
        (Path(f.path).relative_to(case.path).as_posix(), f.line, f.rule) for f in result.findings
    }
    return case.expected - found, found - case.expected


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all")
    ap.add_argument("--show-misses", action="store_true")
    args = ap.parse_args(argv)
    totals: Counter[tuple[str, str]] = Counter()
    hits: Counter[tuple[str, str]] = Counter()
    notes = []
    for case in load_cases():
        if args.split != "all" and case.split != args.split:
            continue
        missed, extra = run_case(case)
        totals[(case.cls, case.split)] += 1
        if not missed:
            hits[(case.cls, case.split)] += 1
        elif args.show_misses:
            notes.append(f"MISS  {case.split:4} {case.path.name}: {sorted(missed)}")
        if extra and args.show_misses:
            notes.append(f"EXTRA {case.split:4} {case.path.name}: {sorted(extra)}")
    splits = ("dev", "test") if args.split == "all" else (args.split,)
    print(f"{'class':7} " + " ".join(f"{s + ' found/cases':>18} {'recall':>6}" for s in splits))
    for cls in sorted({c for c, _ in totals}):
        cells = []
        for s in splits:
            n, k = totals[(cls, s)], hits[(cls, s)]
            cells.append(f"{f'{k}/{n}':>18} {f'{k / n:.0%}' if n else '-':>6}")
        print(f"{cls:7} " + " ".join(cells))
    cells = []
    for s in splits:
        n = sum(v for (_, sp), v in totals.items() if sp == s)
        k = sum(v for (_, sp), v in hits.items() if sp == s)
        cells.append(f"{f'{k}/{n}':>18} {f'{k / n:.0%}' if n else '-':>6}")
    print(f"{'all':7} " + " ".join(cells))
    for line in notes:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
