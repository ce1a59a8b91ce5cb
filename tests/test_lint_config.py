"""gpufix lint configuration: pyproject.toml, contexts (tests/examples/library), target version."""

from __future__ import annotations

import io
import sys
import textwrap
from pathlib import Path

import pytest
from gpufix.errors import InvalidInput
from gpufix.workload.lint import lint_paths, main_lint
from gpufix.workload.lint.config import load_config, lower_bound, parse_target
from gpufix.workload.lint.discover import classify

LATE = 'import os, torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
DP = "import torch\nm = torch.nn.DataParallel(object())\n"
RUNNING = sys.version_info[:2]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _rules(root: Path, **kw: object) -> list[tuple[str, str, str]]:
    result = lint_paths([str(root)], **kw)  # type: ignore[arg-type]
    return sorted(
        (Path(f.path).relative_to(root).as_posix(), f.rule, f.effective_level)
        for f in result.findings
    )


@pytest.mark.parametrize(
    ("rel", "context"),
    [
        ("train.py", "code"),
        ("src/pkg/trainer.py", "code"),
        ("tests/test_trainer.py", "test"),
        ("pkg/test_utils.py", "test"),
        ("pkg/utils_test.py", "test"),
        ("conftest.py", "test"),
        ("examples/dcgan/main.py", "example"),
        ("third_party/apex/dp.py", "library"),
        (".venv/lib/python3.11/site-packages/torch/nn/dp.py", "library"),
        ("examples/tests/test_x.py", "test"),
    ],
)
def test_context_from_the_path_below_the_root(rel: str, context: str) -> None:
    assert classify(rel) == context


def test_tests_and_libraries_are_off_examples_are_notes(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "train.py": LATE,
            "tests/test_train.py": DP,
            "third_party/lib/dp.py": DP,
            "examples/demo.py": DP,
        },
    )
    assert _rules(tmp_path) == [
        ("examples/demo.py", "GPF002", "note"),
        ("train.py", "GPF001", "error"),
    ]
    out, err = io.StringIO(), io.StringIO()
    assert main_lint([str(tmp_path)], out=out, err=err) == 1
    assert "2 file(s) in tests/examples/library not checked" in err.getvalue()
    code = main_lint([str(tmp_path)], out=out, err=err, all_contexts=True)
    assert code == 1 and "tests/test_train.py" in out.getvalue()
    (tmp_path / "train.py").unlink()
    assert main_lint([str(tmp_path)], out=io.StringIO(), err=err) == 0  # notes do not fail


HELPER = "import os\ndef set_gpus(ids):\n    os.environ['CUDA_VISIBLE_DEVICES'] = ids\n"
LATE_CALLER = "import torch\nfrom utils.gpu import set_gpus\ndef one_gpu():\n    set_gpus('0')\n"


@pytest.mark.parametrize(
    ("caller", "level"), [("tests/conftest.py", None), ("examples/demo.py", "note")]
)
def test_a_helper_in_code_called_too_late_only_by_a_test_or_example(
    tmp_path: Path, caller: str, level: str | None
) -> None:
    """A review (2026-12-05): a test fixture that called a code helper after `import torch`
    made an error in the helper's file, and failed CI, though tests are not checked."""
    on_time = "import click\nfrom utils.gpu import set_gpus\ndef main():\n    set_gpus('0')\n"
    _write(
        tmp_path,
        {"utils/__init__.py": "", "utils/gpu.py": HELPER, "main.py": on_time, caller: LATE_CALLER},
    )
    assert _rules(tmp_path) == ([("utils/gpu.py", "GPF001", level)] if level else [])
    assert main_lint([str(tmp_path)], out=io.StringIO(), err=io.StringIO()) == 0
    # code that calls it too late is code's finding, whoever else does
    (tmp_path / "main.py").write_text(LATE_CALLER)
    assert _rules(tmp_path) == [("utils/gpu.py", "GPF001", "error")]


