"""gpufix lint: rules on real-looking training scripts, traps, output formats and exit codes."""

from __future__ import annotations

import io
import json
import re
import textwrap
from pathlib import Path

import jsonschema
import pytest
from gpufix import lint
from gpufix.lint import lint_paths, lint_source, main_lint
from hypothesis import given, settings
from hypothesis import strategies as st

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
EXPECT = re.compile(r"#\s*expect:\s*(GPF\d{3})")


def _codes(src: str) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in lint_source(textwrap.dedent(src), "t.py")]


def _expected(path: Path) -> set[tuple[int, str]]:
    out = set()
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        out.update((n, m) for m in EXPECT.findall(line))
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.py")))
def test_fixture_findings_match_expect_markers(name: str) -> None:
    path = FIXTURES / name
    got = {(f.line, f.rule) for f in lint_source(path.read_bytes(), str(path))}
    assert got == _expected(path)


def test_fixtures_cover_every_rule_but_parse_errors() -> None:
    seen = {rule for p in FIXTURES.glob("*.py") for _, rule in _expected(p)}
    assert seen == {"GPF001", "GPF002", "GPF003", "GPF004"}
    clean = [p for p in FIXTURES.glob("*.py") if not _expected(p)]
    assert len(clean) >= 2  # the false-positive traps


def test_gpf001_names_the_first_torch_import() -> None:
    path = FIXTURES / "hf_trainer_late_env.py"
    [f] = [f for f in lint_source(path.read_bytes(), str(path)) if f.rule == "GPF001"]
    assert "`from transformers import ...` (line 8)" in f.message
    assert "CUDA ignores it once initialised" in f.message
    assert f.related[0].line == 8 and f.related[0].path == str(path)


def test_gpf001_import_through_a_called_function() -> None:
    path = FIXTURES / "called_helper_late.py"
    found = [f for f in lint_source(path.read_bytes(), str(path)) if f.rule == "GPF001"]
    assert found
    for f in found:
        assert "`import torch.distributed` (line 8, in setup_logging() called at line 17)" in (
            f.message
        )


def test_assignment_before_import_is_clean() -> None:
    assert not _codes(
        """
        import os
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        import torch
        """
    )


def test_mentions_reads_and_other_variables_are_clean() -> None:
    assert not _codes(
        """
        import os
        import torch
        print('os.environ["CUDA_VISIBLE_DEVICES"] = "0"')
        x = os.environ["CUDA_VISIBLE_DEVICES"]
        y = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["OMP_NUM_THREADS"] = "4"
        os.environ.setdefault("MASTER_PORT", "29500")
        del os.environ["CUDA_VISIBLE_DEVICES"]
        """
    )


def test_import_in_function_counts_only_once_called() -> None:
    src = """
        import os
        def load():
            import torch
            return torch
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        load()
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
        """
    assert _codes(src) == [(8, "GPF001")]


def test_called_function_with_early_return_is_not_certain() -> None:
    src = """
        import os, sys
        def load():
            if "--cpu" in sys.argv:
                return None
            import torch
            return torch
        load()
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        """
    assert not _codes(src)


def test_branches_and_loops() -> None:
    src = """
        import os, sys
        if sys.argv[1:]:
            import torch
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        for _ in range(2):
            import transformers
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        if sys.argv[1:]:
            import torch
        else:
            from torch import nn
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
        """
    assert _codes(src) == [(13, "GPF001")]


def test_write_inside_the_branch_that_imported() -> None:
    src = """
        import os, sys
        if sys.argv[1:]:
            import torch
            os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        """
    assert _codes(src) == [(5, "GPF001")]


def test_try_with_broad_handler_is_not_certain() -> None:
    src = """
        import os
        try:
            import torch
        except Exception:
            pass
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        """
    assert not _codes(src)


def test_every_setter_form_and_alias() -> None:
    src = """
        import os as _os
        from os import environ as env, putenv as pe
        import torch
        _os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        env["CUDA_VISIBLE_DEVICES"] = "0"
        env.setdefault("CUDA_VISIBLE_DEVICES", "0")
        env.update({"CUDA_VISIBLE_DEVICES": "0"})
        env.update(CUDA_VISIBLE_DEVICES="0")
        env.update(dict(CUDA_VISIBLE_DEVICES="0"))
        env |= {"CUDA_VISIBLE_DEVICES": "0"}
        _os.putenv("CUDA_VISIBLE_DEVICES", "0")
        pe("CUDA_VISIBLE_DEVICES", "0")
        a = env["CUDA_VISIBLE_DEVICES"] = "0"
        env.__setitem__("CUDA_VISIBLE_DEVICES", "0")
        """
    assert [line for line, rule in _codes(src)] == list(range(5, 16))


