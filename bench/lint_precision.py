"""Precision of `gpufix lint` on public training repositories, from hand judgements.

    .venv/bin/python bench/lint_precision.py [--root DIR] [--show unjudged|fp|all]

Reads bench/lint_repos.txt (owner/name@commit) and lints each tree under ROOT/owner+name (made
once with bench/lint_extract.py; nothing is fetched here) with default settings, as a user would
run it in that repository. Each finding is matched to bench/lint_judgements.tsv (rule, repo,
path, line, TP|FP, reason); the table prints findings, TP, FP, unjudged and precision per rule.
A finding nobody judged is listed and counted as unjudged, never as right. A judged row that
no finding matches any more (the rule went quiet there, or the line moved) is counted apart and
listed with --show gone: a judged TP that is gone is a loss of recall on real code.

A second table counts distinct findings: the same rule on the same line of byte-identical file
content (a repository's copy of itself, an example copied into three directories, one file in two
repositories) is counted once, with the verdict of its first occurrence.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import sys
from collections import Counter
from pathlib import Path

from gpufix.workload.lint import lint_paths
from gpufix.workload.lint.config import load_config
from gpufix.workload.lint.rules import RULES

HERE = Path(__file__).parent
GOAL = 0.90


def read_repos(path: Path) -> list[tuple[str, str]]:
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            repo, commit = line.split("@")
            out.append((repo, commit))
    return out


def read_judgements(path: Path) -> dict[tuple[str, str, str, int], tuple[str, str]]:
    out = {}
    with path.open() as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            key = (row["rule"], row["repo"], row["path"], int(row["line"]))
            out[key] = (row["verdict"], row["reason"])
    return out


def distinct_counts(
    findings: list[tuple[str, str, int, str]],
) -> dict[str, Counter[str]]:
    """Per rule, verdict counts over distinct findings: (rule, content digest, line) counted once,
    with the verdict of its first occurrence."""
    seen: set[tuple[str, str, int]] = set()
    out: dict[str, Counter[str]] = {}
    for rule, digest, line, verdict in findings:
        if (rule, digest, line) not in seen:
            seen.add((rule, digest, line))
            out.setdefault(rule, Counter())[verdict] += 1
    return out


def digest(path: str, cache: dict[str, str]) -> str:
    if path not in cache:
        cache[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return cache[path]


def print_table(counts: dict[str, Counter[str]]) -> None:
    print(f"{'rule':7} {'findings':>8} {'TP':>4} {'FP':>4} {'unjudged':>8} {'precision':>9}  goal")
    for rule, c in counts.items():
        n = sum(c.values())
        if not n:
            continue
        judged_n = c["TP"] + c["FP"]
        prec = f"{c['TP'] / judged_n:.0%}" if judged_n else "-"
        print(f"{rule:7} {n:8} {c['TP']:4} {c['FP']:4} {c['unjudged']:8} {prec:>9}  {GOAL:.0%}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.environ.get("GPUFIX_LINT_REPOS", "/tmp/lintrepos"))
    ap.add_argument("--repos", type=Path, default=HERE / "lint_repos.txt")
    ap.add_argument("--judgements", type=Path, default=HERE / "lint_judgements.tsv")
    ap.add_argument("--show", choices=("unjudged", "fp", "gone", "all"), default="unjudged")
    args = ap.parse_args(argv)
    judged = read_judgements(args.judgements)
    counts: dict[str, Counter[str]] = {r.id: Counter() for r in RULES}
    rows = []
    files = unchecked = 0
    seen: set[tuple[str, str, str, int]] = set()
    keyed: list[tuple[str, str, int, str]] = []
    digests: dict[str, str] = {}
    repos = read_repos(args.repos)
    for repo, commit in repos:
        tree = Path(args.root) / repo.replace("/", "+")
        if not tree.is_dir():
            sys.exit(f"missing {tree}: extract {repo}@{commit} with bench/lint_extract.py")
        result = lint_paths([str(tree)], load_config([str(tree)]))
        files += result.files
        unchecked += result.unchecked
        for f in result.findings:
            rel = os.path.relpath(f.path, tree)
            seen.add((f.rule, repo, rel, f.line))
            verdict, reason = judged.get((f.rule, repo, rel, f.line), ("unjudged", ""))
            counts[f.rule][verdict] += 1
            keyed.append((f.rule, digest(f.path, digests), f.line, verdict))
            rows.append((verdict, f.rule, repo, rel, f.line, f.effective_level, reason, f.message))
    print(
        f"{len(repos)} repositories, {files} files, of which {unchecked} not checked "
        "(tests or library: off by default)"
    )
    print_table(counts)
    once = distinct_counts(keyed)
    print("distinct (same rule, line and file content counted once):")
    print_table({r.id: once.get(r.id, Counter()) for r in RULES})
    for verdict, rule, repo, rel, line, level, reason, msg in rows:
        if args.show == "all" or verdict.lower() == args.show:
            print(f"{verdict}\t{rule}\t{repo}\t{rel}\t{line}\t{level}\t{reason or msg[:100]}")
    listed = {repo for repo, _ in repos}
    gone = sorted(k for k in judged if k[1] in listed and k not in seen)
    tally = Counter(judged[k][0] for k in gone)
    print(f"judged rows no finding matches now: {len(gone)} (TP {tally['TP']}, FP {tally['FP']})")
    if args.show in ("gone", "all"):
        for key in gone:
            rule, repo, rel, line = key
            print(f"gone {judged[key][0]}\t{rule}\t{repo}\t{rel}\t{line}\t{judged[key][1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
