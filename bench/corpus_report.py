"""Corpus hit rates through the real CLI, dev and test apart, beside the field notes' tree.

Run: .venv/bin/python bench/corpus_report.py            (markdown for docs/decision.md)
     .venv/bin/python bench/corpus_report.py --decision-table
       prints the decision table (knowledge/evidence_fixes.yaml) with its sources, for the docs
     .venv/bin/python bench/corpus_report.py --update-expected
       rewrites tests/corpus/expected.yaml from this run, keeping the reason of every miss
       that stays a miss; a new miss gets "TODO", which the test refuses until someone says why.

The baseline is the field notes' tree (shared/field-notes): upgrade the kernel when it is
below accelerate's 5.5, otherwise pin a torch/CUDA stack (`cuda-downgrade`). It sees the same
snapshot the CLI gets and nothing else. The tree names a strategy and nothing more (no NCCL
profile, no driver branch, no direction for the stack), so it is credited on the strategy alone;
"gpufix, strategy only" credits the engine the same way, beside its full score (strategy and the
case's `expect` details). The tree's `cuda-downgrade` therefore scores on every stack-up and
stack-down case by name only.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from corpus.harness import HERE, Result, cases, expected, run_all  # noqa: E402
from corpus.snapshot import snapshot_for  # noqa: E402
from corpus.verdict import probe_facts  # noqa: E402

KERNEL_THRESHOLD = (5, 5)  # accelerate's check_os_kernel() minimum (DOMAIN.md)


def field_notes_tree(case: dict[str, Any]) -> str:
    """The field notes' decision path for a host whose multi-GPU run stalls."""
    running = snapshot_for(case)["facts"]["kernel"]
    text = running.get("running") if isinstance(running, dict) else None
    parts = [int(p) for p in str(text or "").split("-")[0].split(".")[:2] if p.isdigit()]
    if len(parts) == 2 and tuple(parts) < KERNEL_THRESHOLD:
        return "kernel-upgrade"
    return "cuda-downgrade"


def kb_sources() -> set[str]:
    """Threads the knowledge base cites: a case from one of them is not independent evidence."""
    from gpufix.engine.kb import DEFAULT_DIR

    out: set[str] = set()
    for f in Path(DEFAULT_DIR).glob("*.yaml"):
        for row in yaml.safe_load(f.read_text()) or []:
            if isinstance(row, dict) and row.get("source"):
                out.add(str(row["source"]).rstrip("/"))
    return out


def independent(rows: list[tuple[dict[str, Any], Result]]) -> list[str]:
    cited = kb_sources()
    out = []
    for split in ("dev", "test"):
        group = [(c, r) for c, r in rows if c["split"] == split]
        names = [r.id for c, r in group if c["source"] in cited]
        rest = [r for c, r in group if c["source"] not in cited]
        out.append(
            f"{split}: {len(names)} case(s) from threads the knowledge base cites"
            f"{' (' + ', '.join(names) + ')' if names else ''}; "
            f"without them {rate(sum(r.hit for r in rest), len(rest))}"
        )
    return out


def rate(hits: int, total: int) -> str:
    return f"{hits}/{total} ({100 * hits / total:.0f}%)" if total else "0/0"


def table(rows: list[tuple[dict[str, Any], Result]]) -> list[str]:
    out = [
        "| class | split | cases | gpufix top-1 | gpufix, strategy only | field notes' tree |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], Result]]] = defaultdict(list)
    for case, r in rows:
        groups[(case["class"], case["split"])].append((case, r))
        groups[("all", case["split"])].append((case, r))
    order = [*sorted({k for k, _ in groups if k != "all"}), "all"]
    for klass in order:
        for split in ("dev", "test"):
            group = groups.get((klass, split), [])
            if not group:
                continue
            n = len(group)
            hits = sum(r.hit for _, r in group)
            named = sum(r.chosen == c["fix_strategy"] for c, r in group)
            base = sum(field_notes_tree(c) == c["fix_strategy"] for c, _ in group)
            name = f"**{klass}**" if klass == "all" else klass
            out.append(
                f"| {name} | {split} | {n} | {rate(hits, n)} | {rate(named, n)} | {rate(base, n)} |"
            )
    return out


def per_case(rows: list[tuple[dict[str, Any], Result]]) -> list[str]:
    out = [
        "| case | split | class | confirmed fix | chosen | hit |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case, r in rows:
        chosen = r.chosen or f"exit {r.rc}"
        out.append(
            f"| [{r.id}]({case['source']}) | {r.split} | {r.klass} | {r.want} | {chosen} | "
            f"{'yes' if r.hit else 'no'} |"
        )
    return out


def decision_table() -> list[str]:
    """The evidence -> fix table as docs/decision.md shows it, from the knowledge base."""
    from gpufix.engine.kb import load

    out = [
        "| row | evidence | when | fix | interim | needs | source |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in load().evidence_fixes:
        fix = r.fix + (f" {'+'.join(r.profiles)}" if r.profiles else "")
        fix += f" ({r.direction})" if r.direction else ""
        cells = [
            f"`{r.id}`",
            f"`{r.evidence}`",
            ", ".join(r.when) or "-",
            fix,
            "+".join(r.interim) or "-",
            ", ".join(r.needs) or "-",
            r.source.replace("|", "/"),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def update_expected(rows: list[tuple[dict[str, Any], Result]]) -> None:
    old = expected() if (HERE / "expected.yaml").exists() else {}
    new: dict[str, dict[str, str]] = {}
    for _, r in rows:
        if r.hit:
            new[r.id] = {"result": "hit"}
            continue
        keep = old.get(r.id, {})
        reason = keep.get("reason") if keep.get("result") == "miss" else None
        new[r.id] = {"result": "miss", "reason": reason or f"TODO: say why ({r.why})"}
    head = (
        "# Hit or miss per corpus case, as `gpufix plan` answers today (tests/test_corpus.py).\n"
        "# Regenerate with bench/corpus_report.py --update-expected; a miss needs a one-line reason.\n"
    )
    text = yaml.safe_dump(new, sort_keys=False, allow_unicode=True, width=1000)
    (HERE / "expected.yaml").write_text(head + text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update-expected", action="store_true")
    parser.add_argument("--decision-table", action="store_true")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    if args.decision_table:
        print("\n".join(decision_table()))
        return
    selected = cases()
    results = run_all(selected, workers=args.workers)
    rows = list(zip(selected, results, strict=True))
    broken = [r for r in results if r.rc not in (0, 2)]
    for r in broken:
        print(f"error: {r.id}: {r.why}", file=sys.stderr)
    held = sorted({g for r in results for g in r.held_back})
    print(
        f"{len(rows)} cases; command: gpufix plan CASE --facts SNAP --probe-verdict VERDICT --json"
    )
    measured = sum(1 for c in selected if probe_facts(c).get("nccl"))
    print(f"verdicts carrying the probe's NCCL reading (facts.nccl): {measured} of {len(rows)}")
    if held:
        print(
            f"contract fields kept out of the verdicts (probe schema does not declare them): {', '.join(held)}"
        )
    print()
    print("\n".join(table(rows)))
    print()
    print("\n".join(independent(rows)))
    print()
    print("\n".join(per_case(rows)))
    if args.update_expected:
        update_expected(rows)
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