def test_a_project_copied_into_a_package_is_a_library(tmp_path: Path) -> None:
    # Shape of https://github.com/Natithan/DIRT @6b0b3f16: jiant (own pyproject.toml and
    # setup.py) kept as src/jiant inside the package src/, CoVe's copy of OpenNMT-py inside it.
    _write(
        tmp_path,
        {
            "pyproject.toml": "[project]\nname = 'dirt'\n",
            "src/__init__.py": "",
            "src/train.py": DP,
            "src/jiant/pyproject.toml": "[project]\nname = 'jiant'\n",
            "src/jiant/LICENSE": "MIT\n",
            "src/jiant/jiant/__init__.py": "",
            "src/jiant/jiant/models.py": DP,
            "src/jiant/jiant/modules/__init__.py": "",
            "src/jiant/jiant/modules/cove/setup.py": "",
            "src/jiant/jiant/modules/cove/LICENSE": "BSD\n",
            # a CUDA extension's build script inside a package is the project's own code
            "src/ext/__init__.py": "",
            "src/ext/kernel/setup.py": "",
            "src/ext/kernel/build.py": DP,
            "src/jiant/jiant/modules/cove/OpenNMT-py/train.py": DP,
            # a monorepo's own packages are not copies: packages/ is no Python package
            "packages/tool/pyproject.toml": "[project]\nname = 'tool'\n",
            "packages/tool/tool/run.py": DP,
        },
    )
    assert _rules(tmp_path) == [
        ("packages/tool/tool/run.py", "GPF002", "warning"),
        ("src/ext/kernel/build.py", "GPF002", "warning"),
        ("src/train.py", "GPF002", "warning"),
    ]
    out, err = io.StringIO(), io.StringIO()
    assert main_lint([str(tmp_path)], out=out, err=err, all_contexts=True) == 1
    assert "src/jiant/jiant/models.py" in out.getvalue()


