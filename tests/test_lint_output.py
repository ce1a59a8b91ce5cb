"""gpufix lint output: text, JSON, SARIF 2.1.0 (with fixes that really fix), exit codes, CLI."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from gpufix.workload.lint import RULES, RULES_BY_ID, lint_source, main_lint
from gpufix.workload.lint.command import lint as lint_command

FIXTURES = Path(__file__).parent / "lint" / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(GPF\d{3})")


def _run(paths: list[str], fmt: str = "text") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main_lint(paths, fmt, out=out, err=err, all_contexts=True)
    return code, out.getvalue(), err.getvalue()


def test_exit_codes_and_text_output(tmp_path: Path) -> None:
    clean = str(FIXTURES / "clean_lazy_import.py")
    assert _run([clean]) == (0, "", "0 findings in 1 file(s)\n")
    code, out, _ = _run([str(FIXTURES)])
    assert code == 1
    lines = out.splitlines()
    expected = sum(len(EXPECT.findall(p.read_text())) for p in FIXTURES.glob("*.py"))
    # Linted together, the fixtures are one project: other fixtures mention set_device, which
    # silences ddp_no_set_device.py's GPF006 (a known limit, docs/lint.md GPF006).
    expected -= 1
    assert len(lines) == expected
    assert not [ln for ln in lines if "ddp_no_set_device.py" in ln and "GPF006" in ln]
    assert all(re.match(r"^\S+\.py:\d+:\d+: GPF\d{3} \S", line) for line in lines)
    code, out, err = _run([clean, str(tmp_path / "missing.py")])
    assert code == 3 and out == ""
    assert err == f"gpufix lint: error: no such file or directory: {tmp_path / 'missing.py'}\n"
    code, _, err = _run([clean], "xml")
    assert code == 3 and "unknown output format" in err


def test_json_output() -> None:
    code, out, _ = _run([str(FIXTURES / "ddp_from_os_import.py")], "json")
    doc = json.loads(out)
    assert code == 1 and doc["format"] == "gpufix-lint" and doc["version"] == 2
    assert doc["files_checked"] == 1
    assert doc["counts"] == {"GPF001": 2, "GPF003": 1}
    first = doc["findings"][0]
    assert first["rule"] == "GPF001" and first["line"] == 10 and first["level"] == "error"
    assert first["related"][0]["line"] == 5
    assert first["doc"] == RULES_BY_ID["GPF001"].doc and first["fix"] == RULES_BY_ID["GPF001"].fix


def test_every_rule_has_a_doc_a_fix_and_public_sources() -> None:
    for rule in RULES:
        assert rule.doc and rule.fix and rule.sources, rule.id
        assert all(s.startswith("https://") for s in rule.sources), rule.id
    docs = (Path(__file__).parents[1] / "docs" / "lint.md").read_text()
    for rule in RULES:
        assert f"| {rule.id} |" in docs and rule.sources[0] in docs, rule.id


# The parts of the SARIF 2.1.0 schema (OASIS, sarif-schema-2.1.0.json) that our log uses:
# required properties, enums and minimums as the standard states them.
_REGION = {
    "type": "object",
    "properties": {
        k: {"type": "integer", "minimum": 1}
        for k in ("startLine", "startColumn", "endLine", "endColumn")
    },
}
_MESSAGE = {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}]}
_ARTIFACT = {
    "type": "object",
    "required": ["uri"],
    "properties": {"uri": {"type": "string", "format": "uri-reference"}},
}
_PHYSICAL = {
    "type": "object",
    "required": ["artifactLocation", "region"],
    "properties": {"artifactLocation": _ARTIFACT, "region": _REGION},
}
_LOCATION = {"type": "object", "properties": {"physicalLocation": _PHYSICAL, "message": _MESSAGE}}
_REPLACEMENT = {
    "type": "object",
    "required": ["deletedRegion"],
    "properties": {"deletedRegion": _REGION, "insertedContent": {"required": ["text"]}},
}
_FIX = {
    "type": "object",
    "required": ["artifactChanges"],
    "properties": {
        "description": _MESSAGE,
        "artifactChanges": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["artifactLocation", "replacements"],
                "properties": {
                    "artifactLocation": _ARTIFACT,
                    "replacements": {"type": "array", "minItems": 1, "items": _REPLACEMENT},
                },
            },
        },
    },
}
_LEVEL = {"enum": ["none", "note", "warning", "error"]}
_RESULT = {
    "type": "object",
    "required": ["message"],
    "properties": {
        "ruleId": {"type": "string"},
        "ruleIndex": {"type": "integer", "minimum": -1},
        "level": _LEVEL,
        "message": _MESSAGE,
        "locations": {"type": "array", "items": _LOCATION},
        "relatedLocations": {"type": "array", "items": _LOCATION},
        "fixes": {"type": "array", "items": _FIX},
    },
}
_RULE = {
    "type": "object",
    "required": ["id"],
    "properties": {"defaultConfiguration": {"properties": {"level": _LEVEL}}},
}
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "$schema": {"type": "string", "format": "uri"},
        "version": {"enum": ["2.1.0"]},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {"rules": {"type": "array", "items": _RULE}},
                            }
                        },
                    },
                    "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
                    "results": {"type": "array", "items": _RESULT},
                },
            },
        },
    },
}


def test_sarif_output(tmp_path: Path) -> None:
    weird = tmp_path / "my dir"
    weird.mkdir()
    (weird / "t.py").write_text('import os, torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    code, out, _ = _run([str(FIXTURES), str(weird)], "sarif")
    log = json.loads(out)
    assert code == 1
    jsonschema.validate(log, SARIF_SUBSET, format_checker=jsonschema.FormatChecker())
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.id for r in RULES]
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
    uris = {
        res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for res in run["results"]
    }
    assert (weird / "t.py").as_uri() in uris  # absolute path -> file URI, space escaped
    related = [r for res in run["results"] for r in res.get("relatedLocations", [])]
    assert related and all(r["message"]["text"].startswith("`") for r in related)
    assert {res["ruleId"] for res in run["results"] if "fixes" in res} >= {
        "GPF003",
        "GPF007",
        "GPF008",
        "GPF009",
        "GPF010",
        "GPF011",
    }


def _apply(text: str, replacements: list[dict]) -> str:
    """Apply SARIF replacements (1-based lines and character columns) to a text."""
    lines = text.splitlines(keepends=True)

    def offset(line: int, col: int) -> int:
        return sum(len(x) for x in lines[: line - 1]) + col - 1

    out = text
    for r in sorted(replacements, key=lambda r: -offset(r["deletedRegion"]["startLine"], 1)):
        d = r["deletedRegion"]
        start = offset(d["startLine"], d["startColumn"])
        end = offset(d["endLine"], d["endColumn"])
        out = out[:start] + r["insertedContent"]["text"] + out[end:]
    return out


@pytest.mark.parametrize(
    "name", ["ddp_gpu0.py", "pick_free_gpu.py", "dp_only_script.py", "called_helper_late.py"]
)
def test_sarif_fixes_remove_what_they_fix(name: str, tmp_path: Path) -> None:
    src = (FIXTURES / name).read_text()
    path = tmp_path / name
    path.write_text(src)
    _, out, _ = _run([str(path)], "sarif")
    results = json.loads(out)["runs"][0]["results"]
    before = [f.rule for f in lint_source(src, str(path))]
    fixed_rules = set()
    for res in results:
        for fix in res.get("fixes", []):
            change = fix["artifactChanges"][0]
            after = _apply(src, change["replacements"])
            compile(after, name, "exec")  # still Python
            remaining = [f.rule for f in lint_source(after, str(path))]
            rule = res["ruleId"]
            assert remaining.count(rule) == before.count(rule) - 1, rule
            fixed_rules.add(rule)
    assert fixed_rules


def test_every_sarif_fix_applied_at_once_leaves_python(tmp_path: Path) -> None:
    """A review (2026-12-05): a body of two flagged lines, each deleted by its own fix, was
    empty (a SyntaxError) once both fixes were applied together."""
    src = (
        "import os\nimport torch\n\n\ndef quiet():\n"
        '    os.environ["CUDA_LAUNCH_BLOCKING"] = "1"\n'
        '    os.environ["NCCL_SHM_DISABLE"] = "1"\n\n\n'
        "def loud(x):\n"
        '    os.environ["NCCL_P2P_DISABLE"] = "1"\n'
        "    return x\n\n\nquiet()\n"
    )
    path = tmp_path / "t.py"
    path.write_text(src)
    _, out, _ = _run([str(path)], "sarif")
    results = json.loads(out)["runs"][0]["results"]
    every = [
        r for res in results for fix in res.get("fixes", []) for r in
        fix["artifactChanges"][0]["replacements"]
    ]  # fmt: skip
    assert len(every) == 3
    after = _apply(src, every)
    compile(after, "t.py", "exec")
    assert [f.rule for f in lint_source(after, str(path))] == []
    assert "    return x" in after and after.count("pass") == 2  # the other body keeps its line


def test_click_command_exit_codes(tmp_path: Path) -> None:
    bad = tmp_path / "train.py"
    bad.write_text('import os\nimport torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    runner = CliRunner()
    r = runner.invoke(lint_command, [str(bad), "--json"])
    assert r.exit_code == 1 and json.loads(r.output)["counts"] == {"GPF001": 1}
    r = runner.invoke(lint_command, [str(bad), "--target-version", "banana"])
    assert r.exit_code == 3
    r = runner.invoke(lint_command, [str(tmp_path / "nope.py")])
    assert r.exit_code == 3


def test_a_stray_file_in_a_directory_is_skipped_not_the_end_of_the_run(tmp_path: Path) -> None:
    """An editor's lock link (`.#a.py`, dangling), a FIFO and an oversized file under a directory
    are passed over and counted; the same files named on the command line are still exit 3
    (review, 2026-12-03: one of them made `lint DIR` exit 3 with no findings)."""
    import os

    (tmp_path / "a.py").write_text(
        'import torch\nimport os\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\n'
    )
    (tmp_path / ".#a.py").symlink_to("user@host.1234:1700000000")
    os.mkfifo(tmp_path / "f.py")
    (tmp_path / "big.py").write_bytes(b"#" * (5 << 20))
    code, out, err = _run([str(tmp_path)])
    assert code == 1 and "GPF001" in out
    assert "1 finding in 1 file(s); 3 file(s) skipped" in err
    code, out, _ = _run([str(tmp_path)], "json")
    assert len(json.loads(out)["skipped_files"]) == 3
    code, _, err = _run([str(tmp_path / "f.py")])
    assert code == 3 and "FIFO" in err


def test_a_file_name_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """lint runs in CI on other people's code: a file named with ESC/OSC/BEL bytes printed them
    raw in `path:line:col` (attack review, 2026-12-06)."""
    name = "e\x1b[31mRED\x1b]0;T\x07x.py"
    (tmp_path / name).write_text(
        "import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
    )
    code, out, _ = _run([str(tmp_path)])
    assert code == 1 and "GPF001" in out
    assert "\x1b" not in out and "\x07" not in out
    assert "e\\x1b[31mRED\\x1b]0;T\\x07x.py:3:" in out