def test_unrelated_and_relative_imports_do_not_count() -> None:
    src = """
        import os
        import numpy
        from . import torch
        from .models import transformers
        import torchx_not_torch
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        """
    assert not _codes(src)


def test_write_in_the_same_statement_as_an_importing_call_is_left_alone() -> None:
    src = """
        import os
        def load():
            import torch
        x = (os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0"), load())
        """
    assert not _codes(src)


def test_recursion_does_not_loop() -> None:
    src = """
        import os
        def a(n):
            import torch
            return a(n - 1) if n else b()
        def b():
            return a(0)
        a(3)
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        """
    assert _codes(src) == [(9, "GPF001")]


def test_data_parallel_forms() -> None:
    src = """
        import torch
        import torch.nn as nn
        from torch.nn import DataParallel as DP
        from torch.nn.parallel import data_parallel
        from torch.nn.parallel import DistributedDataParallel
        m = torch.nn.DataParallel(model)
        m = nn.DataParallel(model)
        m = DP(model)
        y = data_parallel(model, x)
        m = DistributedDataParallel(model)
        if isinstance(m, nn.DataParallel):
            m = m.module
        class Wrap(nn.DataParallel):
            pass
        nn = object()
        """
    assert _codes(src) == [(7, "GPF002"), (8, "GPF002"), (9, "GPF002"), (10, "GPF002")]


def test_debug_and_p2p_values() -> None:
    src = """
        import os
        os.environ["NCCL_DEBUG"] = "WARN"
        os.environ["NCCL_DEBUG"] = "info"
        os.environ["NCCL_DEBUG"] = level
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "OFF"
        os.environ["NCCL_P2P_DISABLE"] = "0"
        os.environ["NCCL_P2P_DISABLE"] = "1"
        os.environ["NCCL_P2P_DISABLE"] = flag
        def f():
            os.putenv("NCCL_P2P_DISABLE", "1")
        """
    assert _codes(src) == [(4, "GPF003"), (6, "GPF003"), (9, "GPF004"), (12, "GPF004")]


def test_noqa_forms() -> None:
    src = """
        import os
        import torch
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # noqa: GPF001
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # noqa: E501, gpf001
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # noqa
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # noqa: GPF003
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # noqa:GPF0011
        """
    assert _codes(src) == [(7, "GPF001"), (8, "GPF001")]


def test_columns_count_characters_not_bytes() -> None:
    src = 'import os, torch\nx = "é"; os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    [f] = lint_source(src, "t.py")
    assert (f.line, f.col) == (2, 10)


