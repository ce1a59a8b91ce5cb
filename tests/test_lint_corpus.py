"""The recall corpus (tests/lint_corpus): well-formed cases, a split fixed by URL, and the
dev-split cases still found (the test split is scored by bench/lint_recall.py, never tuned on)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from bench_scripts import load_bench
from gpufix.workload.lint import RULES_BY_ID

ROOT = Path(__file__).parents[1]


recall = load_bench("lint_recall")
CASES = recall.load_cases()
# Dev cases the lint misses on purpose or cannot see, with the reason (docs/lint-measured.md lists them).
KNOWN_DEV_MISSES = {
    "gpf008-mmengine-665": "map_location passed from a None default; the module starts no group",
    "gpf006-deepwave-62": "every tensor placed by index; no use of the current GPU in the script",
    "gpf004-accelerate-2328": "written to a copy of os.environ, under a check for that very setting",
    "gpf008-graphstorm-344": "load in a library module that starts no group (model/utils.py)",
}


def test_every_case_names_a_public_report_and_a_rule() -> None:
    assert len(CASES) >= 40
    urls = [c.source for c in CASES]
    assert len(set(urls)) == len(urls), "one case per report"
    for case in CASES:
        assert case.source.startswith("https://"), case.path.name
        assert case.cls in RULES_BY_ID, case.path.name
        assert {rule for _, _, rule in case.expected} == {case.cls}, case.path.name
        for py in case.path.rglob("*.py"):
            assert py.read_text().startswith(f"# source: {case.source}\n"), py


def test_split_is_the_sha256_of_the_url() -> None:
    url = "https://github.com/pytorch/pytorch/issues/9158"
    expected = "test" if int(hashlib.sha256(url.encode()).hexdigest(), 16) % 3 == 0 else "dev"
    assert recall.split_of(url) == expected
    splits = {c.split for c in CASES}
    assert splits == {"dev", "test"}


@pytest.mark.parametrize("name", sorted(c.path.name for c in CASES if c.split == "dev"))
def test_dev_case_is_found(name: str) -> None:
    case = next(c for c in CASES if c.path.name == name)
    missed, _ = recall.run_case(case)
    if name in KNOWN_DEV_MISSES:
        assert missed, f"{name} is found now: drop it from KNOWN_DEV_MISSES"
    else:
        assert not missed
