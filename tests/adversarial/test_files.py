"""Every file gpufix reads goes through one door (gpufix.inputs): special files, huge files,
deep or odd JSON and wrong types give one line and exit 3, never a hang or a traceback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import ROOT, CliRun, facts, make_plan, plan_doc, write

GPUFIX = str(Path(sys.executable).parent / "gpufix")


def _fifo(tmp: Path) -> Path:
    p = tmp / "fifo.json"
    os.mkfifo(p)
    return p


def _zero_link(tmp: Path) -> Path:
    p = tmp / "zero.json"
    p.symlink_to("/dev/zero")
    return p


def _dir(tmp: Path) -> Path:
    p = tmp / "dir.json"
    p.mkdir()
    return p


def _huge(tmp: Path) -> Path:
    p = tmp / "huge.json"
    with p.open("wb") as fh:
        fh.truncate(80 * 1024 * 1024)  # sparse: larger than every cap
    return p


def _text(content: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        p = tmp / "doc.json"
        p.write_text(content)
        return p

    return make


def _bytes(content: bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        p = tmp / "doc.json"
        p.write_bytes(content)
        return p

    return make


BAD_FILES: dict[str, Callable[[Path], Path]] = {
    "dev-zero": lambda tmp: Path("/dev/zero"),
    "fifo": _fifo,
    "symlink-to-dev-zero": _zero_link,
    "directory": _dir,
    "huge": _huge,
    "missing": lambda tmp: tmp / "missing.json",
    "deep": _text("[" * 100_000 + "]" * 100_000),
    "deep-but-parsable": _text("[" * 200 + "]" * 200),
    "5000-digit-integer": _text("1" * 5000),
    "big-integer-in-object": _text('{"format": "gpufix-facts", "version": ' + "9" * 40 + "}"),
    "nan": _text('{"format": NaN}'),
    "infinity": _text('{"x": 1e999}'),
    "not-utf8": _bytes(b'{"x": "\xff\xfe"}'),
    "empty": _text(""),
    "array": _text("[]"),
    "wrong-types": _text('{"format": 5, "version": "1", "plans": {}}'),
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
@pytest.mark.parametrize("command", ["plan-facts", "plan-verdict", "apply", "diff"])
def test_bad_files_are_one_line_and_exit_3(
    command: str, kind: str, cli: CliRun, tmp_path: Path
) -> None:
    path = str(BAD_FILES[kind](tmp_path))
    argv = {
        "plan-facts": ["plan", "x", "--facts", path],
        "plan-verdict": [
            "plan",
            "x",
            "--facts",
            str(ROOT / "tests/fixtures/hosts/nogpu.json"),
            "--probe-verdict",
            path,
        ],
        "apply": ["apply", path, "--yes"],
        "diff": ["diff", path, str(ROOT / "tests/fixtures/hosts/nogpu.json")],
    }[command]
    code, _, err = cli(*argv)
    assert code == 3, err
    assert err.count("\n") == 1 and err.startswith("gpufix: error:"), err


def test_plan_facts_dev_zero_exits_3_within_the_bound() -> None:
    """The issue's own reproduction, as a user runs it: `timeout 20 gpufix plan x --facts /dev/zero`."""
    r = subprocess.run(
        ["timeout", "20", GPUFIX, "plan", "x", "--facts", "/dev/zero"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 3 and "not a regular file" in r.stderr


def test_a_snapshot_path_in_the_inventory_goes_through_the_same_door(
    cli: CliRun, tmp_path: Path
) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1:\n      gpufix_snapshot: /dev/zero\n")
    code, _, err = cli("plan", "h1", "-i", str(inv))
    assert code == 3 and "not a regular file" in err


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("verdict", "healthy-ish", "verdict: 'healthy-ish' is not one of"),
        ("version", 99, "version: 1 was expected"),
        ("world_size", "two", "world_size: 'two' is not of type"),
        ("stalled", {"phase": "nowhere", "ranks": [0]}, "stalled/phase: 'nowhere'"),
        # with verdict healthy: contradicts itself
        ("error", "CUDA error", "'healthy' with a stall or an error contradicts itself"),
    ],
)
def test_probe_verdicts_are_validated(
    field: str, value: object, needle: str, cli: CliRun, tmp_path: Path
) -> None:
    v = json.loads((ROOT / "docs/device/h200-probe-healthy.json").read_text())
    v[field] = value
    path = write(tmp_path / "v.json", v)
    code, _, err = cli(
        "plan",
        "x",
        "--facts",
        str(ROOT / "tests/fixtures/hosts/nogpu.json"),
        "--probe-verdict",
        str(path),
    )
    assert code == 3 and needle in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("[" * 200 + "]" * 200, "nested too deeply (limit 48)"),  # parses; the cap refuses it
        ("1" * 5000, "an integer of 5000 digits"),
        ('{"format": "gpufix-facts", "version": ' + "9" * 40 + "}", "an integer of 40 digits"),
        ('{"x": 1e999}', "number 1e999 out of range"),
        ("[" + "0," * 2_000_000 + "0]", "too many values (limit 2000000)"),
    ],
    ids=["depth", "digits", "digits-in-object", "infinity", "values"],
)
def test_each_cap_of_the_input_layer_names_itself(
    content: str, needle: str, cli: CliRun, tmp_path: Path
) -> None:
    """A mutation review (2026-12-05): with a cap turned off the file was still refused, by the
    schema, so only the message shows the cap at work."""
    path = tmp_path / "doc.json"
    path.write_text(content)
    code, _, err = cli("plan", "x", "--facts", str(path))
    assert code == 3 and needle in err and err.count("\n") == 1, err


