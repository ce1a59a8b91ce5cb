"""gpufix lint as a CI job keeps it (a review, 2026-12-07): one file reached twice, SARIF paths
from the checkout's root, what a run could not read, fingerprints, the configuration's edges,
`# noqa` edges and `--exit-zero`."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from gpufix.workload.lint import main_lint

BAD = 'import os\nimport torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'


def _run(paths: list[str], fmt: str = "text", **kw: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main_lint(paths, fmt, out=out, err=err, **kw)  # type: ignore[arg-type]
    return code, out.getvalue(), err.getvalue()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "src" / "pkg" / "a.py").write_text(BAD)
    (repo / "train.py").write_text(BAD)
    return repo


def test_one_file_reached_twice_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lint . src` and `./train.py train.py` crashed (KeyError: './src/pkg/a.py'), and
    `lint src src` counted one file twice."""
    repo = _repo(tmp_path)
    monkeypatch.chdir(repo)
    for paths in ([".", "src"], ["./train.py", "train.py"], ["train.py", str(repo / "train.py")]):
        code, out, err = _run(paths)
        assert code == 1, err
        assert len(out.splitlines()) == len(set(out.splitlines())), out
    code, out, err = _run(["src", "src"])
    assert out.count("GPF001") == 1 and "in 1 file(s)" in err


def test_a_link_to_a_file_of_the_run_is_reported_at_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path)
    (repo / "other").mkdir()
    (repo / "other" / "link.py").symlink_to("../train.py")
    monkeypatch.chdir(repo)
    _code, out, _ = _run(["."], "json")
    paths = [f["path"] for f in json.loads(out)["findings"]]
    assert sorted(paths) == ["./src/pkg/a.py", "./train.py"]