def test_pyproject_include_exclude_severity_and_contexts(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pyproject.toml": """
                [project]
                requires-python = ">=3.9"
                [tool.gpufix.lint]
                exclude = ["scripts/old"]
                [tool.gpufix.lint.severity]
                GPF002 = "off"
                GPF001 = "warning"
                [tool.gpufix.lint.contexts]
                tests = "note"
                """,
            "train.py": LATE + DP,
            "scripts/old/legacy.py": LATE,
            "tests/test_a.py": LATE,
        },
    )
    assert _rules(tmp_path) == [
        ("tests/test_a.py", "GPF001", "note"),
        ("train.py", "GPF001", "warning"),
    ]
    config = load_config([str(tmp_path)])
    assert config.target == (3, 9) and config.target_origin == "requires-python >=3.9"
    pyproject = tmp_path / "pyproject.toml"
    text = pyproject.read_text().replace(
        "[tool.gpufix.lint]\n", '[tool.gpufix.lint]\ninclude = ["tests"]\n'
    )
    pyproject.write_text(text)
    assert _rules(tmp_path) == [("tests/test_a.py", "GPF001", "note")]


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[tool.gpufix.lint]\nselect = ['GPF001']\n", "unknown key 'select'"),
        ("[tool.gpufix.lint.severity]\nGPF001 = 'loud'\n", "'loud' is not one of"),
        ("[tool.gpufix.lint.severity]\nGPF777 = 'off'\n", "unknown key 'GPF777'"),
        ("[tool.gpufix.lint.contexts]\ntests = 'maybe'\n", "'maybe' is not one of"),
        # a review (2026-12-05): these two named neither the file nor the table
        ("[tool.gpufix.lint]\ntarget-version = 'py2'\n", "[tool.gpufix.lint]: bad target version"),
        ("[tool.gpufix.lint]\nexclude = 'x'\n", "must be a list"),
        ("[project]\nrequires-python = '>=banana'\n", "pyproject.toml [project]: bad requires"),
        ("[tool.gpufix.lint\n", "not valid TOML"),
        # a review's shapes (2026-12-03): a crash with exit 1, and messages naming the wrong table
        ("[tool]\ngpufix = 1\n", "[tool.gpufix] must be a table"),
        ("tool = 1\n", "[tool] must be a table"),
        ("project = 1\n", "[project] must be a table"),
        ("[tool.gpufix.lint]\nseverity = 'GPF002=off'\n", "[tool.gpufix.lint.severity] must be"),
        ("[tool.gpufix.lint.severity]\nGPF999 = 'off'\n", "[tool.gpufix.lint.severity]: unknown"),
        # a user trial (2026-12-06): a class range backwards was an internal error, exit 1
        ("[tool.gpufix.lint]\nexclude = ['[z-a]']\n", "exclude: bad glob '[z-a]'"),
        ("[tool.gpufix.lint]\ninclude = ['a[9-0].py']\n", "include: bad glob 'a[9-0].py'"),
    ],
)
def test_bad_configuration_is_one_line_and_exit_3(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "pyproject.toml").write_text(toml)
    (tmp_path / "t.py").write_text("x = 1\n")
    out, err = io.StringIO(), io.StringIO()
    assert main_lint([str(tmp_path)], out=out, err=err) == 3
    assert message in err.getvalue() and err.getvalue().count("\n") == 1
    assert out.getvalue() == ""


def test_an_include_that_matches_nothing_is_exit_3_over_the_whole_project(tmp_path: Path) -> None:
    """A review (2026-12-05): `include = ["scr"]` checked nothing and passed, in CI for good."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(LATE)
    (tmp_path / "pyproject.toml").write_text('[tool.gpufix.lint]\ninclude = ["src", "scr"]\n')
    out, err = io.StringIO(), io.StringIO()
    assert main_lint([str(tmp_path)], out=out, err=err) == 3
    assert "include pattern 'scr' matches no .py file under" in err.getvalue()
    assert err.getvalue().count("\n") == 1 and out.getvalue() == ""
    # a run over part of the project may not see what another part holds
    assert main_lint([str(tmp_path / "src")], out=io.StringIO(), err=io.StringIO()) == 1
    (tmp_path / "pyproject.toml").write_text('[tool.gpufix.lint]\ninclude = ["src"]\n')
    assert main_lint([str(tmp_path)], out=io.StringIO(), err=io.StringIO()) == 1


def test_an_exclude_that_leaves_nothing_is_exit_3(tmp_path: Path) -> None:
    """A user trial (2026-12-06): `exclude = ["**"]` (or `*.py`) checked 0 files and exited 0;
    a directory without Python files too (mypy refuses both)."""
    _write(tmp_path, {"train.py": LATE, "src/a.py": LATE})
    for pattern in ("**", "*.py"):
        (tmp_path / "pyproject.toml").write_text(f'[tool.gpufix.lint]\nexclude = ["{pattern}"]\n')
        out, err = io.StringIO(), io.StringIO()
        assert main_lint([str(tmp_path)], out=out, err=err) == 3
        assert "include/exclude leave none of the 2 .py file(s) under" in err.getvalue()
        assert err.getvalue().count("\n") == 1 and out.getvalue() == ""
        # a file named on the command line is still read, as before
        assert main_lint([str(tmp_path / "train.py")], out=out, err=io.StringIO()) == 1
    (tmp_path / "empty").mkdir()
    err = io.StringIO()
    assert main_lint([str(tmp_path / "empty")], out=io.StringIO(), err=err) == 3
    assert "no .py file under" in err.getvalue() and err.getvalue().count("\n") == 1
    # tests alone are found (then off by default): not "nothing to lint"
    (tmp_path / "pyproject.toml").unlink()
    _write(tmp_path, {"only_tests/tests/test_a.py": "x = 1\n"})
    assert main_lint([str(tmp_path / "only_tests")], out=io.StringIO(), err=io.StringIO()) == 0


def test_target_version_parsing() -> None:
    assert parse_target("py311") == (3, 11) == parse_target("3.11") == parse_target("py3.11")
    assert lower_bound(">=3.8,<4") == (3, 8)
    assert lower_bound("~=3.10") == (3, 10)
    assert lower_bound("<3.13") is None
    with pytest.raises(InvalidInput):
        parse_target("python3")


NEWER = "type Vector = list[float]\n"  # PEP 695, Python 3.12 syntax
MATCH = "match x:\n    case 1:\n        pass\n"  # Python 3.10 syntax


def _parse_rules(tmp_path: Path, text: str, target: str | None) -> list[tuple[str, str]]:
    (tmp_path / "m.py").write_text(text)
    out, err = io.StringIO(), io.StringIO()
    main_lint([str(tmp_path)], "json", out=out, err=err, target_version=target)
    import json

    return [(f["rule"], f["level"]) for f in json.loads(out.getvalue())["findings"]]


def test_newer_syntax_than_this_python_is_not_a_syntax_error(tmp_path: Path) -> None:
    if RUNNING >= (3, 12):
        pytest.skip("needs an interpreter older than 3.12")
    assert _parse_rules(tmp_path, NEWER, None) == [("GPF901", "note")]
    assert _parse_rules(tmp_path, NEWER, "py312") == [("GPF901", "note")]


def test_syntax_newer_than_the_target_is_gpf900(tmp_path: Path) -> None:
    assert _parse_rules(tmp_path, MATCH, "py39") == [("GPF900", "error")]
    assert _parse_rules(tmp_path, MATCH, "py310") == []
    assert _parse_rules(tmp_path, "def broken(:\n    pass\n", "py310") == [("GPF900", "error")]


def test_unparseable_files_are_findings_not_crashes(tmp_path: Path) -> None:
    _write(tmp_path, {"bad.py": "import torch\n\ndef broken(:\n    pass\n", "late.py": LATE})
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    (tmp_path / "latin.py").write_bytes(b"s = '\xff'\n")
    result = lint_paths([str(tmp_path)])
    rules = sorted((Path(f.path).name, f.rule) for f in result.findings)
    # No target known: a file this Python cannot parse may be newer syntax (a note), except
    # what no Python parses (NUL bytes, bytes that are not UTF-8).
    assert rules == [
        ("bad.py", "GPF901"),
        ("late.py", "GPF001"),
        ("latin.py", "GPF900"),
        ("nul.py", "GPF900"),
    ]
    bad = next(f for f in result.findings if f.path.endswith("bad.py"))
    assert bad.line == 3 and "cannot parse it" in bad.message


def test_directory_walk_skips_hidden_virtualenvs_and_caches(tmp_path: Path) -> None:
    for sub in (".git", "__pycache__", "venv", "pkg"):
        _write(tmp_path, {f"{sub}/m.py": LATE})
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "pkg" / "notes.txt").write_text(LATE)
    result = lint_paths([str(tmp_path)])
    assert result.files == 1
    assert [Path(f.path).parent.name for f in result.findings] == ["pkg"]


