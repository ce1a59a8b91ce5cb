"""inputs.read_prefix: the start of a regular file, for files read as hints (lint's notebooks
and configs around the code); anything else is refused at once, never waited on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpufix.inputs import read_prefix


def test_the_start_of_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "big.json").write_bytes(b"x" * 3_000_000)
    assert read_prefix(tmp_path / "big.json", 1_500_000) == b"x" * 1_500_000
    (tmp_path / "small.json").write_bytes(b"{}")
    assert read_prefix(tmp_path / "small.json", 1 << 20) == b"{}"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_what_is_not_a_readable_regular_file_is_refused_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.yml")
    os.symlink("/dev/zero", tmp_path / "zero.json")
    (tmp_path / "dir.json").mkdir()
    for name in ("fifo.yml", "zero.json", "dir.json", "missing.json"):
        assert read_prefix(tmp_path / name, 1 << 20) is None, name
