"""A value with a trailing newline passed every `^...$` pattern of the schemas: they are ECMA-262
patterns (a `$` ends the string), Python's `re.search` lets `$` match before a final "\n"
(attack review, left alone until 2026-12-06). Journals, facts and probe verdicts are read with
ECMA-262 end anchors now; the plain validator is shown to accept each value."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from gpufix import inputs, schema_check
from gpufix.apply.journal import FileJournal
from gpufix.errors import GpufixError, InvalidInput
from gpufix.facts import snapshot
from gpufix.probe import local

DOCS = Path(__file__).resolve().parents[2] / "docs" / "device"


def _plain_accepts(doc: Any, schema: dict[str, Any]) -> bool:
    return not list(jsonschema.Draft202012Validator(schema).iter_errors(doc))


def test_a_journal_host_or_run_id_with_a_newline_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    j = FileJournal.start(
        [{"host": "h1", "strategy": "none", "steps": []}], plan_digest="d", options={}
    )
    j.update(
        "h1",
        before={"files": {"/etc/nccl.conf": {"exists": True, "mode": "644", "content_b64": ""}}},
    )
    rec = json.loads(next(j.path.glob("h1*.json")).read_text())
    assert inputs.schema_errors(rec, "journal-host") == []
    for path, value in (
        (("host",), "h1\n"),
        (("run",), rec["run"] + "\n"),
    ):
        bad = copy.deepcopy(rec)
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        assert _plain_accepts(bad, inputs.schema("journal-host")), path
        errors = inputs.schema_errors(bad, "journal-host")
        assert errors and "does not match" in errors[0], path


def test_a_probe_verdict_whose_job_setting_ends_in_a_newline_is_refused() -> None:
    verdict = json.loads((DOCS / "h200-probe-job-env-culprit.json").read_text())
    assert local.validate(verdict) is verdict
    verdict["job_env"]["NCCL_ALGO"] = "Ring\n"
    assert _plain_accepts(verdict, local.schema())
    with pytest.raises(GpufixError, match="job_env/NCCL_ALGO"):
        local.validate(verdict)


def test_a_snapshot_time_with_a_newline_is_refused() -> None:
    doc = json.loads((DOCS / "h200-facts.snapshot.json").read_text())
    snapshot.validate(doc)
    doc["gathered_at"] += "\n"
    assert _plain_accepts(doc, snapshot.schema())
    with pytest.raises(InvalidInput, match="gathered_at"):
        snapshot.validate(doc)


def test_only_a_closing_dollar_is_an_end_anchor() -> None:
    v = schema_check.validator({"type": "string", "pattern": r"^a\$"})
    assert v.is_valid("a$") and v.is_valid("a$b")  # an escaped `$` is a character
    v = schema_check.validator({"type": "string", "pattern": "^a$"})
    assert v.is_valid("a") and not v.is_valid("a\n")
    v = schema_check.validator({"type": "string", "pattern": "^[0-9]+"})  # no end anchor
    assert v.is_valid("12\n")


def test_a_digit_is_an_ascii_digit() -> None:
    """ECMA-262's `\\d` is [0-9]; Python's takes any Unicode digit ("\u0661" is ARABIC-INDIC
    DIGIT ONE, and int() reads it as 1)."""
    v = schema_check.validator({"type": "string", "pattern": r"^\d+-\d+$"})
    assert v.is_valid("0-1") and not v.is_valid("\u0660-\u0661")