def test_setuptools_build_copies_are_not_read_twice(tmp_path: Path) -> None:
    # A review (2026-12-05): `python setup.py build` leaves build/lib/pkg/m.py, a copy whose
    # findings doubled the real ones. A folder named build elsewhere is read.
    for sub in ("pkg", "build/lib/pkg", "build/lib.linux-x86_64-cpython-311/pkg", "build/pkg"):
        _write(tmp_path, {f"{sub}/m.py": LATE})
    found = sorted(
        Path(f.path).relative_to(tmp_path).as_posix() for f in lint_paths([str(tmp_path)]).findings
    )
    assert found == ["build/pkg/m.py", "pkg/m.py"]


@pytest.mark.parametrize(
    ("pattern", "left"),
    [
        ("src/*.py", ["src/a/x.py", "src/legacy/b.py", "train.py"]),  # `*`: one directory
        ("src/**/*.py", ["train.py"]),
        ("*/a.py", ["src/a/x.py", "src/legacy/b.py", "train.py"]),
        ("legacy", ["src/a.py", "src/a/x.py", "train.py"]),
        ("/legacy", ["src/a.py", "src/a/x.py", "src/legacy/b.py", "train.py"]),
    ],
)
def test_exclude_globs_read_as_gitignore_does(
    tmp_path: Path, pattern: str, left: list[str]
) -> None:
    """A review (2026-12-05): `*` matched across `/`, so `src/*.py` also dropped src/a/x.py."""
    files = {"train.py": LATE, "src/a.py": LATE, "src/a/x.py": LATE, "src/legacy/b.py": LATE}
    _write(tmp_path, {**files, "pyproject.toml": f'[tool.gpufix.lint]\nexclude = ["{pattern}"]\n'})
    assert sorted({r[0] for r in _rules(tmp_path)}) == left


