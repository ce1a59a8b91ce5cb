"""A fleet operator's review (2026-12-05), each shape through the real CLI: an inventory whose
host range names a hundred million hosts, a YAML alias expanded into `gpufix_snapshot`, `-o` onto
the inventory or a host's own snapshot, a verdict from another machine, options a snapshot plan
cannot honour, a host compared with itself, an empty group. Each is one line and exit 3."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from .conftest import CliRun

ROOT = Path(__file__).parents[2]
H200 = str(ROOT / "docs" / "device" / "h200-probe-healthy.json")


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "inventory" / "example.yml", tmp_path / "ex.yml")
    shutil.copytree(ROOT / "inventory" / "snapshots", tmp_path / "snapshots")
    return tmp_path / "ex.yml"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("range.yml", 'all: {hosts: {"h[0:99999999]":}}\n'),
        ("range.ini", "[all]\nh[0:99999999]\n"),
        ("product.yml", 'all: {hosts: {"h[0:999][0:999]":}}\n'),  # ranges multiply
    ],
)
def test_a_host_range_past_the_bound_is_refused_before_ansible_expands_it(
    cli: CliRun, tmp_path: Path, name: str, text: str
) -> None:
    (tmp_path / name).write_text(text)
    start = time.monotonic()
    code, _, err = cli("plan", "h1", "-i", str(tmp_path / name))
    assert code == 3 and "a host range names" in err and err.count("\n") == 1
    assert time.monotonic() - start < 10  # before: gigabytes, then a MemoryError traceback


def test_a_yaml_alias_in_gpufix_snapshot_is_refused_unread(cli: CliRun, tmp_path: Path) -> None:
    bomb = "\n".join(
        ["x0: &a0 [y, y, y, y, y, y, y, y, y]"]
        + [f"x{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 16)]
    )
    body = "all:\n  hosts:\n    h1:\n      gpufix_snapshot: *a15\n"
    (tmp_path / "bomb.yml").write_text(
        "all:\n  vars:\n" + "".join(f"    {ln}\n" for ln in bomb.splitlines()) + body[5:]
    )
    start = time.monotonic()
    code, _, err = cli("plan", "h1", "-i", str(tmp_path / "bomb.yml"))
    assert code == 3 and "gpufix_snapshot must be a file path" in err
    assert time.monotonic() - start < 20  # before: str() of 4**15 items, killed at 60 s


def test_a_directory_inventory_is_bounded_in_all(cli: CliRun, tmp_path: Path) -> None:
    d = tmp_path / "inv"
    d.mkdir()
    line = "# " + "x" * 1000 + "\n"
    for i in range(3):
        (d / f"part{i}.yml").write_text(line * 6000)  # 6 MB each, 18 MB in all
    code, _, err = cli("plan", "h1", "-i", str(d))
    assert code == 3 and "over 16 MiB in all" in err


def test_an_empty_group_is_named_as_such(cli: CliRun, tmp_path: Path) -> None:
    (tmp_path / "e.yml").write_text(
        "all:\n  children:\n    empty: {}\n    g:\n      hosts:\n        a:\n"
    )
    code, _, err = cli("plan", "empty", "-i", str(tmp_path / "e.yml"))
    assert code == 3 and "group 'empty' in" in err and "has no hosts" in err


@pytest.mark.parametrize("command", ["plan", "facts"])
def test_output_onto_the_inventory_or_a_snapshot_is_refused(
    cli: CliRun, inv: Path, command: str
) -> None:
    before = inv.read_bytes()
    snap = inv.parent / "snapshots" / "bionic-ga-2x3090.json"
    snap_before = snap.read_bytes()
    for target in (inv, snap):
        code, _, err = cli(command, "host01", "-i", str(inv), "-o", str(target))
        assert code == 3 and "is the input" in err, err
    assert inv.read_bytes() == before and snap.read_bytes() == snap_before


def test_a_verdict_whose_driver_is_another_machines_is_refused(cli: CliRun) -> None:
    """host01 (bionic, driver 470.182.03, torch 1.12.1) with a verdict recorded on an H200 box
    (driver 580.159.04, torch 2.11.0+cu130): before, that torch replaced host01's and the plan
    pinned R580 with a reboot."""
    code, _, err = cli("plan", "host01", "--probe-verdict", H200)
    assert code == 3
    assert "its driver 580.159.04 is not this host's 470.182.03" in err


def test_options_a_snapshot_plan_cannot_honour_are_refused(cli: CliRun, inv: Path) -> None:
    snap = str(inv.parent / "snapshots" / "bionic-ga-2x3090.json")
    code, _, err = cli("plan", "host01", "--facts", snap, "--python-env", "/usr/bin/python3")
    assert code == 3 and "--facts and --python-env cannot be used together" in err
    code, _, err = cli("plan", "host01", "--facts", snap, "-i", str(inv.parent / "none.yml"))
    assert code == 3 and "inventory not found" in err


def test_a_plan_file_with_strategy_names_the_conflict(cli: CliRun, inv: Path) -> None:
    plan = inv.parent / "p.json"
    code, _, _ = cli("plan", "host01", "-i", str(inv), "-o", str(plan))
    assert code == 0
    code, _, err = cli("apply", str(plan), "--strategy", "kernel-upgrade", "-i", str(inv))
    assert code == 3 and "is a plan file and --strategy plans anew" in err


def test_a_lint_config_that_is_not_a_regular_file_says_so(cli: CliRun, tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "cfg.toml"
    os.mkfifo(fifo)
    (tmp_path / "t.py").write_text("x = 1\n")
    code, _, err = cli("lint", "--config", str(fifo), str(tmp_path / "t.py"))
    assert code == 3 and "is not a regular file" in err  # before: "no such config file"


IMAGE = "registry.example/train@sha256:" + "a" * 64


def test_an_image_with_a_strategy_that_runs_none_is_refused(cli: CliRun, inv: Path) -> None:
    code, _, err = cli("plan", "host01", "-i", str(inv), "--strategy", "pcie-acs", "--image", IMAGE)
    assert code == 3 and "--image is used by container-fallback and container-fix" in err
    code, _, err = cli("plan", "host01", "-i", str(inv), "--no-containers", "--image", IMAGE)
    assert code == 3 and "--no-containers rules them out" in err  # before: both accepted


def test_a_relative_state_dir_is_refused_and_not_created(
    cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUFIX_STATE_DIR", "state")
    code, _, err = cli("status")
    assert code == 3 and "is not an absolute path" in err and err.count("\n") == 1
    assert not (tmp_path / "state").exists()  # before: journals under the working directory


def test_a_group_host_whose_snapshot_is_missing_is_named(cli: CliRun, inv: Path) -> None:
    (inv.parent / "g.yml").write_text(
        "all:\n  children:\n    g:\n      hosts:\n"
        "        host01: {gpufix_snapshot: snapshots/bionic-ga-2x3090.json}\n"
        "        host02: {gpufix_snapshot: snapshots/missing.json}\n"
    )
    code, _, err = cli("plan", "g", "-i", str(inv.parent / "g.yml"))
    # the inventory is wrong: nothing is planned, and the line says which host to fix
    assert code == 3 and err.startswith("gpufix: error: host02: cannot read facts file")
