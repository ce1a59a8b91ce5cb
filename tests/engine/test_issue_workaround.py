"""A known-issue row's interim is the workaround of the NCCL issue behind it (`issue-workaround`
in evidence_fixes.yaml), not one profile written into the row: each nccl_issues.yaml row names
its own workaround from the NVIDIA document it cites, or none."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from gpufix.engine import kb
from gpufix.engine.kb_evidence import ISSUE_WORKAROUND
from gpufix.engine.table import Decision
from gpufix.errors import GpufixError

KB = kb.load()
ROWS = {r.id: r for r in KB.evidence_fixes}
ISSUES = {i.id: i for i in KB.nccl_issues}
KNOWN_ISSUE_ROWS = ("layer-ib-known-nccl-issue", "ib-off-known-nccl-issue")


def _decision(row: str, issue: str | None) -> Decision:
    r = ROWS[row]
    return Decision(r, r.evidence, None, ISSUES[issue] if issue else None, ())


@pytest.mark.parametrize("row", KNOWN_ISSUE_ROWS)
def test_the_issue_names_the_interim(row: str) -> None:
    assert ROWS[row].interim == (ISSUE_WORKAROUND,)
    # NVIDIA's cuBLASMp known issue: NCCL_PXN_DISABLE=1 until 2.30.7
    assert _decision(row, "pxn-multinode-ib-hang").interim == ("pxn-off",)


@pytest.mark.parametrize("row", KNOWN_ISSUE_ROWS)
def test_an_issue_without_a_workaround_gives_no_interim(row: str) -> None:
    # the bootstrap fix of 2.27.3 names no knob that avoids it
    assert ISSUES["bootstrap-stray-connection"].workaround is None
    assert _decision(row, "bootstrap-stray-connection").interim == ()
    assert _decision(row, None).interim == ()


def test_a_rows_own_profiles_stay() -> None:
    # cuMem off is what the experiment itself showed works
    d = _decision("cumem-off-known-nccl-issue", "cumem-a2a-connect-deadlock")
    assert d.interim == ("cumem-off",)


def test_refused_on_a_row_without_an_nccl_issue(tmp_path: Path) -> None:
    d = tmp_path / "knowledge"
    shutil.copytree(kb.DEFAULT_DIR, d)
    path = d / "evidence_fixes.yaml"
    rows = yaml.safe_load(path.read_text())
    row = next(r for r in rows if r["id"] == "layer-ib")
    row["interim"] = [ISSUE_WORKAROUND]
    path.write_text(yaml.safe_dump(rows, sort_keys=False))
    with pytest.raises(GpufixError) as e:
        kb.load(d)
    assert "(layer-ib)" in str(e.value) and "nccl-version-affected" in str(e.value)
