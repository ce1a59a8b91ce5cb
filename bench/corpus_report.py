"""Print the corpus hit rate as a markdown table (docs/decision.md). Run: .venv/bin/python bench/corpus_report.py"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from corpus.harness import cases, evaluate


def kb_sources() -> set[str]:
    """Sources the knowledge base cites: a case from one of them is not independent evidence."""
    import yaml
    from gpufix.engine.kb import DEFAULT_DIR

    out: set[str] = set()
    for f in Path(DEFAULT_DIR).glob("*.yaml"):
        for row in yaml.safe_load(f.read_text()) or []:
            if isinstance(row, dict) and row.get("source"):
                out.add(str(row["source"]).rstrip("/"))
    return out


def main() -> None:
    rows = [evaluate(c) for c in cases()]
    cited = kb_sources()
    for r in rows:
        r["kb"] = r["source"].rstrip("/") in cited
    hits = sum(r["hit"] for r in rows)
    exact = sum(r["exact"] for r in rows)
    print(
        f"{hits}/{len(rows)} hits ({exact} as the chosen strategy, {hits - exact} as the first alternative)"
    )
    ind = [r for r in rows if not r["kb"]]
    print(
        f"{sum(r['hit'] for r in ind)}/{len(ind)} hits on cases the knowledge base does not cite\n"
    )
    by = Counter(r["want"] for r in rows)
    hit_by = Counter(r["want"] for r in rows if r["hit"])
    print("| confirmed fix | cases | hits |\n| --- | --- | --- |")
    for k, n in by.most_common():
        print(f"| {k} | {n} | {hit_by[k]} |")
    print(
        "\n| case | confirmed fix | chosen | first alternative | hit |\n| --- | --- | --- | --- | --- |"
    )
    for r in rows:
        kb = " (cited by the knowledge base)" if r["kb"] else ""
        hit = "yes" if r["hit"] else "no"
        print(
            f"| [{r['id']}]({r['source']}){kb} | {r['want']} | {r['chosen']} | {r['first_alternative']} | {hit} |"
        )


if __name__ == "__main__":
    main()