def test_too_many_values_are_refused_before_the_document_is_built(
    cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user trial (2026-12-06): the value cap ran after json.loads had built the whole tree
    (a 60 MB plan file of zeros: 2.4 GB, 11 s)."""
    import json as json_module

    from gpufix import inputs

    path = tmp_path / "plan.json"
    path.write_text("[" + "0," * (inputs.MAX_NODES + 1) + "0]")

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("json.loads was called")

    monkeypatch.setattr(json_module, "loads", refuse)
    code, _, err = cli("apply", str(path), "--check")
    assert code == 3 and "too many values" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("command", ["plan", "facts"])
def test_the_wrote_line_shows_control_characters_escaped(
    command: str, cli: CliRun, tmp_path: Path
) -> None:
    """A user trial (2026-12-06): `-o` with an escape sequence in its name was echoed raw."""
    name = tmp_path / "w\x1b]0;TITLE\x07.json"
    code, _, err = cli(command, "host01", "-o", str(name))  # a recorded host: no SSH
    assert code == 0, err
    assert "\x1b" not in err and "\x07" not in err and "w\\x1b]0;TITLE\\x07.json" in err, err


def test_plan_o_is_atomic(cli: CliRun, tmp_path: Path) -> None:
    """A write that fails half way (the file size limit, EFBIG) leaves the previous plan whole
    and no temp file behind."""
    import resource
    import signal

    target = tmp_path / "plan.json"
    snap = str(ROOT / "tests/fixtures/hosts/bionic-ga-2x3090.json")
    code, _, err = cli("plan", "x", "--facts", snap, "-o", str(target))
    assert code == 0, err
    before = target.read_text()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        code, _, err = cli("plan", "x", "--facts", snap, "-o", str(target))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    assert code == 1 and "cannot write plan file" in err
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_plan_o_leaves_no_temp_file_when_the_target_is_a_directory(
    cli: CliRun, tmp_path: Path
) -> None:
    target = tmp_path / "plan.json"
    target.mkdir()
    snap = str(ROOT / "tests/fixtures/hosts/bionic-ga-2x3090.json")
    code, _, err = cli("plan", "x", "--facts", snap, "-o", str(target))
    assert code == 3 and "directory" in err
    assert sorted(os.listdir(tmp_path)) == ["plan.json"]


@pytest.mark.parametrize("kind", ["device", "fifo", "link"])
@pytest.mark.parametrize("command", ["plan", "facts"])
def test_o_never_replaces_a_device_a_fifo_or_a_link(
    kind: str, command: str, cli: CliRun, tmp_path: Path
) -> None:
    """As root, `-o /dev/null` renamed a regular file over the device node (review, 2026-12-03)."""
    target = tmp_path / "out"
    if kind == "device":
        os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # as /dev/null
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/proc/self/fd/1")
    snap = str(ROOT / "tests/fixtures/hosts/bionic-ga-2x3090.json")
    source = ("x", "--facts", snap) if command == "plan" else ("host01",)  # a recorded host
    code, _, err = cli(command, *source, "-o", str(target))
    assert code == 3 and "not a regular file" in err, err
    st = os.lstat(target)
    assert not stat.S_ISREG(st.st_mode)
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_plan_file_with_wrong_types_names_the_field(cli: CliRun, tmp_path: Path) -> None:
    doc = plan_doc(make_plan(facts("bionic-ga-2x3090")["facts"]))
    doc["plans"][0]["steps"][0]["reboot"] = "yes"
    code, _, err = cli("apply", str(write(tmp_path / "p.json", doc)), "--yes")
    assert code == 3 and "steps/0/reboot" in err


def test_shared_state_dir_keeps_its_mode(
    cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(shared))
    code, _, _ = cli("status")
    assert code == 0 and not (shared / "runs").exists()  # reading makes nothing
    from gpufix.apply.journal import runs_dir

    runs_dir()  # what a run makes before its journal
    assert (shared.stat().st_mode & 0o777) == 0o755
    assert ((shared / "runs").stat().st_mode & 0o777) == 0o700
