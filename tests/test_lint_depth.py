"""Valid Python that nests statements deeper than lint's walkers follow: one GPF900 for that
file, the other files still checked (a review, 2026-12-05: a 250-branch elif chain crashed the
whole run with a RecursionError and hid every finding)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths
from gpufix.workload.lint.parse import MAX_STATEMENT_DEPTH, statement_depth

GPF001 = "import torch\nimport os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"


def _chain(branches: int, indent: int = 0) -> str:
    lines = ["import os", "import torch", "x = int(os.environ.get('X', '0'))"]
    pad = ""
    for k in range(indent):
        lines.append(f"{pad}if x != -{k + 1}:")
        pad += " "
    lines += [f"{pad}if x == 0:", f"{pad} pass"]
    for i in range(1, branches):
        lines += [f"{pad}elif x == {i}:", f"{pad} pass"]
    lines += [f"{pad}else:", f"{pad} os.environ['CUDA_VISIBLE_DEVICES'] = '1'", ""]
    return "\n".join(lines)


def test_statement_depth_counts_elif_chains_and_indentation() -> None:
    assert statement_depth(ast.parse("x = 1\n")) == 1
    assert statement_depth(ast.parse(_chain(3))) == 4  # if, elif, elif, then the else body
    assert statement_depth(ast.parse(_chain(3, indent=2))) == 6
    try_in_match = "match x:\n case 1:\n  try:\n   pass\n  except E:\n   pass\n"
    assert statement_depth(ast.parse(try_in_match)) == 3


@pytest.mark.parametrize("branches", [250, 1000, 5000])
def test_a_long_elif_chain_is_one_gpf900_and_the_rest_is_checked(
    tmp_path: Path, branches: int
) -> None:
    (tmp_path / "chain.py").write_text(_chain(branches))
    (tmp_path / "a.py").write_text(GPF001)
    found = lint_paths([str(tmp_path)]).findings
    rules = sorted((Path(f.path).name, f.rule) for f in found)
    assert rules == [("a.py", "GPF001"), ("chain.py", "GPF900")]
    note = next(f for f in found if f.rule == "GPF900").message
    # 5000: Python's own parser gives up first, and says so
    why = "could not parse" if branches > 1000 else f"lint follows up to {MAX_STATEMENT_DEPTH}"
    assert why in note


def test_a_chain_within_the_limit_is_checked_to_its_last_branch(tmp_path: Path) -> None:
    depth = MAX_STATEMENT_DEPTH - 2
    (tmp_path / "chain.py").write_text(_chain(depth - 60, indent=59))
    found = lint_paths([str(tmp_path)]).findings
    assert [f.rule for f in found] == ["GPF001"]  # the write in the last else, after the import


def test_a_pyproject_nested_too_deeply_is_exit_3(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")
    (tmp_path / "a.py").write_text(GPF001)
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "lint", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 3 and "nested too deeply to read as TOML" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