def test_syntax_error_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import torch\n\ndef broken(:\n    pass\n")
    (tmp_path / "late.py").write_text(
        'import os, torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    )
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    (tmp_path / "latin.py").write_bytes(b"s = '\xff'\n")
    result = lint_paths([str(tmp_path)])
    rules = sorted((Path(f.path).name, f.rule) for f in result.findings)
    assert rules == [
        ("bad.py", "GPF900"),
        ("late.py", "GPF001"),
        ("latin.py", "GPF900"),
        ("nul.py", "GPF900"),
    ]
    bad = next(f for f in result.findings if f.path.endswith("bad.py"))
    assert bad.line == 3 and "syntax error" in bad.message


def test_directory_walk_skips_hidden_and_caches(tmp_path: Path) -> None:
    late = 'import os, torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    for sub in (".venv", "__pycache__", "pkg"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "m.py").write_text(late)
    (tmp_path / "pkg" / "notes.txt").write_text(late)
    result = lint_paths([str(tmp_path)])
    assert result.files == 1
    assert [Path(f.path).parent.name for f in result.findings] == ["pkg"]


def _run(paths: list[str], fmt: str = "text") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main_lint(paths, fmt, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_exit_codes_and_text_output(tmp_path: Path) -> None:
    clean = str(FIXTURES / "clean_env_first.py")
    assert _run([clean]) == (0, "", "0 findings in 1 file(s)\n")
    code, out, _ = _run([str(FIXTURES)])
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == sum(len(_expected(p)) for p in FIXTURES.glob("*.py"))
    assert all(re.match(r"^\S+\.py:\d+:\d+: GPF\d{3} \S", line) for line in lines)
    assert any(line.endswith("use DistributedDataParallel") for line in lines)

    code, out, err = _run([clean, str(tmp_path / "missing.py")])
    assert code == 3 and out == ""
    assert err == f"gpufix lint: error: no such file or directory: {tmp_path / 'missing.py'}\n"
    code, _, err = _run([clean], "xml")
    assert code == 3 and "unknown output format" in err


def test_json_output() -> None:
    code, out, _ = _run([str(FIXTURES / "ddp_from_os_import.py")], "json")
    doc = json.loads(out)
    assert code == 1 and doc["format"] == "gpufix-lint" and doc["files_checked"] == 1
    assert doc["counts"] == {"GPF001": 2, "GPF003": 1, "GPF002": 1}
    first = doc["findings"][0]
    assert first["rule"] == "GPF001" and first["line"] == 10 and first["level"] == "error"
    assert first["related"][0]["line"] == 5
    assert first["doc"] == lint.RULES_BY_ID["GPF001"].doc


# The parts of the SARIF 2.1.0 schema (OASIS, sarif-schema-2.1.0.json) that our log uses:
# required properties, enums and minimums exactly as the standard states them.
_REGION = {
    "type": "object",
    "properties": {
        "startLine": {"type": "integer", "minimum": 1},
        "startColumn": {"type": "integer", "minimum": 1},
        "endLine": {"type": "integer", "minimum": 1},
        "endColumn": {"type": "integer", "minimum": 1},
    },
}
_MESSAGE = {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}]}
_PHYSICAL = {
    "type": "object",
    "required": ["artifactLocation", "region"],
    "properties": {
        "artifactLocation": {
            "type": "object",
            "required": ["uri"],
            "properties": {"uri": {"type": "string", "format": "uri-reference"}},
        },
        "region": _REGION,
    },
}
_LOCATION = {"type": "object", "properties": {"physicalLocation": _PHYSICAL, "message": _MESSAGE}}
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
                                "properties": {
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id"],
                                            "properties": {
                                                "defaultConfiguration": {
                                                    "properties": {
                                                        "level": {
                                                            "enum": [
                                                                "none",
                                                                "note",
                                                                "warning",
                                                                "error",
                                                            ]
                                                        }
                                                    }
                                                }
                                            },
                                        },
                                    }
                                },
                            }
                        },
                    },
                    "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": -1},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": _MESSAGE,
                                "locations": {"type": "array", "items": _LOCATION},
                                "relatedLocations": {"type": "array", "items": _LOCATION},
                            },
                        },
                    },
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
    assert [r["id"] for r in rules] == [r.id for r in lint.RULES]
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["level"] == rules[res["ruleIndex"]]["defaultConfiguration"]["level"]
    uris = {
        res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for res in run["results"]
    }
    assert (weird / "t.py").as_uri() in uris  # absolute path -> file URI, space escaped
    assert any(u.startswith("tests/") or "/fixtures/lint/" in u for u in uris)
    related = [r for res in run["results"] for r in res.get("relatedLocations", [])]
    assert related and all(r["message"]["text"].startswith("`") for r in related)


_LOAD_DEF = "def load():\n    import transformers\n\ndef noop():\n    return 1\n\n"
_STEPS = {
    "import torch\n": "import",
    "import numpy\n": None,
    "load()\n": "import",
    "noop()\n": None,
    "if flag:\n    import torch\n": None,
    'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n': "set",
}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(_STEPS)), min_size=1, max_size=12))
def test_flags_exactly_the_writes_after_a_certain_import(steps: list[str]) -> None:
    src = "import os\n" + _LOAD_DEF
    line = src.count("\n")
    imported, expected = False, []
    for step in steps:
        kind = _STEPS[step]
        if kind == "set" and imported:
            expected.append(line + 1)
        imported = imported or kind == "import"
        src += step
        line += step.count("\n")
    got = [f.line for f in lint_source(src, "gen.py")]
    assert got == expected