def test_target_version_option_wins_and_rule_ids_take_any_case(tmp_path: Path) -> None:
    # A review's shapes (2026-12-03): --target-version did not get past a bad requires-python,
    # and `gpf002 = "off"` was refused though a noqa comment takes `gpf002`.
    (tmp_path / "pyproject.toml").write_text('[project]\nrequires-python = ">=banana"\n')
    assert _parse_rules(tmp_path, MATCH, "py310") == []
    (tmp_path / "pyproject.toml").write_text('[tool.gpufix.lint.severity]\ngpf001 = "off"\n')
    (tmp_path / "m.py").write_text(
        "import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
    )
    out, err = io.StringIO(), io.StringIO()
    assert main_lint([str(tmp_path)], out=out, err=err) == 0, err.getvalue()


def test_a_target_older_than_3_7_is_a_note_not_a_syntax_error(tmp_path: Path) -> None:
    # ast reads no grammar older than 3.7: `async` as a name is valid 3.6 (review, 2026-12-03).
    assert _parse_rules(tmp_path, "async = True\n", "py36") == [("GPF901", "note")]
    assert _parse_rules(tmp_path, "async = True\n", "py37") == [("GPF900", "error")]


@pytest.mark.parametrize(
    "pattern", ["./legacy/a.py", "{root}/legacy/a.py", "**/legacy/*.py", "./legacy", "legacy"]
)
def test_exclude_patterns_as_users_write_them(tmp_path: Path, pattern: str) -> None:
    # A review's shapes (2026-12-03): `./x`, an absolute path and a leading `**/` matched
    # nothing, silently.
    pattern = pattern.format(root=tmp_path)
    _write(
        tmp_path,
        {
            "pyproject.toml": f'[tool.gpufix.lint]\nexclude = ["{pattern}"]\n',
            "train.py": LATE,
            "legacy/a.py": LATE,
        },
    )
    assert [r[0] for r in _rules(tmp_path)] == ["train.py"]


def test_a_notebook_named_on_the_command_line_is_refused_not_passed(tmp_path: Path) -> None:
    nb = tmp_path / "nb.ipynb"
    nb.write_text('{"cells": [], "nbformat": 4}\n')  # its JSON is one Python expression
    out, err = io.StringIO(), io.StringIO()
    assert main_lint([str(nb)], out=out, err=err) == 3
    assert "a Jupyter notebook" in err.getvalue() and err.getvalue().count("\n") == 1


def test_without_pyproject_the_checkout_is_the_root(tmp_path: Path) -> None:
    # A review's shape (2026-12-03): with no pyproject.toml the root was the paths' common
    # directory, so `gpufix lint tests/t.py` (as pre-commit passes files) checked a test that
    # `gpufix lint .` left alone. The checkout (`.git`) is the root now.
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {"tests/t.py": LATE})
    whole = lint_paths([str(tmp_path)])
    alone = lint_paths([str(tmp_path / "tests" / "t.py")])
    assert whole.findings == alone.findings == ()
    assert whole.unchecked == alone.unchecked == 1


def test_an_empty_path_or_a_link_loop_is_named_as_such(tmp_path: Path) -> None:
    # A review's shapes (2026-12-03): "" read as "." ("source file . is not a regular file")
    # and a link loop as "no such file or directory".
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for given, needle in (("", "an empty path"), (str(tmp_path / "a"), "leads nowhere")):
        out, err = io.StringIO(), io.StringIO()
        assert main_lint([given], out=out, err=err) == 3
        assert needle in err.getvalue() and err.getvalue().count("\n") == 1