def test_sarif_paths_are_from_the_checkouts_root_wherever_lint_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub reads a relative uri from the repository's root: a job run in `src/` uploaded
    `pkg/a.py`, which names no file of the repository."""
    repo = _repo(tmp_path)
    monkeypatch.chdir(repo / "src")
    code, out, _ = _run([], "sarif")
    assert code == 1
    run = json.loads(out)["runs"][0]
    where = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert where == {"uri": "src/pkg/a.py", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    _code, out, _ = _run(["../train.py"], "sarif")
    where = json.loads(out)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"] == "train.py"


def test_sarif_fingerprints_survive_lines_added_above_and_tell_twins_apart(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    f = tmp_path / "t.py"
    twice = BAD + 'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    f.write_text(twice)

    def prints() -> list[str]:
        log = json.loads(_run([str(f)], "sarif")[1])
        return [r["partialFingerprints"]["gpufixLineHash/v1"] for r in log["runs"][0]["results"]]

    first = prints()
    assert len(first) == 2 and first[0] != first[1]
    f.write_text("# a comment\n\n" + twice)
    assert prints() == first


def test_related_places_are_lines_linked_from_the_message(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "t.py").write_text(BAD)
    result = json.loads(_run([str(tmp_path / "t.py")], "sarif")[1])["runs"][0]["results"][0]
    related = result["relatedLocations"]
    assert related and all(r["physicalLocation"]["region"].keys() == {"startLine"} for r in related)
    for r in related:
        assert f"]({r['id']})" in result["message"]["text"]


def test_what_a_run_could_not_read_is_in_the_sarif_and_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory that cannot be listed was passed over unsaid (os.walk drops its errors), and
    a file skipped for its size was said in the text summary only."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "big.py").write_bytes(b"#" * (5 << 20))
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "t.py").write_text(BAD)
    real_scandir = os.scandir

    def scandir(path: object = ".") -> object:
        if os.fspath(path) == str(locked):  # as for another account's mode-700 directory
            raise PermissionError(13, "Permission denied", str(locked))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    code, out, err = _run([str(tmp_path)], "sarif")
    notes = json.loads(out)["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    texts = sorted(n["message"]["text"] for n in notes)
    assert code == 1 and len(texts) == 2
    assert "big.py" in texts[0] and f"{locked}: directory not readable" in texts[1]
    assert "2 file(s) skipped" in err
    code, out, err = _run([str(tmp_path)], "json")
    assert len(json.loads(out)["skipped_files"]) == 2


def test_a_pyproject_above_the_checkout_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outer pyproject.toml made the checkout's own path (`examples/...`) an example, and its
    findings notes: exit 0 for a real GPF001."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "outer"\n')
    repo = tmp_path / "examples" / "repo"
    repo.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "train.py").write_text(BAD)
    monkeypatch.chdir(repo)
    code, out, _ = _run([])
    assert code == 1 and "[note" not in out


def test_config_globs_are_read_from_where_lint_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--config ci/gpufix.toml` read `src/**` from ci/: nothing matched, src/ went unchecked."""
    repo = _repo(tmp_path)
    (repo / "scripts" / "old").mkdir(parents=True)
    (repo / "scripts" / "old" / "o.py").write_text(BAD)
    (repo / "ci").mkdir()
    conf = repo / "ci" / "gpufix.toml"
    conf.write_text('[tool.gpufix.lint]\ninclude = ["src/**", "train.py"]\n')
    monkeypatch.chdir(repo)
    code, out, _ = _run(["."], config_file="ci/gpufix.toml")
    assert code == 1 and "src/pkg/a.py" in out and "train.py" in out and "o.py" not in out
    conf.write_text('[tool.gpufix.lint]\nexclude = ["scripts/old/**"]\n')
    _code, out, _ = _run(["."], config_file="ci/gpufix.toml")
    assert "o.py" not in out and "a.py" in out


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        (
            '[tool.gpufix.lint.severity]\nGPF001 = "off"\ngpf001 = "error"\n',
            "GPF001 is given twice",
        ),
        ('[tool.gpufix.lint]\ntarget-version = "py399"\n', "bad target version"),
    ],
)
def test_configuration_that_contradicts_itself_or_names_no_python_is_exit_3(
    tmp_path: Path, toml: str, says: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(toml)
    (tmp_path / "t.py").write_text("x = 1\n")
    code, _, err = _run([str(tmp_path)])
    assert code == 3 and says in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("given", ["3.99", "py399", "3.16"])
def test_a_target_version_no_python_has_is_refused(tmp_path: Path, given: str) -> None:
    (tmp_path / "t.py").write_text("print 'x'\n")
    code, _, err = _run([str(tmp_path / "t.py")], target_version=given)
    assert code == 3 and "bad target version" in err


@pytest.mark.parametrize(
    "head", [b"# -*- coding: foobar -*-\n", b"\xef\xbb\xbf# coding: latin-1\n"]
)
def test_an_encoding_no_python_reads_is_gpf900(tmp_path: Path, head: bytes) -> None:
    """They were GPF901 ("may be newer syntax"), a note: exit 0."""
    (tmp_path / "t.py").write_bytes(head + b"x = 1\n")
    code, out, _ = _run([str(tmp_path / "t.py")])
    assert code == 1 and "GPF900" in out


@pytest.mark.parametrize(
    ("comment", "hidden"),
    [
        ("# noqa: GPF-001", False),  # a code it cannot read silences nothing, not everything
        ("# nosec # noqa: GPF003 # noqa: GPF001", True),  # every noqa of the comment counts
        ("# noqa: GPF003", False),
        ("# noqa", True),
    ],
)
def test_noqa_edges(tmp_path: Path, comment: str, hidden: bool) -> None:
    (tmp_path / "t.py").write_text(BAD.rstrip("\n") + f"  {comment}\n")
    _code, out, _ = _run([str(tmp_path / "t.py")])
    assert ("GPF001" not in out) is hidden, out


def test_exit_zero_keeps_the_findings_and_the_bad_input_code(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(BAD)
    code, out, _ = _run([str(tmp_path / "t.py")], "sarif", exit_zero=True)
    assert code == 0 and json.loads(out)["runs"][0]["results"]
    assert _run([str(tmp_path / "none.py")], exit_zero=True)[0] == 3
    r = subprocess.run(
        ["gpufix", "lint", "--exit-zero", str(tmp_path / "t.py")], capture_output=True, text=True
    )
    assert r.returncode == 0 and "GPF001" in r.stdout


def test_a_named_file_that_cannot_be_read_is_bad_input_however_it_was_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-07): `lint . f.py` kept `./f.py` (the walk's spelling), and a FIFO
    named on the command line became a skipped file, exit 0."""
    (tmp_path / "a.py").write_text("x = 1\n")
    os.mkfifo(tmp_path / "f.py")
    monkeypatch.chdir(tmp_path)
    for paths in (["f.py"], [".", "f.py"], ["f.py", "."]):
        assert _run(paths)[0] == 3, paths


def test_sarif_through_a_linked_checkout_names_files_the_same_way(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (tmp_path / "link").symlink_to(repo)
    direct = json.loads(_run([str(repo / "src")], "sarif")[1])["runs"][0]["results"][0]
    linked = json.loads(_run([str(tmp_path / "link" / "src")], "sarif")[1])["runs"][0]["results"][0]
    assert direct["locations"] == linked["locations"]
    assert direct["partialFingerprints"] == linked["partialFingerprints"]


def test_a_fingerprint_hashes_the_line_python_numbers(tmp_path: Path) -> None:
    """str.splitlines() also breaks at a form feed: the hash was of another line."""
    (tmp_path / ".git").mkdir()
    f = tmp_path / "t.py"
    f.write_text(BAD + "\f\nx = 1\n")
    first = json.loads(_run([str(f)], "sarif")[1])["runs"][0]["results"][0]
    f.write_text("import os\nimport torch\n\f\n" + 'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    moved = json.loads(_run([str(f)], "sarif")[1])["runs"][0]["results"][0]
    assert first["partialFingerprints"] == moved["partialFingerprints"]
