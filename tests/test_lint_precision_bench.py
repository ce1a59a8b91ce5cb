"""bench/lint_precision.py: byte-identical copies of a finding are counted once in the distinct table."""

from __future__ import annotations

from pathlib import Path

from bench_scripts import load_bench

precision = load_bench("lint_precision")

SCRIPT = (
    'import os\nos.environ["NCCL_P2P_DISABLE"] = "1"\nimport torch\n'
    'torch.distributed.init_process_group("nccl")\n'
)


def test_distinct_counts_keep_the_first_verdict_of_each_copy() -> None:
    counts = precision.distinct_counts(
        [
            ("GPF004", "a", 2, "TP"),
            ("GPF004", "a", 2, "TP"),  # the same file content, copied
            ("GPF004", "a", 3, "FP"),  # another line of it
            ("GPF004", "b", 2, "FP"),  # other content
            ("GPF010", "a", 2, "TP"),  # another rule on the same line
        ]
    )
    assert counts["GPF004"] == {"TP": 1, "FP": 2}
    assert counts["GPF010"] == {"TP": 1}


def test_a_repository_copy_of_itself_counts_once(tmp_path: Path, capsys) -> None:
    tree = tmp_path / "trees" / "someone+proj"
    for rel in ("train.py", "proj/train.py"):  # a nested copy, as in BiPhysNet-TFBS
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(SCRIPT)
    repos = tmp_path / "repos.txt"
    repos.write_text("someone/proj@0000000000000000000000000000000000000000\n")
    judgements = tmp_path / "judgements.tsv"
    judgements.write_text(
        "rule\trepo\tpath\tline\tverdict\treason\n"
        "GPF004\tsomeone/proj\ttrain.py\t2\tTP\tP2P off at import\n"
        "GPF004\tsomeone/proj\tproj/train.py\t2\tTP\tsame, in the copy\n"
    )
    args = [
        "--root",
        str(tmp_path / "trees"),
        "--repos",
        str(repos),
        "--judgements",
        str(judgements),
    ]
    assert precision.main(args) == 0
    out = capsys.readouterr().out
    all_findings, distinct = out.split("distinct")
    assert "GPF004         2    2    0        0      100%" in all_findings
    assert "GPF004         1    1    0        0      100%" in distinct
